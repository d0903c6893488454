"""releases.repair: recompute whole the releases a stored batch touched (release repair)."""
from __future__ import annotations

from celery import shared_task
from sqlalchemy.exc import OperationalError

from app.db import session_scope
from app.services.ingest.repair import repair_batch


@shared_task(
    name="releases.repair", acks_late=True, autoretry_for=(OperationalError,),
    retry_backoff=2, retry_backoff_max=60, retry_jitter=True, max_retries=None,
)
def repair(batch_id: int) -> int | None:
    with session_scope() as session:
        return repair_batch(session, batch_id)
