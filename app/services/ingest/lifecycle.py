"""A batch's life cycle outside the store: failed attempts counted (a poison batch ends 'failed'),
a failed join into posts recorded, the batches whose task was lost found again, failed batches
given fresh attempts."""

from __future__ import annotations

from sqlalchemy import func, text
from sqlalchemy.orm import Session

from app import metrics
from app.models import SeedBatch
from app.models.batches import BatchState


def record_failure(session: Session, batch_id: int, error: str, max_attempts: int) -> str:
    """Count a failed attempt at storing a batch; after max_attempts the batch is 'failed' (a
    poison batch, shown in status with its error) and no longer retried. Returns the batch's state
    ('unknown' when it is gone). Counted when the caller commits (app.metrics.store_failed)."""
    return _count_attempt(session, batch_id, BatchState.ACCEPTED, error, max_attempts)


def record_join_error(session: Session, batch_id: int, error: str, max_attempts: int) -> str:
    """A stored batch whose join into posts failed with an error that would come again: the error
    shown in status and an attempt counted; the requeue sweep tries again, and after max_attempts
    the batch is 'failed'. It never goes back to be stored again (its releases' sums would count
    it twice): retry_failed sends it back to 'stored'. Returns the batch's state."""
    return _count_attempt(session, batch_id, BatchState.STORED, error, max_attempts)


def _count_attempt(session: Session, batch_id: int, expected: BatchState, error: str, max_attempts: int) -> str:
    row = session.get(SeedBatch, batch_id, with_for_update=True)
    if row is None or row.state != expected:
        return row.state if row else "unknown"
    row.attempts += 1
    row.error = error[:2000]
    if row.attempts >= max_attempts:
        row.state = BatchState.FAILED
    elif expected == BatchState.STORED:
        row.stored_at = func.now()  # the requeue sweep waits its period from now
    group = session.execute(
        text("SELECT g.name FROM seed_ranges r JOIN groups g ON g.id = r.group_id WHERE r.id = :r"), {"r": row.range_id}
    ).scalar_one()
    metrics.store_failed(
        session,
        group,
        numbers=row.batch_to - row.batch_from + 1,
        body_bytes=row.body_bytes or 0,
        for_good=row.state == BatchState.FAILED,
    )
    return row.state


def pending_batches(session: Session, older_than_seconds: int, limit: int = 1000) -> dict[BatchState, list[int]]:
    """Batches not stored or not joined after a while, by state: their task was lost (Redis
    down, a worker died)."""
    rows = session.execute(
        text(
            "SELECT id, state FROM seed_batches WHERE state IN ('accepted', 'stored')"
            " AND coalesce(stored_at, accepted_at) < now() - make_interval(secs => :age) ORDER BY id LIMIT :limit"
        ),
        {"age": older_than_seconds, "limit": limit},
    )
    found: dict[BatchState, list[int]] = {BatchState.ACCEPTED: [], BatchState.STORED: []}
    for batch_id, state in rows:
        found[BatchState(state)].append(batch_id)
    return found


def retry_failed(session: Session) -> list[int]:
    """Failed (poison) batches back with fresh attempts, for an operator's retry: to 'accepted'
    when their body waits to be stored, to 'stored' when the catalog holds them already (the store
    let go of the body) and only their join into posts failed."""
    return list(
        session.scalars(
            text(
                "UPDATE seed_batches SET state = CASE WHEN body IS NULL THEN 'stored' ELSE 'accepted' END, attempts = 0,"
                " stored_at = CASE WHEN body IS NULL THEN now() ELSE stored_at END WHERE state = 'failed' RETURNING id"
            )
        )
    )
