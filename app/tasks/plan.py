"""plan.replan (beat, cron-like): plan every active group, one planner at a time."""
from __future__ import annotations

import logging

from celery import shared_task
from sqlalchemy import text

from app.config import get_settings
from app.db import get_engine, session_scope
from app.services.planner import groups_to_plan, plan_groups

log = logging.getLogger(__name__)

REPLAN_LOCK = 0x5EED_0001


@shared_task(name="plan.replan", acks_late=True, ignore_result=False)
def replan(days: int | None = None) -> list[dict]:
    settings = get_settings()
    # A session-level advisory lock: a second replan (another beat, a slow run) skips instead of
    # planning the same groups concurrently.
    with get_engine().connect() as lock_conn:
        if not lock_conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": REPLAN_LOCK}).scalar_one():
            log.info("replan already running elsewhere; skipped")
            return []
        try:
            with session_scope() as session:
                names = groups_to_plan(session)
            results = []
            for result in plan_groups(settings, names, days=days):
                log.info("replan %s: %s", result.group, result)
                results.append(result.as_dict())
            return results
        finally:
            lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": REPLAN_LOCK})
