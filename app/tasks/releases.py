"""releases.gather: recompute the releases a batch touched."""
from __future__ import annotations

from celery import shared_task
from sqlalchemy.exc import OperationalError

from app.db import session_scope
from app.services.batches import gather_releases


@shared_task(
    name="releases.gather", acks_late=True, autoretry_for=(OperationalError,),
    retry_backoff=2, retry_backoff_max=60, retry_jitter=True, max_retries=None,
)
def gather(group_id: int, release_keys: list[int]) -> int:
    with session_scope() as session:
        return gather_releases(session, group_id, release_keys)
