"""Short control tasks: a liveness probe and the queue-depth metric."""
from __future__ import annotations

import logging
import os
import socket

from celery import current_app, shared_task
from sqlalchemy import text

from app.db import session_scope

log = logging.getLogger(__name__)

QUEUES = ("ingest", "gather", "control")


@shared_task(name="control.ping", acks_late=True, ignore_result=False)
def ping() -> dict:
    """Proves a worker runs tasks and reaches the database."""
    with session_scope() as session:
        now = session.execute(text("SELECT now()")).scalar_one()
    return {"host": socket.gethostname(), "pid": os.getpid(), "db_time": now.isoformat()}


def queue_depths(queues: tuple[str, ...] = QUEUES) -> dict[str, int]:
    """Messages waiting in each queue (Redis lists named after the queues)."""
    with current_app.connection_for_read() as conn:
        client = conn.default_channel.client
        return {queue: int(client.llen(queue)) for queue in queues}


@shared_task(name="control.queue_depth", acks_late=True, ignore_result=False, send_events=False)
def queue_depth() -> dict[str, int]:
    """Messages waiting per queue, logged as a metric line for the operator's log pipeline."""
    depths = queue_depths()
    log.info("queue_depth %s", " ".join(f"{q}={n}" for q, n in depths.items()))
    return depths
