"""`flask seed batches retry`."""

from __future__ import annotations

from flask.cli import AppGroup

from app.cli.output import json_option, report, service_call
from app.services.ingest.lifecycle import retry_failed
from app.tasks.ingest import enqueue_store

batches = AppGroup("batches", help="Accepted batches and their storing.")


@batches.command("retry")
@json_option
def retry(as_json: bool) -> None:
    """Give failed (poison) batches fresh attempts and enqueue them again."""
    with service_call() as session:
        ids = retry_failed(session)
    queued = sum(enqueue_store(batch_id) for batch_id in ids)
    report(
        as_json,
        {"retried": ids, "enqueued": queued},
        f"{len(ids)} failed batches back to accepted; {queued} enqueued"
        + ("" if queued == len(ids) else " (the rest go with the next requeue sweep)"),
    )
