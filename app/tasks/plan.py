"""plan.replan (beat, cron-like): plan every active group, one planner at a time."""
from __future__ import annotations

import logging

from celery import shared_task
from sqlalchemy import text

from app.config import get_settings
from app.db import get_engine, session_scope
from app.services import groups as group_service
from app.services.nntp import connect_from_settings
from app.services.planner import plan_group

log = logging.getLogger(__name__)

REPLAN_LOCK = 0x5EED_0001


@shared_task(name="plan.replan", acks_late=True, ignore_result=False)
def replan(days: int | None = None) -> list[dict]:
    settings = get_settings()
    days = days or settings.plan_days
    # A session-level advisory lock: a second replan (another beat, a slow run) skips instead of
    # planning the same groups concurrently.
    with get_engine().connect() as lock_conn:
        if not lock_conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": REPLAN_LOCK}).scalar_one():
            log.info("replan already running elsewhere; skipped")
            return []
        try:
            results = []
            with session_scope() as session:
                names = [g.name for g in group_service.list_groups(session) if g.active]
            with connect_from_settings(settings) as client:
                for name in names:
                    with session_scope() as session:
                        group = group_service.get_group(session, name)
                        result = plan_group(session, client, group, days=days, range_size=settings.range_size)
                    log.info("replan %s: %s", name, result)
                    results.append(result.as_dict())
            return results
        finally:
            lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": REPLAN_LOCK})
