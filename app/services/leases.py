"""Leases: which node holds which range. Lease, heartbeat, finish, release, expire, and the
data center's own node for the ranges it fetches itself.

Every decision about a range is taken under a row lock on that range (locked_range), here and
where a batch is accepted (app.services.ingest.accept), so the API, the tasks and the CLI cannot
disagree, and any number of API processes can run side by side.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app.config import get_settings
from app.db import UNFLUSHED_SQL
from app.models import Group, SeedNode, SeedRange
from app.services.errors import Conflict, NotFound
from app.services.ingest import backlog
from app.services.rules import ACTIVE_RULES_JSON


class NotYourLease(Conflict):
    code = "not_your_lease"


class BatchesMissing(Conflict):
    code = "batches_missing"


class LeaseCap(Conflict):
    code = "lease_cap"


@dataclass(frozen=True)
class Lease:
    range_id: int
    group: str
    group_id: int
    first_id: int
    last_id: int
    next_id: int
    spooled: bool
    # The enabled header rules as the lease read them (app.services.rules.applying picks the
    # group's); none where the lease was not granted by GRANT.
    rules: tuple[Mapping[str, str | None], ...] = ()


# A lease's first statement, one round trip: its commit made not to wait for the WAL's flush (a
# lease lost in a crash is leased again: docs/api.md); the batches waiting for the workers,
# counted up to the backlog's bound (0: none), so that a data center behind refuses the call; and,
# unless it is refused, this call's turn (_kinds), with the node's row locked, which serialises the
# node's own lease calls so that its cap holds under concurrency.
OPEN = text(f"""
    SELECT CASE WHEN :bound = 0 OR w.waiting < :bound THEN nextval('seed_lease_turns') END AS turn,
           {UNFLUSHED_SQL} AS unflushed
      FROM seed_nodes n, LATERAL ({backlog.WAITING_SQL}) AS w
     WHERE n.id = :node
       FOR UPDATE OF n
""")
# The next planned range of one kind: within the kind, ranges that failed on some node after the
# others, then the oldest plan first; ranges of disabled groups are not leased; SKIP LOCKED lets
# concurrent nodes each take a different range without waiting.
_NEXT_OF_KIND = """
    SELECT id FROM (SELECT c.id FROM seed_ranges c
                     WHERE c.status = 'planned' AND c.kind = {kind} AND c.id <> ALL(CAST(:skip AS bigint[]))
                       AND EXISTS (SELECT FROM groups a WHERE a.id = c.group_id AND a.active)
                     ORDER BY c.failures, c.plan_id, c.id
                     LIMIT 1
                       FOR UPDATE SKIP LOCKED) AS {name}"""
# Then, in a statement of its own so that its snapshot follows the node's lock: the ranges the node
# holds and, below its cap, the next planned range granted to it, of the kind looked at first, else
# of the other. The other kind is looked at only when the first has none: the branches of a UNION
# ALL run in order, and its LIMIT stops at the first row.
GRANT = text(f"""
    WITH held AS (SELECT count(*) AS n FROM seed_ranges WHERE node_id = :node AND status = 'leased'),
         chosen AS ({_NEXT_OF_KIND.format(kind=":first", name="first_kind")}
                    UNION ALL {_NEXT_OF_KIND.format(kind=":second", name="second_kind")}
                    LIMIT 1),
         granted AS (UPDATE seed_ranges r
                        SET status = 'leased', node_id = :node, leased_at = now(), touched_at = now()
                       FROM groups g, chosen
                      WHERE r.id = chosen.id AND g.id = r.group_id AND (SELECT n FROM held) < :cap
                  RETURNING r.id, g.name, g.id AS group_id, r.first_id, r.last_id, r.next_id, r.spooled)
    SELECT held.n AS held, granted.*, CASE WHEN granted.id IS NOT NULL THEN {ACTIVE_RULES_JSON} END AS rules
      FROM held LEFT JOIN granted ON true
""")


def lease(
    session: Session,
    node: SeedNode,
    *,
    max_leases: int,
    skip: Collection[int] = (),
    backfill_every: int | None = None,
    refuse_past: int = 0,
) -> Lease | None:
    """The next planned range for this node, or None when nothing is left.

    Live ranges (new posts, what users search for) come before backfill, except that one lease
    in `backfill_every` (default LEASE_BACKFILL_EVERY) looks at backfill first, so backfill keeps
    a share of the nodes however much live work waits (_kinds). Within a kind, ranges that
    failed on some node come after the others; then the oldest plan first. Ranges of disabled
    groups are not leased. `skip`: ranges the node will not take (they failed there). SKIP
    LOCKED lets concurrent nodes each take a different range without waiting on each other.
    With `refuse_past`, raises backlog.Busy when that many batches wait for the workers. Two
    statements; the transaction's commit does not wait for the WAL's flush.
    """
    opened = session.execute(OPEN, {"node": node.id, "bound": refuse_past}).one()
    if opened.turn is None:
        raise backlog.refusal(refuse_past, "lease")
    first, second = _kinds(opened.turn, backfill_every or get_settings().lease_backfill_every)
    granted = session.execute(
        GRANT, {"node": node.id, "first": first, "second": second, "skip": sorted(skip), "cap": max_leases}
    ).one()
    if granted.held >= max_leases:
        raise LeaseCap(f"node already holds {granted.held} ranges (the cap is {max_leases})")
    if granted.id is None:
        return None
    return Lease(
        range_id=granted.id,
        group=granted.name,
        group_id=granted.group_id,
        first_id=granted.first_id,
        last_id=granted.last_id,
        next_id=granted.next_id,
        spooled=granted.spooled,
        rules=tuple(granted.rules),
    )


def _kinds(turn: int, backfill_every: int) -> tuple[str, str]:
    """The kinds in the order a lease looks at them: live first, but backfill first on every
    `backfill_every`-th lease call of the whole seed. The turn is a PostgreSQL sequence, shared
    by every API process and never rolled back; a call that finds nothing of either kind uses
    its turn too, so the share holds over the leases granted while both kinds wait."""
    return ("backfill", "live") if turn % backfill_every == 0 else ("live", "backfill")


def _grant(session: Session, seed_range: SeedRange, node: SeedNode) -> Lease:
    seed_range.status = "leased"
    seed_range.node_id = node.id
    seed_range.leased_at = seed_range.touched_at = func.now()
    session.flush()
    group = session.get_one(Group, seed_range.group_id)
    return Lease(
        range_id=seed_range.id,
        group=group.name,
        group_id=group.id,
        first_id=seed_range.first_id,
        last_id=seed_range.last_id,
        next_id=seed_range.next_id,
        spooled=seed_range.spooled,
    )


def locked_range(session: Session, range_id: int) -> SeedRange:
    seed_range = session.scalar(
        select(SeedRange).where(SeedRange.id == range_id).with_for_update().execution_options(populate_existing=True)
    )
    if seed_range is None:
        raise NotFound(f"no such range: {range_id}", code="unknown_range")
    return seed_range


def held_range(session: Session, node: SeedNode | None, range_id: int) -> SeedRange:
    """The range, locked, if this node holds its lease (node None: the data center's own runner)."""
    seed_range = locked_range(session, range_id)
    if node is not None and (seed_range.status != "leased" or seed_range.node_id != node.id):
        raise NotYourLease(f"range {range_id} is not leased to this node")
    return seed_range


# A node's heartbeat, or the end of its lease with every batch in, in one statement: the UPDATE
# locks the range's row and checks its conditions on the row as locked, as held_range and finish
# do after their lock, and its commit is made not to wait for the WAL's flush. No row: the caller
# takes the long way (heartbeat, finish), which says why (or finds the range done already).
_HELD = "id = :range AND status = 'leased' AND node_id = :node"
_UNFLUSHED = f"{UNFLUSHED_SQL} AS unflushed"
TOUCH = text(f"UPDATE seed_ranges SET touched_at = now() WHERE {_HELD} RETURNING next_id, {_UNFLUSHED}")
FINISH = text(f"""
    UPDATE seed_ranges SET status = 'done', node_id = NULL, done_at = now()
     WHERE {_HELD} AND next_id > last_id
    RETURNING next_id, {_UNFLUSHED}
""")


def touched(session: Session, node: SeedNode, range_id: int) -> int | None:
    """The range's next_id once its lease is renewed, in one statement; None when this node does
    not hold it (heartbeat() then says why)."""
    return session.execute(TOUCH, {"range": range_id, "node": node.id}).scalar()


def finished(session: Session, node: SeedNode, range_id: int) -> int | None:
    """The range's next_id once it is done, in one statement; None when this node does not hold
    it or batches are missing (finish() then says which, or finds it done already)."""
    return session.execute(FINISH, {"range": range_id, "node": node.id}).scalar()


def heartbeat(session: Session, node: SeedNode, range_id: int) -> SeedRange:
    seed_range = held_range(session, node, range_id)
    seed_range.touched_at = func.now()
    return seed_range


def finish(session: Session, node: SeedNode | None, range_id: int) -> SeedRange:
    """The range is done once every article up to last_id is in an accepted batch."""
    seed_range = locked_range(session, range_id)
    if seed_range.status == "done" or (seed_range.status == "expired" and node is None):
        return seed_range
    if node is not None and (seed_range.status != "leased" or seed_range.node_id != node.id):
        raise NotYourLease(f"range {range_id} is not leased to this node")
    if seed_range.next_id <= seed_range.last_id:
        raise BatchesMissing(
            f"range {range_id} resumes at {seed_range.next_id}; batches up to {seed_range.last_id} are missing"
        )
    seed_range.status = "done"
    seed_range.node_id = None
    seed_range.done_at = func.now()
    return seed_range


MAX_FAILURE_TEXT = 1000
# Characters a failure text does not keep: it is the node's words, shown to operators (`flask seed
# status`, the web page), and stored as PostgreSQL text, which cannot hold NUL nor a lone surrogate
# (a JSON body may carry both: "\u0000", "\ud800"). Bidi overrides and isolates would reorder
# what an operator reads.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def failure_text(text: str) -> str:
    """A node's failure text as stored: cut to MAX_FAILURE_TEXT characters, white-space controls
    (tab, line breaks) as spaces, every other control character, lone surrogate and bidi control
    as U+FFFD, so that what the node said is kept and the range is never held up by it."""
    kept = []
    for c in text[:MAX_FAILURE_TEXT]:
        if c in "\t\n\r\v\f":
            kept.append(" ")
        elif c < " " or "\x7f" <= c <= "\x9f" or "\ud800" <= c <= "\udfff" or c in _BIDI:
            kept.append("\ufffd")
        else:
            kept.append(c)
    return "".join(kept)


def release(session: Session, node: SeedNode, range_id: int, *, failure: str | None = None) -> SeedRange:
    """Give the range back; the next node resumes at next_id.

    With `failure` (why the node could not work on it) the range is counted as failed once more
    and leased after the ranges that did not fail, so one bad range cannot hold up the plan. A
    range whose every batch is in (next_id past last_id) is done instead, as finish makes it: put
    back to planned it would be leased again for nothing, and its failure (if any) no longer
    matters.
    """
    seed_range = held_range(session, node, range_id)
    if seed_range.next_id > seed_range.last_id:
        return finish(session, node, range_id)
    seed_range.status = "planned"
    seed_range.node_id = None
    seed_range.leased_at = None
    if failure is not None:
        seed_range.failures += 1
        seed_range.last_failure = failure_text(f"{node.name}: {failure}")
    return seed_range


def expire_leases(session: Session, timeout_seconds: int) -> list[int]:
    """Leases with no batch or heartbeat for `timeout_seconds` pass on.

    A range whose every batch is in goes to done (its node vanished before saying so); the rest
    go back to planned, and the next node to lease one resumes at its next_id. Returns the ids.
    """
    rows = (
        session.execute(
            text(
                "UPDATE seed_ranges SET"
                "   status = CASE WHEN next_id > last_id THEN 'done' ELSE 'planned' END,"
                "   done_at = CASE WHEN next_id > last_id THEN now() END,"
                "   node_id = NULL, leased_at = NULL"
                " WHERE status = 'leased'"
                " AND coalesce(touched_at, leased_at) < now() - make_interval(secs => :timeout)"
                " RETURNING id"
            ),
            {"timeout": timeout_seconds},
        )
        .scalars()
        .all()
    )
    return sorted(rows)


def touch_node(session: Session, node: SeedNode) -> None:
    session.execute(update(SeedNode).where(SeedNode.id == node.id).values(last_seen_at=func.now()))


DATACENTER_NODE = "datacenter"


def datacenter_node(session: Session) -> SeedNode:
    """The node the data center's own runner leases as; disabled, so no token can act as it."""
    from app.services.credentials import hash_token, new_token

    session.execute(
        insert(SeedNode)
        .values(name=DATACENTER_NODE, token_hash=hash_token(new_token()), enabled=False)
        .on_conflict_do_nothing(index_elements=["name"])
    )
    return session.scalars(select(SeedNode).where(SeedNode.name == DATACENTER_NODE)).one()


def lease_range(session: Session, node: SeedNode, range_id: int) -> Lease:
    """Lease one given range (the data center's runner); refused if someone else holds it or it is done."""
    seed_range = locked_range(session, range_id)
    if seed_range.status in ("done", "expired"):
        raise Conflict(f"range {range_id} is {seed_range.status}", code=f"range_{seed_range.status}")
    if seed_range.status == "leased" and seed_range.node_id != node.id:
        raise NotYourLease(f"range {range_id} is leased to another node")
    return _grant(session, seed_range, node)
