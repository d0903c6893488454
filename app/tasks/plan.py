"""plan.replan (beat, cron-like): plan every active group's backfill; plan.live (beat, every
LIVE_PLAN_INTERVAL seconds): plan every active group's new articles. Each runs one at a time,
and plans each group on its own: a group that fails is reported, and the task fails with a
summary only after every group was tried."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from celery import shared_task
from sqlalchemy import text

from app.config import get_settings
from app.db import get_engine, session_scope
from app.services.planner import PlanningFailed, PlanResult, groups_to_plan, plan_groups, plan_live, summary

log = logging.getLogger(__name__)

REPLAN_LOCK = 0x5EED_0001
LIVE_LOCK = 0x5EED_0002


@shared_task(name="plan.replan", acks_late=True, ignore_result=False)
def replan(days: int | None = None) -> list[dict]:
    settings = get_settings()
    return _plan_all("replan", REPLAN_LOCK, lambda names: plan_groups(settings, names, days=days))


@shared_task(name="plan.live", acks_late=True, ignore_result=False, send_events=False)
def live() -> list[dict]:
    settings = get_settings()
    return _plan_all("live planning", LIVE_LOCK, lambda names: plan_live(settings, names))


def _plan_all(what: str, lock: int, plan) -> list[dict]:
    # A session-level advisory lock: a second run (another beat, a slow run) skips instead of
    # planning the same groups concurrently. Live and backfill planning of one group never
    # interleave either: the planner takes a per-group lock for each group.
    with get_engine().connect() as lock_conn:
        if not lock_conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock}).scalar_one():
            log.info("%s already running elsewhere; skipped", what)
            return []
        try:
            with session_scope() as session:
                names = groups_to_plan(session)
            results: list[PlanResult] = []
            each: Iterator[PlanResult] = plan(names)
            for result in each:
                log.info("%s %s: %s", what, result.group, result)
                results.append(result)
        finally:
            lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock})
    if any(r.error is not None for r in results):
        raise PlanningFailed(f"{what}: {summary(results)}")
    return [r.as_dict() for r in results]
