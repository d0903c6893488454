"""Short control tasks: a liveness probe and the queue depths logged (/metrics reads them itself,
at each scrape: app.services.gauges)."""

from __future__ import annotations

import logging
import os
import socket

from celery import shared_task
from sqlalchemy import text

from app import metrics
from app.db import session_scope

log = logging.getLogger(__name__)

QUEUES = metrics.QUEUES


@shared_task(name="control.ping", acks_late=True, ignore_result=False)
def ping() -> dict:
    """Proves a worker runs tasks and reaches the database."""
    with session_scope() as session:
        now = session.execute(text("SELECT now()")).scalar_one()
    return {"host": socket.gethostname(), "pid": os.getpid(), "db_time": now.isoformat()}


def queue_depths(queues: tuple[str, ...] = QUEUES) -> dict[str, int]:
    """Messages waiting in each queue (Redis lists named after the queues), read as /metrics reads
    them."""
    return metrics.queue_depths(queues=queues)


@shared_task(name="control.queue_depth", acks_late=True, ignore_result=False, send_events=False)
def queue_depth() -> dict[str, int]:
    """Messages waiting per queue, logged as a line for the operator's log pipeline (the gauge
    seed_queue_depth is read at each scrape, not kept by this task: a value set by one worker
    process would go stale when it stops)."""
    depths = queue_depths()
    log.info("queue_depth %s", " ".join(f"{q}={n}" for q, n in depths.items()))
    return depths
