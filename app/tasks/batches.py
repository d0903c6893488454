"""batches.requeue (beat): what was accepted or stored but never finished is sent again."""
from __future__ import annotations

import logging

from celery import shared_task

from app.config import get_settings
from app.db import session_scope
from app.services import batches

log = logging.getLogger(__name__)


@shared_task(name="batches.requeue", acks_late=True, ignore_result=False)
def requeue() -> dict:
    from app.tasks.ingest import store_batch
    from app.tasks.releases import gather

    age = get_settings().batch_requeue_after
    with session_scope() as session:
        pending = batches.pending_batches(session, age)
        ungathered = batches.ungathered_releases(session, age)
    for batch_id in pending:
        store_batch.delay(batch_id)
    for group_id, keys in ungathered.items():
        gather.delay(group_id, keys)
    if pending or ungathered:
        log.info("requeued %d batches and %d groups' releases", len(pending), len(ungathered))
    return {"batches": pending, "release_groups": sorted(ungathered)}
