"""Accepting a batch: its raw body stored durably and the range's resume point moved past it, in
the caller's transaction, under the range's row lock (app.services.leases.locked_range). The
caller commits and only then enqueues the store (app.tasks.ingest.enqueue_store)."""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app import metrics
from app.models import Group, SeedBatch, SeedNode, SeedRule
from app.services.errors import Conflict, ServiceError
from app.services.ingest.checks import MalformedBatch
from app.services.leases import DATACENTER_NODE, NotYourLease, locked_range
from edge.digest.rules import EXECUTABLE_RULE


class OutOfOrder(Conflict):
    code = "out_of_order"


class OutsideRange(ServiceError):
    status = 422
    code = "outside_range"


@dataclass(frozen=True)
class Acceptance:
    batch_id: int
    next_id: int
    created: bool  # False: the same batch was accepted before, nothing stored this time


def _check_rules_handed_out(session: Session, rules: tuple[str, ...]) -> None:
    """A batch counts only the rules the data center hands out (the executable rule and the
    operator's rules, enabled or not) and '' (what stayed): the catalog keeps a count of each, so
    a node may not make up names. A rule removed while a node held it fails that batch once; the
    range's next lease comes without it."""
    made_up = set(rules) - {"", EXECUTABLE_RULE}
    if made_up:
        made_up -= set(session.scalars(select(SeedRule.name).where(SeedRule.name.in_(sorted(made_up)))))
    if made_up:
        raise MalformedBatch(
            f"malformed batch: rules counts a rule the data center did not hand out:"
            f" {sorted(made_up)[0]!r}" + (f" and {len(made_up) - 1} more" if len(made_up) > 1 else "")
        )


def accept_batch(
    session: Session,
    node: SeedNode | None,
    range_id: int,
    *,
    batch_from: int,
    batch_to: int,
    body: bytes,
    content_type: str,
    content_encoding: str,
    group: str | None = None,
    rules: tuple[str, ...] = (),
) -> Acceptance:
    """Store a batch's raw body durably and move the range's resume point past it.

    The caller commits, and only then enqueues ingest, so a task never sees an uncommitted batch
    and a batch answered 2xx is always in the database. Counted when the caller commits
    (app.metrics.batch_accepted).
    """
    started = perf_counter()
    seed_range = locked_range(session, range_id)
    previous = session.scalar(
        select(SeedBatch).where(SeedBatch.range_id == range_id, SeedBatch.batch_from == batch_from)
    )
    # A node re-sending its own batch (its answer was lost) is answered even when its lease has
    # ended since. Anyone else must hold the lease and send the range's group before being told
    # anything about the range's batches.
    own_replay = previous is not None and node is not None and previous.node_id == node.id
    if not own_replay and node is not None and (seed_range.status != "leased" or seed_range.node_id != node.id):
        raise NotYourLease(f"range {range_id} is not leased to this node")
    group_name = session.get_one(Group, seed_range.group_id).name
    if group is not None and group != group_name:
        raise OutsideRange(f"batch of group {group} for a range of another group")
    if previous is not None:
        if previous.batch_to != batch_to:
            raise OutOfOrder(f"a batch from {batch_from} was accepted with end {previous.batch_to}, not {batch_to}")
        # Re-sent: already durable, nothing to do.
        return Acceptance(batch_id=previous.id, next_id=seed_range.next_id, created=False)
    if not (seed_range.first_id <= batch_from <= batch_to <= seed_range.last_id):
        raise OutsideRange(f"batch {batch_from}-{batch_to} is outside range {seed_range.first_id}-{seed_range.last_id}")
    if batch_from != seed_range.next_id:
        raise OutOfOrder(f"batch starts at {batch_from}; the range resumes at {seed_range.next_id}")
    _check_rules_handed_out(session, rules)
    batch_id = session.execute(
        insert(SeedBatch)
        .values(
            range_id=range_id,
            node_id=node.id if node else None,
            batch_from=batch_from,
            batch_to=batch_to,
            body=body,
            content_type=content_type,
            content_encoding=content_encoding,
            body_bytes=len(body),
        )
        .returning(SeedBatch.id)
    ).scalar_one()
    seed_range.next_id = batch_to + 1
    seed_range.touched_at = func.now()
    seed_range.batches += 1
    session.flush()
    metrics.batch_accepted(
        session,
        group_name,
        node.name if node is not None else DATACENTER_NODE,
        numbers=batch_to - batch_from + 1,
        body_bytes=len(body),
        started=started,
    )
    return Acceptance(batch_id=batch_id, next_id=batch_to + 1, created=True)
