"""Lease expiry, run by beat every minute."""

from __future__ import annotations

import logging

from celery import shared_task

from app.config import get_settings
from app.db import session_scope
from app.services.leases import expire_leases

log = logging.getLogger(__name__)


@shared_task(name="leases.expire", acks_late=True, ignore_result=False, send_events=False)
def expire() -> list[int]:
    with session_scope() as session:
        expired = expire_leases(session, get_settings().lease_timeout)
    if expired:
        log.info("leases expired: ranges %s", expired)
    return expired
