"""Accepting a batch: its raw body stored durably and the range's resume point moved past it, in
the caller's transaction, under the range's row lock (app.services.leases.locked_range). The
caller commits and only then enqueues the store (app.tasks.ingest.enqueue_store)."""
from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app import metrics
from app.models import SeedNode, SeedRule
from app.services.errors import Conflict, NotFound, ServiceError
from app.services.ingest.checks import MalformedBatch
from app.services.leases import DATACENTER_NODE, NotYourLease
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
        raise MalformedBatch(f"malformed batch: rules counts a rule the data center did not hand out:"
                             f" {sorted(made_up)[0]!r}" + (f" and {len(made_up) - 1} more" if len(made_up) > 1 else ""))


LOCKED_RANGE = text("""
    SELECT r.status, r.node_id, r.first_id, r.last_id, r.next_id, g.name AS group_name
      FROM seed_ranges r JOIN groups g ON g.id = r.group_id
     WHERE r.id = :range
       FOR UPDATE OF r
""")
# Read after the range's lock, in a statement of its own: its snapshot then holds a batch of the
# same start that a call holding the lock before this one committed (one statement with the lock
# would read the batches as they were before it waited).
PREVIOUS_BATCH = text("SELECT id, batch_to, node_id FROM seed_batches WHERE range_id = :range AND batch_from = :batch_from")
STORE_BATCH = text("""
    WITH stored AS (
        INSERT INTO seed_batches (range_id, node_id, batch_from, batch_to, body, content_type, content_encoding,
                                  body_bytes)
        VALUES (:range, :node, :batch_from, :batch_to, :body, :content_type, :content_encoding, :body_bytes)
        RETURNING id
    ), moved AS (
        UPDATE seed_ranges SET next_id = :batch_to + 1, touched_at = now(), batches = batches + 1 WHERE id = :range
    )
    SELECT id FROM stored
""")


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
    # The range locked (locked_range's lock, which every decision about a range takes) with its
    # group's name, then the batch of this start accepted before, if any.
    seed_range = session.execute(LOCKED_RANGE, {"range": range_id}).first()
    if seed_range is None:
        raise NotFound(f"no such range: {range_id}", code="unknown_range")
    previous = session.execute(PREVIOUS_BATCH, {"range": range_id, "batch_from": batch_from}).first()
    # A node re-sending its own batch (its answer was lost) is answered even when its lease has
    # ended since. Anyone else must hold the lease and send the range's group before being told
    # anything about the range's batches.
    own_replay = previous is not None and node is not None and previous.node_id == node.id
    if not own_replay and node is not None and (seed_range.status != "leased" or seed_range.node_id != node.id):
        raise NotYourLease(f"range {range_id} is not leased to this node")
    group_name = seed_range.group_name
    if group is not None and group != group_name:
        raise OutsideRange(f"batch of group {group} for a range of another group")
    if previous is not None:
        if previous.batch_to != batch_to:
            raise OutOfOrder(
                f"a batch from {batch_from} was accepted with end {previous.batch_to}, not {batch_to}"
            )
        # Re-sent: already durable, nothing to do.
        return Acceptance(batch_id=previous.id, next_id=seed_range.next_id, created=False)
    if not (seed_range.first_id <= batch_from <= batch_to <= seed_range.last_id):
        raise OutsideRange(
            f"batch {batch_from}-{batch_to} is outside range {seed_range.first_id}-{seed_range.last_id}"
        )
    if batch_from != seed_range.next_id:
        raise OutOfOrder(f"batch starts at {batch_from}; the range resumes at {seed_range.next_id}")
    _check_rules_handed_out(session, rules)
    # The body stored and the range's resume point moved past it, in one statement.
    batch_id = session.execute(STORE_BATCH, {
        "range": range_id, "node": node.id if node else None, "batch_from": batch_from, "batch_to": batch_to,
        "body": body, "content_type": content_type, "content_encoding": content_encoding, "body_bytes": len(body),
    }).scalar_one()
    metrics.batch_accepted(session, group_name, node.name if node is not None else DATACENTER_NODE,
                           numbers=batch_to - batch_from + 1, body_bytes=len(body), started=started)
    return Acceptance(batch_id=batch_id, next_id=batch_to + 1, created=True)
