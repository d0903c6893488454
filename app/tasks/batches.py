"""batches.requeue (beat): batches accepted but not stored, or stored but not gathered, after a
while are sent again (their task was lost: Redis down, a worker killed)."""
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
    for batch_id in pending["accepted"]:
        store_batch.delay(batch_id)
    for batch_id in pending["stored"]:
        gather.delay(batch_id)
    if pending["accepted"] or pending["stored"]:
        log.info("requeued %d batches to store and %d to gather", len(pending["accepted"]), len(pending["stored"]))
    return pending
