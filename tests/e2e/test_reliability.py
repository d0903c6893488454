"""The reliability suite: the whole system through `edge run` nodes while things go wrong. Each
case ends with the same ground-truth check (tests/e2e/truth.py): nothing lost, nothing twice,
floods dropped and counted, holes reported and nothing invented, releases whole."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.e2e.conftest import GROUPS, LEASE_TIMEOUT
from tests.e2e.hand import Hand, digest_lease
from tests.e2e.relay import AnswerLosingRelay
from tests.e2e.truth import check_ground_truth
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services
SLOW = 2_000  # overview lines per second and connection while a case needs nodes mid-range


def batches_of(dc, range_id: int) -> list[tuple]:
    return [
        tuple(r)
        for r in dc.rows(
            "SELECT b.batch_from, b.batch_to, n.name FROM seed_batches b"
            " LEFT JOIN seed_nodes n ON n.id = b.node_id WHERE b.range_id = :id"
            " ORDER BY b.batch_from",
            id=range_id,
        )
    ]


def test_a_node_killed_mid_range_loses_its_lease_and_another_resumes_the_range(dc, news):
    with news.provider(lines_per_sec=SLOW) as proxy:
        tokens = dc.prepare(proxy)
        a = dc.edge("edge-a", dc.node_env(tokens["edge-a"], proxy.port))
        a.wait_for(lambda e: e["event"] == "batch")
        a.kill()  # kill -9: no release, no goodbye
        # The ranges it held. A batch it had on the wire when killed may still be accepted (the
        # API finishes the request), so where each resumes is read from the batches at the end.
        held = {
            r.id: r
            for r in dc.rows(
                "SELECT r.id, r.first_id, r.last_id FROM seed_ranges r JOIN seed_nodes n ON n.id = r.node_id"
                " WHERE r.status = 'leased' AND n.name = 'edge-a'"
            )
        }
        assert held
        proxy.lines_per_sec = None
        b = dc.edge("edge-b", dc.node_env(tokens["edge-b"], proxy.port))
        # Beat's lease expiry, every second here: the dead node's leases pass on after LEASE_TIMEOUT.
        expired: set[int] = set()
        wait_until(
            lambda: set(held) <= expired,
            LEASE_TIMEOUT + 20,
            "the dead node's leases to expire",
            interval=1,
            tick=lambda: expired.update(dc.call("leases.expire")),
        )
        wait_until(dc.ranges_done, 60, "every range done")
        b.signal(signal.SIGTERM)
        assert b.wait(10) == 143, b.log()
    resumed_mid_range = 0
    for range_id, seed_range in held.items():
        batches = batches_of(dc, range_id)
        nodes = [name for _, _, name in batches]
        # The dead node's batches, then the other's: none of edge-a's came after edge-b leased it
        # (its lease had expired: a late batch of it would be refused).
        by_a = nodes.count("edge-a")
        assert nodes == ["edge-a"] * by_a + ["edge-b"] * (len(nodes) - by_a), nodes
        resume = batches[by_a - 1][1] + 1 if by_a else seed_range.first_id
        lease = next(e for e in b.named("lease") if e["range"] == range_id)
        assert lease["next_id"] == resume, "the range did not resume where the dead node's batches ended"
        resumed_mid_range += seed_range.first_id < resume <= seed_range.last_id
    assert resumed_mid_range, "no range was left half read by the dead node"
    dc.wait_finished()
    check_ground_truth(dc.engine, news.truths())


def test_sigterm_gives_the_ranges_back_and_they_are_resumed_where_they_stopped(dc, news):
    with news.provider(lines_per_sec=SLOW) as proxy:
        tokens = dc.prepare(proxy)
        a = dc.edge("edge-a", dc.node_env(tokens["edge-a"], proxy.port))
        b = dc.edge("edge-b", dc.node_env(tokens["edge-b"], proxy.port))
        a.wait_for(lambda e: e["event"] == "batch")
        a.signal(signal.SIGTERM)
        assert a.wait(10) == 143, a.log()
        released = {e["range"]: e["next_id"] for e in a.named("release")}
        firsts = {r.id: r.first_id for r in dc.rows("SELECT id, first_id FROM seed_ranges")}
        assert released and any(n > firsts[r] for r, n in released.items()), a.log()
        proxy.lines_per_sec = None
        again = dc.edge("edge-a-again", dc.node_env(tokens["edge-a"], proxy.port))  # the same node, restarted
        wait_until(dc.ranges_done, 60, "every range done")
        for node in (b, again):
            node.signal(signal.SIGTERM)
            assert node.wait(10) == 143, node.log()
    for range_id, next_id in released.items():
        (lease,) = [e for node in (b, again) for e in node.named("lease") if e["range"] == range_id]
        assert lease["next_id"] == next_id, "a range given back did not resume at its next_id"
    dc.wait_finished()
    check_ground_truth(dc.engine, news.truths())


def test_the_same_batch_twice_and_batches_out_of_order_are_stored_once(dc, news):
    with news.provider() as proxy:
        tokens = dc.prepare(proxy, nodes=("edge-a", "edge-b", "edge-hand"))
        # By hand: a range's batches posted out of order, twice, and at once from four threads.
        hand = Hand(dc.api, tokens["edge-hand"])
        lease = hand.lease()
        range_id = lease["range"]["id"]
        first, second, third = digest_lease(proxy.port, lease)[:3]
        assert hand.post(range_id, second)[0] == 409
        assert hand.post(range_id, first) == (202, {"status": "accepted", "batch_id": 1, "next_id": second["first"]})
        assert hand.post(range_id, first)[1]["status"] == "already_accepted"
        status, answer = hand.post(range_id, third)
        assert (status, answer["error"]) == (409, "out_of_order")
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(hand.post(range_id, second))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(status for status, _ in answers) == [200, 200, 200, 202]
        assert hand.call("POST", f"/ranges/{range_id}/release")[0] == 200  # the nodes finish it
        # A node whose answers get lost on the way back sends those batches again.
        with AnswerLosingRelay(dc.api.url, dc.api.cafile, lose={1, 3}) as relay:
            a = dc.edge(
                "edge-a",
                {
                    **dc.node_env(tokens["edge-a"], proxy.port),
                    "COORDINATOR_URL": relay.url,
                    "COORDINATOR_CAFILE": relay.cafile,
                },
                "--exit-when-idle",
            )
            b = dc.edge("edge-b", dc.node_env(tokens["edge-b"], proxy.port), "--exit-when-idle")
            for node in (a, b):
                assert node.wait(90) == 0, node.log()
        assert len(relay.lost) == 2 and all(p.status == 202 for p in relay.lost)
        assert sum(e["status"] == "already_accepted" for e in a.named("batch")) == 2, a.log()
        resumed = [e for node in (a, b) for e in node.named("lease") if e["range"] == range_id]
        assert [e["next_id"] for e in resumed] == [third["first"]]
        # Every batch the relay saw, posted again in reverse order: already there, nothing changes.
        hand_a = Hand(dc.api, tokens["edge-a"])
        for posted in reversed(relay.posts):
            status, answer = hand_a.call(
                "POST", posted.path.removeprefix("/api/v1/seed"), body=posted.body, headers=posted.headers
            )
            assert (status, answer["status"]) == (200, "already_accepted")
        for batch in (second, first):
            assert hand.post(range_id, batch)[1]["status"] == "already_accepted"
    dc.wait_finished()
    check_ground_truth(dc.engine, news.truths())


def test_redis_stopped_while_nodes_post_then_restarted(dc, news):
    with news.provider(lines_per_sec=SLOW) as proxy:
        tokens = dc.prepare(proxy)
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        nodes[0].wait_for(lambda e: e["event"] == "batch")
        dc.redis_server.stop()
        try:
            before = dc.value("SELECT count(*) FROM seed_batches")
            # The API still takes batches: they are durable, their tasks wait for the requeue sweep.
            wait_until(
                lambda: dc.value("SELECT count(*) FROM seed_batches") >= before + 4,
                30,
                "batches accepted while Redis is down",
            )
        finally:
            dc.redis_server.start()
        assert dc.value("SELECT count(*) FROM seed_batches WHERE state = 'accepted'") >= 4
        proxy.lines_per_sec = None
        for node in nodes:
            assert node.wait(90) == 0, node.log()
    assert not any(e for node in nodes for e in node.named("retry") if e.get("call") == "batch"), (
        "a batch was refused while Redis was down"
    )
    dc.wait_finished(sweep=True)
    check_ground_truth(dc.engine, news.truths())


def test_postgres_restarted_during_ingest(dc, news, engine):
    with news.provider(lines_per_sec=SLOW) as proxy:
        tokens = dc.prepare(proxy)
        with dc.stores_held():
            nodes = [
                dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()
            ]
            dc.wait_stores_stuck()
            dc.postgres.run("stop")  # both workers lose their connection in the middle of a store
            try:
                # Down until a node has had a batch refused for it (and retries it).
                wait_until(
                    lambda: any(e.get("call") == "batch" for node in nodes for e in node.named("retry")),
                    30,
                    "a node retrying a batch",
                )
            finally:
                dc.postgres.run("start")
                engine.dispose()  # the harness's own pool is stale now
        proxy.lines_per_sec = None
        for node in nodes:
            assert node.wait(120) == 0, node.log()
    dc.wait_finished(timeout=90, sweep=True)
    check_ground_truth(dc.engine, news.truths())


def test_a_worker_killed_mid_task(dc, news):
    with news.provider() as proxy:
        tokens = dc.prepare(proxy)
        with dc.stores_held():
            nodes = [
                dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()
            ]
            dc.wait_stores_stuck()
            # One loses its pool process (its task goes back to the queue), the other dies whole
            # (its task stays unacknowledged: the requeue sweep sends the batch again).
            (child,) = dc.pool_processes("e2e-ingest-1")
            os.kill(child, signal.SIGKILL)
            dc.kill_worker("e2e-ingest-2")
        for node in nodes:
            assert node.wait(90) == 0, node.log()
        dc.start_worker("e2e-ingest-2")
    dc.wait_finished(sweep=True)
    # The worker noticed its pool process die (and gave the task back), in its own time.
    wait_until(
        lambda: "signal 9 (SIGKILL)" in dc.workers["e2e-ingest-1"].output(),
        30,
        "the worker to report its pool process killed",
    )
    check_ground_truth(dc.engine, news.truths())


def test_the_news_server_dropping_connections(dc, news):
    with news.provider(drop_after_lines=500, drops=0) as proxy:
        tokens = dc.prepare(proxy)
        proxy.drops_left = 12  # from now on: the planner above had a quiet server
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(90) == 0, node.log()
        assert proxy.dropped == 12
    assert sum(len(node.named("nntp_retry")) for node in nodes) >= 12
    dc.wait_finished()
    check_ground_truth(dc.engine, news.truths(*GROUPS))
