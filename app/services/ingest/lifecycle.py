"""A batch's life cycle outside the store: failed attempts counted (a poison batch ends 'failed'),
a failed join into posts recorded, the batches whose task was lost found again, failed batches
given fresh attempts."""
from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from app import metrics
from app.models import SeedBatch
from app.models.batches import BatchState


def record_failure(session: Session, batch_id: int, error: str, max_attempts: int) -> str:
    """Count a failed attempt; after max_attempts the batch is 'failed' (a poison batch, shown
    in status with its error) and no longer retried. Returns the batch's state ('unknown' when
    it is gone). Counted when the caller commits (app.metrics.store_failed)."""
    row = session.get(SeedBatch, batch_id, with_for_update=True)
    if row is None or row.state != BatchState.ACCEPTED:
        return row.state if row else "unknown"
    row.attempts += 1
    row.error = error[:2000]
    if row.attempts >= max_attempts:
        row.state = BatchState.FAILED
    group = session.execute(text("SELECT g.name FROM seed_ranges r JOIN groups g ON g.id = r.group_id"
                                 " WHERE r.id = :r"), {"r": row.range_id}).scalar_one()
    metrics.store_failed(session, group, numbers=row.batch_to - row.batch_from + 1, body_bytes=row.body_bytes or 0,
                         for_good=row.state == BatchState.FAILED)
    return row.state


def record_gather_error(session: Session, batch_id: int, error: str) -> None:
    """A stored batch whose join into posts failed: the error shown in status; the requeue sweep
    tries again. Its attempts are not counted: a stored batch never goes back to be stored again
    (its releases' sums would count it twice)."""
    session.execute(text("UPDATE seed_batches SET error = :e, stored_at = now() WHERE id = :b AND state = 'stored'"),
                    {"e": error[:2000], "b": batch_id})


def pending_batches(session: Session, older_than_seconds: int, limit: int = 1000) -> dict[BatchState, list[int]]:
    """Batches not stored or not gathered after a while, by state: their task was lost (Redis
    down, a worker died)."""
    rows = session.execute(text(
        "SELECT id, state FROM seed_batches WHERE state IN ('accepted', 'stored')"
        " AND coalesce(stored_at, accepted_at) < now() - make_interval(secs => :age) ORDER BY id LIMIT :limit"
    ), {"age": older_than_seconds, "limit": limit})
    found: dict[BatchState, list[int]] = {BatchState.ACCEPTED: [], BatchState.STORED: []}
    for batch_id, state in rows:
        found[BatchState(state)].append(batch_id)
    return found


def retry_failed(session: Session) -> list[int]:
    """Failed (poison) batches back to accepted with fresh attempts, for an operator's retry."""
    return list(session.scalars(text(
        "UPDATE seed_batches SET state = 'accepted', attempts = 0 WHERE state = 'failed' RETURNING id"
    )))
