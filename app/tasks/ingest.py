"""ingest.store_batch: an accepted batch into the catalog tables."""
from __future__ import annotations

import logging

import psycopg
from celery import shared_task
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.config import get_settings
from app.db import session_scope
from app.services import batches

log = logging.getLogger(__name__)

MOMENT_ERRORS = (OperationalError, psycopg.OperationalError, PoolTimeout)


@shared_task(
    name="ingest.store_batch", bind=True, acks_late=True,
    # The database being away (restart, failover), a deadlock, a lock timeout or no free pooled
    # connection is retried with backoff, without counting against the batch: the batch is fine,
    # the moment is not. The store's COPYs and release locks run on the psycopg cursor: its errors
    # come unwrapped.
    autoretry_for=MOMENT_ERRORS, retry_backoff=2, retry_backoff_max=60, retry_jitter=True,
    max_retries=None,
)
def store_batch(self, batch_id: int) -> dict:
    try:
        with session_scope() as session:
            result = batches.store_batch(session, batch_id)
    except MOMENT_ERRORS:
        raise
    except Exception as exc:
        settings = get_settings()
        with session_scope() as session:
            state = batches.record_failure(session, batch_id, f"{type(exc).__name__}: {exc}",
                                           settings.batch_max_attempts)
        if state == "failed":
            log.error("batch %s failed for good after repeated errors: %s", batch_id, exc)
            return {"batch_id": batch_id, "state": "failed"}
        raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries), max_retries=None)
    # The store brings the batch's releases up to date in its own transaction (the batch is then
    # 'gathered'): no gather task to send.
    return {"batch_id": batch_id, "state": "stored" if result.stored else "already_stored"}
