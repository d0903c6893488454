"""ingest.store_batch: an accepted batch into the catalog tables and its releases into their posts;
enqueue_store sends it."""

from __future__ import annotations

import logging
import time
from typing import cast

from celery import shared_task
from kombu.connection import ConnectionPool

from app.config import get_settings
from app.db import TransientDatabaseError, session_scope
from app.models.batches import BatchState
from app.services.ingest import posts, store
from app.services.ingest.lifecycle import record_failure, record_join_error
from app.services.status import batch_summary

log = logging.getLogger(__name__)


# Seconds the API waits for a free broker connection from the pool (its threads share it).
ENQUEUE_POOL_WAIT = 5


@shared_task(
    name="ingest.store_batch",
    bind=True,
    acks_late=True,
    autoretry_for=(TransientDatabaseError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=None,
)
def store_batch(self, batch_id: int) -> dict:
    """Store the batch (from 'accepted'), then join its releases into their posts (from 'stored'),
    each in a transaction of its own; either step finds its work done on a redelivery. The requeue
    sweep sends this task for batches left in either state.

    Its result is what Flower shows of the task: the batch's group, range and article numbers,
    the articles it brought, the files and releases it kept, and the seconds each step took."""
    started = time.monotonic()
    try:
        with session_scope() as session:
            result = store.store_batch(session, batch_id)
    except Exception as exc:
        TransientDatabaseError.raise_if(exc)
        settings = get_settings()
        with session_scope() as session:
            state = record_failure(session, batch_id, f"{type(exc).__name__}: {exc}", settings.batch_max_attempts)
        if state == BatchState.FAILED:
            log.error("batch %s failed for good after repeated errors: %s", batch_id, exc)
            return {"batch_id": batch_id, "state": BatchState.FAILED.value, "seconds": _since(started)}
        raise self.retry(exc=exc, countdown=min(60, 2**self.request.retries), max_retries=None) from exc
    stored = time.monotonic()
    try:
        with session_scope() as session:
            changed = posts.join_batch(session, batch_id, result.names)
    except Exception as exc:
        TransientDatabaseError.raise_if(exc)
        # The batch is in the catalog; only its posts wait. It stays 'stored' with the error shown
        # and an attempt counted, and the requeue sweep tries again after a while (not at once:
        # the same error would come); after BATCH_MAX_ATTEMPTS it is 'failed'.
        log.error("batch %s: joining its releases into posts failed: %s", batch_id, exc)
        with session_scope() as session:
            state = record_join_error(
                session, batch_id, f"{type(exc).__name__}: {exc}", get_settings().batch_max_attempts
            )
        return {"batch_id": batch_id, "state": state, "error": str(exc)[:200], "seconds": _since(started)}
    joined = time.monotonic()
    with session_scope() as session:
        summary = batch_summary(session, batch_id) or {"batch_id": batch_id}
    return {
        "batch_id": batch_id,
        "group": summary.get("group"),
        "range": summary.get("range_id"),
        "first": summary.get("batch_from"),
        "last": summary.get("batch_to"),
        "articles": summary.get("articles"),
        "files": summary.get("files"),
        "releases": summary.get("releases"),
        "dropped": summary.get("dropped"),
        # already_stored: a redelivery found the batch in the catalog (its figures are the first store's).
        "state": "stored" if result.stored else "already_stored",
        "posts_changed": changed or 0,
        "seconds": _since(started),
        "store_seconds": round(stored - started, 3),
        "join_seconds": round(joined - stored, 3),
    }


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def enqueue_store(batch_id: int) -> bool:
    """Ask a worker to store the batch; False when the broker is unreachable (beat requeues it).
    Called after the commit that made the batch durable: a worker never looks for a batch that
    is not there yet.

    One connection attempt, no retries: the batch is durable already, and a node waiting on
    an answer while Redis is away must not wait for kombu's reconnection back-off. The
    connection comes from the app's broker pool (a new one costs the API about 3 ms of CPU a
    batch); one that failed is closed before it goes back, so the next enqueue connects anew.
    """
    try:
        # Celery.pool is kombu's pool of broker connections (celery-types says a ProducerPool).
        pool = cast(ConnectionPool, store_batch.app.pool)
        with pool.acquire(block=True, timeout=ENQUEUE_POOL_WAIT) as connection:
            try:
                connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
                store_batch.apply_async(  # type: ignore[call-arg]  # celery-types lacks connection= (**options)
                    (batch_id,), connection=connection, retry=False
                )
            except Exception:
                connection.collect()  # its sockets closed: not handed out again broken
                raise
        return True
    except Exception as exc:  # the batch is durable; the requeue sweep will send it again
        log.warning("could not enqueue batch %s (%s); the requeue sweep will", batch_id, exc)
        return False
