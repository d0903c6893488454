"""`flask seed batches retry`."""
from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import service_call
from app.services.ingest.lifecycle import retry_failed
from app.tasks.ingest import enqueue_store

batches = AppGroup("batches", help="Accepted batches and their storing.")


@batches.command("retry")
def retry() -> None:
    """Give failed (poison) batches fresh attempts and enqueue them again."""
    with service_call() as session:
        ids = retry_failed(session)
    queued = sum(enqueue_store(batch_id) for batch_id in ids)
    click.echo(f"{len(ids)} failed batches back to accepted; {queued} enqueued"
               + ("" if queued == len(ids) else " (the rest go with the next requeue sweep)"))
