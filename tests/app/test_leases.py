"""Leases and accepting batches: the rules that hold for a range, on the real database."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text, update

from app.db import session_scope
from app.models import SeedBatch, SeedPlan, SeedRange
from app.services import leases
from app.services.ingest import accept as acceptance
from app.services.ingest import backlog
from tests.app.factories import BIG, make_group, make_node, make_plan


def accept(session, node, seed_range, start, end, body=b"x"):
    return acceptance.accept_batch(
        session,
        node,
        seed_range.id,
        batch_from=start,
        batch_to=end,
        body=body,
        content_type="application/msgpack",
        content_encoding="gzip",
    )


def test_lease_takes_the_oldest_plan_first_and_respects_the_cap(db_session):
    group = make_group(db_session)
    node, _ = make_node(db_session)
    old = make_plan(db_session, group, [(BIG + 200, BIG + 299), (BIG + 100, BIG + 199)])
    new = make_plan(db_session, group, [(BIG, BIG + 99)])
    got = [leases.lease(db_session, node, max_leases=2) for _ in range(2)]
    assert [g.range_id for g in got] == [old[0].id, old[1].id]
    assert got[0].next_id == BIG + 200 and got[0].group == "alt.binaries.test"
    with pytest.raises(leases.LeaseCap):
        leases.lease(db_session, node, max_leases=2)
    other, _ = make_node(db_session, "edge-2")
    assert leases.lease(db_session, other, max_leases=2).range_id == new[0].id
    assert leases.lease(db_session, other, max_leases=2) is None


def test_batches_move_next_id_and_a_resent_batch_is_stored_once(db_session):
    group = make_group(db_session)
    node, _ = make_node(db_session)
    (r,) = make_plan(db_session, group, [(BIG, BIG + 59_999)])
    leases.lease(db_session, node, max_leases=1)
    first = accept(db_session, node, r, BIG, BIG + 19_999)
    assert first.created and first.next_id == BIG + 20_000
    again = accept(db_session, node, r, BIG, BIG + 19_999)
    assert not again.created and again.batch_id == first.batch_id
    assert db_session.scalar(select(text("count(*)")).select_from(SeedBatch)) == 1
    with pytest.raises(acceptance.OutOfOrder):
        accept(db_session, node, r, BIG + 40_000, BIG + 59_999)  # a gap
    with pytest.raises(acceptance.OutOfOrder):
        accept(db_session, node, r, BIG, BIG + 9_999)  # same start, other end
    with pytest.raises(acceptance.OutsideRange):
        accept(db_session, node, r, BIG + 20_000, BIG + 70_000)
    db_session.refresh(r)
    assert (r.next_id, r.batches) == (BIG + 20_000, 1)


def test_another_nodes_batch_is_refused_and_changes_nothing(db_session):
    group = make_group(db_session)
    holder, _ = make_node(db_session)
    intruder, _ = make_node(db_session, "edge-2")
    (r,) = make_plan(db_session, group, [(BIG, BIG + 999)])
    leases.lease(db_session, holder, max_leases=1)
    with pytest.raises(leases.NotYourLease):
        accept(db_session, intruder, r, BIG, BIG + 499)
    for call in (leases.heartbeat, leases.release, leases.finish):
        with pytest.raises(leases.NotYourLease):
            call(db_session, intruder, r.id)
    db_session.refresh(r)
    assert (r.status, r.node_id, r.next_id) == ("leased", holder.id, BIG)


def test_a_replay_is_answered_to_its_sender_and_the_holder_only(db_session):
    """The lease and group checks come before the replay shortcut: another node learns nothing
    of the range's batches; the node that sent a batch hears it again, even once it gave the
    range back (its answer may have been lost on the way)."""
    group = make_group(db_session)
    sender, _ = make_node(db_session)
    other, _ = make_node(db_session, "edge-2")
    (r,) = make_plan(db_session, group, [(BIG, BIG + 999)])
    leases.lease(db_session, sender, max_leases=1)
    first = accept(db_session, sender, r, BIG, BIG + 499)
    with pytest.raises(leases.NotYourLease):
        accept(db_session, other, r, BIG, BIG + 499)
    with pytest.raises(acceptance.OutsideRange):
        acceptance.accept_batch(
            db_session,
            sender,
            r.id,
            batch_from=BIG,
            batch_to=BIG + 499,
            body=b"x",
            content_type="application/msgpack",
            content_encoding="gzip",
            group="alt.binaries.other",
        )
    leases.release(db_session, sender, r.id)
    again = accept(db_session, sender, r, BIG, BIG + 499)
    assert (again.created, again.batch_id, again.next_id) == (False, first.batch_id, BIG + 500)
    with pytest.raises(leases.NotYourLease):
        accept(db_session, other, r, BIG, BIG + 499)  # the range is planned: nobody holds it
    leases.lease(db_session, other, max_leases=1)
    held = accept(db_session, other, r, BIG, BIG + 499)
    assert (held.created, held.batch_id) == (False, first.batch_id)
    db_session.refresh(r)
    assert (r.next_id, r.batches) == (BIG + 500, 1)
    assert db_session.scalar(select(text("count(*)")).select_from(SeedBatch)) == 1


def test_finish_needs_every_batch_and_release_resumes_at_next_id(db_session):
    group = make_group(db_session)
    node, _ = make_node(db_session)
    other, _ = make_node(db_session, "edge-2")
    (r,) = make_plan(db_session, group, [(BIG, BIG + 999)])
    leases.lease(db_session, node, max_leases=1)
    accept(db_session, node, r, BIG, BIG + 499)
    with pytest.raises(leases.BatchesMissing):
        leases.finish(db_session, node, r.id)
    leases.release(db_session, node, r.id)
    again = leases.lease(db_session, other, max_leases=1)
    assert (again.range_id, again.next_id) == (r.id, BIG + 500)
    accept(db_session, other, r, BIG + 500, BIG + 999)
    done = leases.finish(db_session, other, r.id)
    assert (done.status, done.node_id) == ("done", None)
    assert leases.finish(db_session, other, r.id).status == "done"  # idempotent


def test_a_failed_range_is_counted_and_leased_after_the_others_never_to_a_node_that_skips_it(db_session):
    group = make_group(db_session)
    node, _ = make_node(db_session)
    other, _ = make_node(db_session, "edge-2")
    (bad, good) = make_plan(db_session, group, [(BIG + 1000, BIG + 1999), (BIG, BIG + 999)])
    newer = make_plan(db_session, group, [(BIG - 1000, BIG - 1)])
    assert leases.lease(db_session, node, max_leases=1).range_id == bad.id
    accept(db_session, node, bad, BIG + 1000, BIG + 1099)
    leases.release(db_session, node, bad.id, failure="Refused: 413 batch_too_large " + "x" * 5000)
    db_session.flush()
    db_session.refresh(bad)
    assert (bad.status, bad.next_id, bad.failures) == ("planned", BIG + 1100, 1)
    assert bad.last_failure.startswith("edge-1: Refused: 413") and len(bad.last_failure) == 1000
    # The failed range comes after every other range, of its plan and of later plans.
    assert leases.lease(db_session, other, max_leases=3).range_id == good.id
    assert leases.lease(db_session, other, max_leases=3).range_id == newer[0].id
    # The node it failed on skips it; another node still gets it, at its resume point.
    assert leases.lease(db_session, node, max_leases=1, skip=[bad.id]) is None
    again = leases.lease(db_session, other, max_leases=3)
    assert (again.range_id, again.next_id) == (bad.id, BIG + 1100)
    leases.release(db_session, other, bad.id)  # a plain give-back (a stop) is no failure
    db_session.flush()
    db_session.refresh(bad)
    assert (bad.failures, bad.last_failure.startswith("edge-1: ")) == (1, True)


def test_expired_lease_passes_on_and_resumes_at_next_id(db_session):
    group = make_group(db_session)
    node, _ = make_node(db_session)
    other, _ = make_node(db_session, "edge-2")
    (r, finished) = make_plan(db_session, group, [(BIG, BIG + 999), (BIG + 1000, BIG + 1999)])
    leases.lease(db_session, node, max_leases=2)
    leases.lease(db_session, node, max_leases=2)
    accept(db_session, node, r, BIG, BIG + 299)
    accept(db_session, node, finished, BIG + 1000, BIG + 1999)
    db_session.execute(text("UPDATE seed_ranges SET touched_at = now() - interval '20 minutes'"))
    assert leases.expire_leases(db_session, 900) == sorted([r.id, finished.id])
    db_session.refresh(finished)
    assert finished.status == "done"  # every batch was in: nothing to pass on
    again = leases.lease(db_session, other, max_leases=1)
    assert (again.range_id, again.next_id) == (r.id, BIG + 300)
    with pytest.raises(leases.NotYourLease):
        accept(db_session, node, r, BIG + 300, BIG + 599)


def test_concurrent_nodes_never_share_a_range(clean_db):
    with session_scope() as s:
        group = make_group(s)
        nodes = [make_node(s, f"edge-{i}")[0] for i in range(8)]
        make_plan(s, group, [(BIG + i * 100, BIG + i * 100 + 99) for i in range(40)])
    got: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(nodes))

    def take(node):
        barrier.wait()
        while True:
            with session_scope() as s:
                granted = leases.lease(s, node, max_leases=100)
            if granted is None:
                return
            with lock:
                got.append(granted.range_id)

    threads = [threading.Thread(target=take, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 40 and len(set(got)) == 40
    with session_scope() as s:
        holders = s.execute(select(SeedRange.node_id)).scalars().all()
    assert None not in holders


def free_ranges(engine, ids: list[int]) -> list[int]:
    """The ranges among `ids` that another transaction could lock now (not locked by a lease)."""
    with engine.connect() as other:
        return [
            r
            for (r,) in other.execute(
                text("SELECT id FROM seed_ranges WHERE id = ANY(:ids) ORDER BY id FOR UPDATE SKIP LOCKED"),
                {"ids": ids},
            )
        ]


def test_a_lease_locks_no_range_but_the_one_it_grants(clean_db):
    """While a lease's transaction is open, the other kind's next range (looked at only when the
    first kind has none) and, at the node's cap, every range stay free for other nodes' leases;
    a node refused for the backlog takes no turn."""
    with session_scope() as session:
        group = make_group(session)
        node, _ = make_node(session)
        (live,) = make_plan(session, group, [(BIG + 100, BIG + 199)])
        backfill = make_plan(session, group, [(BIG, BIG + 49), (BIG + 50, BIG + 99)])
        session.execute(update(SeedPlan).where(SeedPlan.id == live.plan_id).values(kind="live"))
        live.kind = "live"
        everything = [live.id, *(r.id for r in backfill)]
    with session_scope() as session:
        granted = leases.lease(session, node, max_leases=2, backfill_every=1000)
        assert granted is not None and granted.range_id == live.id
        assert free_ranges(clean_db, everything) == sorted(r.id for r in backfill)
    with session_scope() as session:
        granted = leases.lease(session, node, max_leases=2, backfill_every=1000)
        assert granted is not None and granted.range_id == backfill[0].id
        assert free_ranges(clean_db, everything) == sorted([live.id, backfill[1].id])
    with session_scope() as session:
        with pytest.raises(leases.LeaseCap):
            leases.lease(session, node, max_leases=2, backfill_every=1000)
        assert free_ranges(clean_db, everything) == sorted(everything)
    turn = "SELECT last_value FROM seed_lease_turns"
    with session_scope() as session:
        before = session.scalar(text(turn))
        session.add(
            SeedBatch(
                range_id=live.id,
                node_id=node.id,
                batch_from=BIG + 100,
                batch_to=BIG + 100,
                body=b"\x00",
                content_type="application/msgpack",
                body_bytes=1,
            )
        )
    with session_scope() as session:
        with pytest.raises(backlog.Busy):
            leases.lease(session, node, max_leases=5, backfill_every=1000, refuse_past=1)
    with session_scope() as session:
        assert session.scalar(text(turn)) == before
        assert leases.lease(session, node, max_leases=5, backfill_every=1000, refuse_past=2) is not None
        assert session.scalar(text(turn)) == before + 1
