"""The data center's own fetching from its Usenet server: run a range straight into the tables
(`flask seed range`), or fetch its raw chunks into the spool for nodes to stream (`flask seed spool`).

Both use the digest library's NNTP client, and a range run here the library's range loop, exactly
as the edge node does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.config import Settings
from app.db import session_scope
from app.models import Group
from app.services import leases, spool
from app.services.ingest import accept as acceptance
from app.services.ingest import posts, store
from app.services.nntp import connect_from_settings
from app.services.rules import active_rules
from edge.digest.batch import Batch, encode_batch
from edge.digest.rules import RuleSet
from edge.digest.runner import RangeHooks, RangeJob, RangeProgress, SingleConnectionSource, chunk_spans, run_range


@dataclass
class StoreSink:
    """Each batch accepted under the data center's lease and stored at once, no HTTP, no queue."""

    range_id: int

    def submit(self, batch: Batch) -> None:
        body, content_type, content_encoding = encode_batch(batch)
        with session_scope() as session:
            node = leases.datacenter_node(session)
            accepted = acceptance.accept_batch(
                session,
                node,
                self.range_id,
                batch_from=batch["first"],
                batch_to=batch["last"],
                body=body,
                content_type=content_type,
                content_encoding=content_encoding or "",  # gzip (encode_batch's default); "" is identity
            )
        with session_scope() as session:
            stored = store.store_batch(session, accepted.batch_id)
        with session_scope() as session:  # with what the digest here read of the names, as the task joins
            posts.join_batch(session, accepted.batch_id, stored.names)


class _ShowProgress(RangeHooks):
    """Tells the caller of run_range_here of each batch stored."""

    def __init__(self, show: Callable[[RangeProgress], None]):
        self.show = show

    def progress(self, state: RangeProgress) -> None:
        self.show(state)


def run_range_here(
    settings: Settings, range_id: int, progress: Callable[[RangeProgress], None] | None = None
) -> RangeProgress:
    """Lease the range to the data center, digest it from its resume point over one NNTP
    connection and store each batch at once (progress(state) after each); the range is finished
    at its end, or given back at its resume point if anything fails."""
    with session_scope() as session:
        lease = leases.lease_range(session, leases.datacenter_node(session), range_id)
        rules = RuleSet.from_data(active_rules(session, lease.group))
    try:
        with connect_from_settings(settings) as client:
            client.group(lease.group)
            job = RangeJob(
                group=lease.group,
                next_id=lease.next_id,
                last_id=lease.last_id,
                chunk_size=settings.chunk_size,
                batch_chunks=settings.batch_chunks,
                rules=rules,
                layout=client.overview_layout(),
            )
            state = run_range(
                job,
                SingleConnectionSource(client),
                StoreSink(range_id),
                _ShowProgress(progress) if progress is not None else None,
            )
    except BaseException:
        # Give the range back at its resume point so a node (or a later run) goes on from there.
        with session_scope() as session:
            leases.release(session, leases.datacenter_node(session), range_id)
        raise
    with session_scope() as session:
        leases.finish(session, leases.datacenter_node(session), range_id)
    return state


def spool_range(settings: Settings, range_id: int, progress: Callable[[int, int], None] | None = None) -> int:
    """Fetch the range's raw chunks (from its resume point) into the spool; returns lines kept."""
    with session_scope() as session:
        seed_range = leases.locked_range(session, range_id)
        group = session.get_one(Group, seed_range.group_id).name
        first, last = seed_range.next_id, seed_range.last_id
    total = 0
    with connect_from_settings(settings) as client:
        client.group(group)
        for chunk_from, chunk_to in chunk_spans(first, last, settings.chunk_size):
            raw = b"".join(client.over(chunk_from, chunk_to))
            with session_scope() as session:
                total += spool.store_chunk(session, range_id, chunk_from, chunk_to, raw)
            if progress is not None:
                progress(chunk_to, total)
    with session_scope() as session:
        spool.mark_spooled(session, range_id)
    return total
