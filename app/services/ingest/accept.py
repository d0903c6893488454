"""Accepting a batch: its raw body stored durably and the range's resume point moved past it, in
the caller's transaction, under the range's row lock (FOR UPDATE, as leases.locked_range takes
it), in three statements. The caller commits and only then enqueues the store
(app.tasks.ingest.enqueue_store)."""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

from sqlalchemy import LargeBinary, bindparam, select, text
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from app import metrics
from app.models import SeedNode, SeedRange, SeedRule
from app.services.errors import Conflict, NotFound, ServiceError
from app.services.ingest.checks import MalformedBatch
from app.services.leases import DATACENTER_NODE, NotYourLease
from edge.digest.rules import EXECUTABLE_RULE


class OutOfOrder(Conflict):
    code = "out_of_order"


class OutsideRange(ServiceError):
    status = 422
    code = "outside_range"


# The range's row locked (as leases.locked_range does), with its group's name.
_LOCKED_RANGE = text("""
    SELECT r.status, r.node_id, r.first_id, r.last_id, r.next_id, g.name AS group_name
      FROM seed_ranges r JOIN groups g ON g.id = r.group_id
     WHERE r.id = :range_id
       FOR UPDATE OF r
""")
# The batch accepted from batch_from, if one was (the unique key range_id, batch_from). Read in a
# statement after the lock, not joined into it: a statement that waited for the lock sees the
# locked row as it is now but the other tables as they were when it began, so a re-sent batch
# accepted meanwhile, by the request the lock waited for, would look missing.
_PREVIOUS = text(
    "SELECT id, batch_to, node_id FROM seed_batches WHERE range_id = :range_id AND batch_from = :batch_from"
)

# The batch's raw body stored and the range's resume point moved past it (its row is locked by
# _LOCKED_RANGE): the new batch's id. next_id is computed by the caller: a parameter's arithmetic
# would be done in the type psycopg gives the number, int4 for 2^31 - 1.
_STORE_AND_MOVE = text("""
    WITH stored AS (
        INSERT INTO seed_batches (range_id, node_id, batch_from, batch_to, body, content_type,
                                  content_encoding, body_bytes)
        VALUES (:range_id, :node_id, :batch_from, :batch_to, :body, :content_type, :content_encoding, :body_bytes)
        RETURNING id
    ), moved AS (
        UPDATE seed_ranges SET next_id = :next_id, touched_at = now(), batches = batches + 1
         WHERE id = :range_id
    )
    SELECT id FROM stored
""").bindparams(bindparam("body", type_=LargeBinary))


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
    # The range locked with its group's name, then the batch accepted from batch_from before, if
    # any (the node API's hottest call: three statements with the insert).
    found = session.execute(_LOCKED_RANGE, {"range_id": range_id}).first()
    if found is None:
        raise NotFound(f"no such range: {range_id}", code="unknown_range")
    previous = session.execute(_PREVIOUS, {"range_id": range_id, "batch_from": batch_from}).first()
    # A node re-sending its own batch (its answer was lost) is answered even when its lease has
    # ended since. Anyone else must hold the lease and send the range's group before being told
    # anything about the range's batches.
    own_replay = previous is not None and node is not None and previous.node_id == node.id
    if not own_replay and node is not None and (found.status != "leased" or found.node_id != node.id):
        raise NotYourLease(f"range {range_id} is not leased to this node")
    group_name: str = found.group_name
    if group is not None and group != group_name:
        raise OutsideRange(f"batch of group {group} for a range of another group")
    if previous is not None:
        if previous.batch_to != batch_to:
            raise OutOfOrder(f"a batch from {batch_from} was accepted with end {previous.batch_to}, not {batch_to}")
        # Re-sent: already durable, nothing to do.
        return Acceptance(batch_id=previous.id, next_id=found.next_id, created=False)
    if not (found.first_id <= batch_from <= batch_to <= found.last_id):
        raise OutsideRange(f"batch {batch_from}-{batch_to} is outside range {found.first_id}-{found.last_id}")
    if batch_from != found.next_id:
        raise OutOfOrder(f"batch starts at {batch_from}; the range resumes at {found.next_id}")
    _check_rules_handed_out(session, rules)
    # The body stored and the range moved past it, in one statement.
    batch_id: int = session.execute(
        _STORE_AND_MOVE,
        {
            "range_id": range_id,
            "node_id": node.id if node else None,
            "batch_from": batch_from,
            "batch_to": batch_to,
            "next_id": batch_to + 1,
            "body": body,
            "content_type": content_type,
            "content_encoding": content_encoding,
            "body_bytes": len(body),
        },
    ).scalar_one()
    # A SeedRange this session loaded before is not what the row says any more.
    held = session.identity_map.get(identity_key(SeedRange, range_id))
    if held is not None:
        session.expire(held)
    metrics.batch_accepted(
        session,
        group_name,
        node.name if node is not None else DATACENTER_NODE,
        numbers=batch_to - batch_from + 1,
        body_bytes=len(body),
        started=started,
    )
    return Acceptance(batch_id=batch_id, next_id=batch_to + 1, created=True)
