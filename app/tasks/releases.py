"""releases.repair: recompute whole the releases a stored batch touched (release repair)."""

from __future__ import annotations

import logging

from celery import shared_task

from app.config import get_settings
from app.db import TransientDatabaseError, session_scope
from app.services.ingest.lifecycle import record_join_error
from app.services.ingest.repair import repair_batch

log = logging.getLogger(__name__)


@shared_task(
    name="releases.repair",
    acks_late=True,
    autoretry_for=(TransientDatabaseError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=None,
)
def repair(batch_id: int) -> int | None:
    """A transient database error is retried; any other is recorded on the batch with an attempt
    counted (it stays 'stored', 'failed' after BATCH_MAX_ATTEMPTS), as a failed join is."""
    try:
        with session_scope() as session:
            return repair_batch(session, batch_id)
    except Exception as exc:
        TransientDatabaseError.raise_if(exc)
        log.error("batch %s: release repair failed: %s", batch_id, exc)
        with session_scope() as session:
            record_join_error(
                session, batch_id, f"release repair: {type(exc).__name__}: {exc}", get_settings().batch_max_attempts
            )
        return None
