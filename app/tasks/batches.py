"""batches.requeue (beat): batches accepted but not stored, or stored but their releases not
joined into posts, after a while are sent again (their task was lost: Redis down, a worker killed)."""

from __future__ import annotations

import logging

from celery import shared_task

from app.config import get_settings
from app.db import session_scope
from app.models.batches import BatchState
from app.services.ingest.lifecycle import pending_batches

log = logging.getLogger(__name__)


@shared_task(name="batches.requeue", acks_late=True, ignore_result=False, send_events=False)
def requeue() -> dict:
    from app.tasks.ingest import store_batch

    age = get_settings().batch_requeue_after
    with session_scope() as session:
        pending = pending_batches(session, age)
    to_store, to_join = pending[BatchState.ACCEPTED], pending[BatchState.STORED]
    # The ingest task stores a batch still 'accepted' and joins one 'stored' (each step skips
    # what is done).
    for batch_id in to_store + to_join:
        store_batch.delay(batch_id)
    if to_store or to_join:
        log.info("requeued %d batches to store and %d to join", len(to_store), len(to_join))
    return pending
