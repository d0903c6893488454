"""What the node does when things go wrong, against the real services: SIGTERM mid-range, a
coordinator that fails for a while, a lease taken away (409), NNTP connections cut mid-reply,
a restart that finds its chunks in the spool directory, no NNTP settings, and ranges still
leased by a dead node when --exit-when-idle finds nothing to do. (A hostile Usenet server:
test_hostile_server.py.)"""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import text

from app.db import session_scope
from app.services.datacenter_fetch import spool_range
from app.services.leases import expire_leases
from edge.digest.settings import NNTPSettings, TLSMode
from simnews.proxy import ProviderProxy
from tests.app.factories import make_node
from tests.edge_node.conftest import (
    BATCH_CHUNKS,
    CHUNK_SIZE,
    all_batches_stored,
    plan,
    post_articles,
    stored_message_ids,
)
from tests.edge_node.stub import FlakyCoordinator
from tests.fixtures.ports import free_port
from tests.fixtures.queries import query
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services
ARTICLES = 6000


def through_proxy(api_url: str, cafile: str, token: str, proxy_port: int, **extra) -> dict[str, str]:
    """A node reading INN through the provider-like proxy (plain NNTP: the proxy rewrites lines)."""
    return {
        "COORDINATOR_URL": api_url,
        "NODE_TOKEN": token,
        "COORDINATOR_CAFILE": cafile,
        "NNTP_HOST": "127.0.0.1",
        "NNTP_PORT": str(proxy_port),
        "NNTP_SSL": "0",
        **extra,
    }


def assert_stored_once(engine, posted) -> None:
    wait_until(lambda: all_batches_stored(engine), timeout=120, what="every batch stored")
    stored = stored_message_ids(engine, posted.group)
    assert len(stored) == len(set(stored)), "an article was stored twice"
    assert set(stored) == posted.kept


def descendants(pid: int) -> set[int]:
    """The live processes under pid (its digest workers, multiprocessing's resource tracker)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("digest_processes", ["0", "2"])
def test_sigterm_mid_range_gives_the_range_back_at_its_next_id(
    edge_api, inn, fresh_group, clean_db, run_edge, digest_processes
):
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, (range_id,) = plan(fresh_group, [(posted.low, posted.high)])
    with ProviderProxy(inn.host, inn.reader_port, lines_per_sec=1000) as proxy:
        edge = run_edge(
            through_proxy(
                edge_api.url,
                edge_api.cafile,
                token,
                proxy.port,
                NNTP_CONNECTIONS="2",
                DIGEST_PROCESSES=digest_processes,
            )
        )
        edge.wait_for(lambda e: e["event"] == "batch")
        signalled = time.monotonic()
        edge.signal(signal.SIGTERM)
        assert edge.wait(10) == 128 + signal.SIGTERM, edge.log()
        stopped = time.monotonic() - signalled
    assert stopped < 5, f"took {stopped:.1f} s to stop"
    accepted_to = max(b["last"] for b in edge.named("batch"))
    assert accepted_to < posted.high, "the range was finished before the signal"
    ((status, next_id, node_id),) = query(
        clean_db, "SELECT status, next_id, node_id FROM seed_ranges WHERE id = :id", id=range_id
    )
    assert (status, next_id, node_id) == ("planned", accepted_to + 1, None)
    assert [(e["range"], e["next_id"]) for e in edge.named("release")] == [(range_id, accepted_to + 1)]
    assert edge.named("stop")[-1]["exit_code"] == 143


def test_a_node_killed_takes_its_digest_processes_with_it(edge_api, inn, fresh_group, clean_db, run_edge):
    """kill -9 of the node: no process of its own is left behind (the workers see their pipe
    close and exit)."""
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, _ = plan(fresh_group, [(posted.low, posted.high)])
    with ProviderProxy(inn.host, inn.reader_port, lines_per_sec=1000) as proxy:
        edge = run_edge(
            through_proxy(edge_api.url, edge_api.cafile, token, proxy.port, NNTP_CONNECTIONS="2", DIGEST_PROCESSES="2")
        )
        edge.wait_for(lambda e: e["event"] == "batch")
        workers = descendants(edge.proc.pid)
        assert len(workers) >= 2, edge.log()  # two digest workers (and the resource tracker)
        edge.kill()
    wait_until(lambda: not any(map(alive, workers)), timeout=10, what="the digest workers to end with the node")
    assert edge.named("start")[0]["digest_processes"] == 2


def test_a_coordinator_failing_for_a_while_loses_no_batch(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge
):
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, (range_id,) = plan(fresh_group, [(posted.low, posted.high)])
    failures = ["drop", "503", "503", "503"]
    with FlakyCoordinator(edge_api.url, edge_api.cafile, batch_failures=list(failures)) as flaky:
        env = {
            "COORDINATOR_URL": flaky.url,
            "NODE_TOKEN": token,
            "COORDINATOR_CAFILE": flaky.cafile,
            "NNTP_HOST": inn.host,
            "NNTP_PORT": str(inn.reader_port),
            "NNTP_SSL": "0",
        }
        edge = run_edge(env, "--exit-when-idle")
        assert edge.wait(120) == 0, edge.log()
    retries = [e for e in edge.named("retry") if e.get("call") == "batch"]
    assert len(retries) == len(failures)
    assert sum("503" in e["reason"] for e in retries) == 3
    assert all(e["range"] == range_id for e in retries)
    assert query(clean_db, "SELECT status FROM seed_ranges") == [("done",)]
    assert_stored_once(clean_db, posted)


def test_while_a_range_s_last_batch_is_posted_the_next_range_is_leased_and_fetched(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge
):
    """A slow coordinator: each batch post takes seconds. With MAX_LEASES=1 the node leases the
    next range as soon as a range's lines are all digested (its chunks are fetched while the post
    goes on), but holds no more than one range more than MAX_LEASES: the third range waits for
    the first's `done`. Every article is stored once."""
    posted = post_articles(inn, fresh_group, 3 * CHUNK_SIZE * BATCH_CHUNKS)
    per_range = -(-(posted.high - posted.low + 1) // 3)  # at most one batch for each range
    spans = [(a, min(a + per_range - 1, posted.high)) for a in range(posted.low, posted.high + 1, per_range)]
    token, ranges = plan(fresh_group, spans)
    assert len(ranges) == 3
    with FlakyCoordinator(edge_api.url, edge_api.cafile, batch_delay=2.0) as slow:
        edge = run_edge(
            {
                "COORDINATOR_URL": slow.url,
                "NODE_TOKEN": token,
                "COORDINATOR_CAFILE": slow.cafile,
                "NNTP_HOST": inn.host,
                "NNTP_PORT": str(inn.reader_port),
                "NNTP_SSL": "0",
                "MAX_LEASES": "1",
            },
            "--exit-when-idle",
        )
        assert edge.wait(120) == 0, edge.log()
    events = [(e["event"], e.get("range")) for e in edge.events if e["event"] in ("lease", "batch", "done")]
    at = {event: events.index(event) for event in events}
    first, second, third = ranges
    assert at[("lease", second)] < at[("batch", first)]  # leased while the first's batch was posted
    assert at[("done", first)] < at[("lease", third)]  # never two ranges more than MAX_LEASES
    assert [e["range"] for e in edge.named("done")] == ranges
    assert [e["range"] for e in edge.named("batch")] == ranges
    assert_stored_once(clean_db, posted)


def test_after_nothing_to_do_the_coordinator_is_asked_again_only_when_the_node_is_empty(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge
):
    """A 204 is not asked again each time one of the node's ranges ends (their ends bring the
    coordinator no work), only after POLL_INTERVAL or once the node holds no range. A slow
    coordinator (half a second for each batch) and ranges of 1, 2, 3 and 4 batches spread the
    ranges' ends over two seconds: the 204 comes with the first ends, and each later end would ask
    again if the node did not hold back. With a poll of ten minutes the node still exits as soon as
    its last range is done."""
    batch = CHUNK_SIZE * BATCH_CHUNKS
    posted = post_articles(inn, fresh_group, 10 * batch)
    firsts = [posted.low + batch * done for done in (0, 1, 3, 6)]
    spans = [(first, first + batch * size - 1) for first, size in zip(firsts, (1, 2, 3, 4))]
    spans[-1] = (spans[-1][0], max(spans[-1][1], posted.high))
    token, ranges = plan(fresh_group, spans)
    with FlakyCoordinator(edge_api.url, edge_api.cafile, batch_delay=0.5) as slow:
        edge = run_edge(
            {
                "COORDINATOR_URL": slow.url,
                "NODE_TOKEN": token,
                "COORDINATOR_CAFILE": slow.cafile,
                "NNTP_HOST": inn.host,
                "NNTP_PORT": str(inn.reader_port),
                "NNTP_SSL": "0",
                "MAX_LEASES": "3",
                "POLL_INTERVAL": "600",
            },
            "--exit-when-idle",
        )
        assert edge.wait(120) == 0, edge.log()
    assert sorted(e["range"] for e in edge.named("done")) == sorted(ranges)
    # There is one 204 while ranges were still held; the node asked again once none was left, and
    # that answer ended the run.
    assert len(edge.named("idle")) == 1, [(e["event"], e.get("range")) for e in edge.events]
    assert edge.named("stopping")[-1]["reason"] == "nothing to do"
    assert_stored_once(clean_db, posted)


def test_a_lease_taken_away_drops_the_range_and_the_node_goes_on(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge
):
    posted = post_articles(inn, fresh_group, ARTICLES)
    middle = posted.low + 5 * CHUNK_SIZE
    token, (taken, kept) = plan(fresh_group, [(posted.low, middle - 1), (middle, posted.high)])
    with session_scope() as s:
        other, _ = make_node(s, "edge-other")
        other_id = other.id
    # One slow connection: the first range's second batch comes seconds after its first.
    with ProviderProxy(inn.host, inn.reader_port, lines_per_sec=1000) as proxy:
        edge = run_edge(
            through_proxy(
                edge_api.url,
                edge_api.cafile,
                token,
                proxy.port,
                NNTP_CONNECTIONS="1",
                MAX_LEASES="1",
                POLL_INTERVAL="0.5",
            ),
            "--exit-when-idle",
        )
        edge.wait_for(lambda e: e["event"] == "batch" and e["range"] == taken)
        # Another node takes the range over (as after an expired lease).
        with session_scope() as s:
            taken_over = s.execute(
                text("UPDATE seed_ranges SET node_id = :node WHERE id = :id AND status = 'leased'"),
                {"node": other_id, "id": taken},
            )
            assert taken_over.rowcount == 1
        # With nothing left for it, the node waits while the other node holds its range.
        edge.wait_for(lambda e: e["event"] == "idle" and "still leased" in e["reason"], timeout=120)
        assert edge.proc.poll() is None, "exited while a range was still leased"
    (dropped,) = edge.named("dropped")
    assert dropped["range"] == taken and "not_your_lease" in dropped["reason"]
    assert [e["range"] for e in edge.named("done")] == [kept]
    rows = dict(query(clean_db, "SELECT id, status FROM seed_ranges"))
    assert rows == {taken: "leased", kept: "done"}
    ((next_id,),) = query(clean_db, "SELECT next_id FROM seed_ranges WHERE id = :id", id=taken)
    assert next_id == max(b["last"] for b in edge.named("batch") if b["range"] == taken) + 1
    # The other node finishes it: the plan has nothing leased or planned, and the node exits.
    with session_scope() as s:
        s.execute(text("UPDATE seed_ranges SET status = 'done', node_id = NULL WHERE id = :id"), {"id": taken})
    assert edge.wait(60) == 0, edge.log()


def test_connections_cut_mid_reply_are_reopened_and_nothing_is_lost(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge
):
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, _ = plan(fresh_group, [(posted.low, posted.high)])
    with ProviderProxy(inn.host, inn.reader_port, drop_after_lines=400, drops=4) as proxy:
        edge = run_edge(
            through_proxy(edge_api.url, edge_api.cafile, token, proxy.port, NNTP_CONNECTIONS="3"), "--exit-when-idle"
        )
        assert edge.wait(120) == 0, edge.log()
        assert proxy.dropped == 4
    assert len(edge.named("nntp_retry")) >= 4
    assert_stored_once(clean_db, posted)


def test_a_spooled_range_is_read_from_the_coordinators_stream(
    edge_api, celery_worker, settings, inn, fresh_group, clean_db, run_edge
):
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, (range_id,) = plan(fresh_group, [(posted.low, posted.high + 700)])
    nntp = NNTPSettings(host=inn.host, port=inn.reader_port, tls=TLSMode.NONE)
    spool_range(replace(settings, nntp=nntp, chunk_size=CHUNK_SIZE), range_id)
    # No Usenet server at all: every chunk must come from the stream.
    env = {
        "COORDINATOR_URL": edge_api.url,
        "NODE_TOKEN": token,
        "COORDINATOR_CAFILE": edge_api.cafile,
        "NNTP_HOST": "127.0.0.1",
        "NNTP_PORT": str(free_port()),
        "NNTP_SSL": "0",
    }
    edge = run_edge(env, "--exit-when-idle")
    assert edge.wait(120) == 0, edge.log()
    assert not edge.named("spool_fallback") and not edge.named("nntp_retry")
    assert edge.named("lease")[0]["spooled"] is True
    assert sum(b["missing"] for b in edge.named("batch")) == 700
    assert_stored_once(clean_db, posted)


def test_a_restarted_node_takes_its_fetched_chunks_from_the_spool_directory(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge, tmp_path
):
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, (range_id,) = plan(fresh_group, [(posted.low, posted.high)])
    chunks = -(-(posted.high - posted.low + 1) // CHUNK_SIZE)
    spool_dir = tmp_path / "spool"
    # First run: the coordinator takes no batch, so every chunk fetched stays in the spool.
    with FlakyCoordinator(edge_api.url, edge_api.cafile, batch_failures=["503-forever"]) as flaky:
        env = {
            "COORDINATOR_URL": flaky.url,
            "NODE_TOKEN": token,
            "COORDINATOR_CAFILE": flaky.cafile,
            "NNTP_HOST": inn.host,
            "NNTP_PORT": str(inn.reader_port),
            "NNTP_SSL": "0",
            "SPOOL_DIR": str(spool_dir),
            "MAX_CHUNKS_IN_FLIGHT": str(chunks),
        }
        first = run_edge(env)
        wait_until(
            lambda: len(list(spool_dir.glob("*/*.over"))) == chunks,
            timeout=60,
            what=lambda: f"every chunk in the local spool; the node's log:\n{first.log()}",
        )
        first.signal(signal.SIGTERM)
        assert first.wait(10) == 143, first.log()
    assert query(clean_db, "SELECT status FROM seed_ranges") == [("planned",)]
    # Second run: the Usenet server cuts every overview reply, so chunks can only come from disk.
    with ProviderProxy(inn.host, inn.reader_port, drop_after_lines=1) as proxy:
        env = through_proxy(edge_api.url, edge_api.cafile, token, proxy.port, SPOOL_DIR=str(spool_dir))
        second = run_edge(env, "--exit-when-idle")
        assert second.wait(60) == 0, second.log()
        assert proxy.dropped == 0
    assert [e["range"] for e in second.named("done")] == [range_id]
    assert list(Path(spool_dir).glob("*/*.over")) == []  # accepted: forgotten
    assert_stored_once(clean_db, posted)


def test_without_nntp_host_only_spooled_ranges_are_taken(
    edge_api, celery_worker, settings, inn, fresh_group, clean_db, run_edge
):
    """No NNTP settings at all: the node says so at start, works on the spooled range and gives the
    other back at once, unfailed and untouched (another node with a server will fetch it), instead
    of retrying a placeholder host."""
    posted = post_articles(inn, fresh_group, ARTICLES)
    middle = posted.low + 3 * CHUNK_SIZE
    token, (spooled, unspooled) = plan(fresh_group, [(posted.low, middle - 1), (middle, posted.high)])
    nntp = NNTPSettings(host=inn.host, port=inn.reader_port, tls=TLSMode.NONE)
    spool_range(replace(settings, nntp=nntp, chunk_size=CHUNK_SIZE), spooled)
    edge = run_edge(
        {"COORDINATOR_URL": edge_api.url, "NODE_TOKEN": token, "COORDINATOR_CAFILE": edge_api.cafile},
        "--exit-when-idle",
    )
    assert edge.wait(60) == 0, edge.log()
    assert "NNTP_HOST is not set" in edge.named("start")[0]["warning"]
    assert [e["range"] for e in edge.named("skipped")] == [unspooled]
    assert [e["range"] for e in edge.named("done")] == [spooled]
    assert not edge.named("nntp_retry") and not edge.named("failed")
    rows = {r[0]: r[1:] for r in query(clean_db, "SELECT id, status, node_id, next_id, failures FROM seed_ranges")}
    assert rows[unspooled] == ("planned", None, middle, 0)
    assert rows[spooled][0] == "done"


def test_exit_when_idle_waits_for_ranges_leased_by_another_node(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge
):
    """A range leased by a node that died is not done: --exit-when-idle waits for its lease to
    lapse, then works on it, and exits once the plan has nothing leased or planned."""
    posted = post_articles(inn, fresh_group, ARTICLES)
    token, (range_id,) = plan(fresh_group, [(posted.low, posted.high)])
    with session_scope() as s:
        dead, _ = make_node(s, "edge-dead")
        s.execute(
            text(
                "UPDATE seed_ranges SET status = 'leased', node_id = :node, leased_at = now(),"
                " touched_at = now() WHERE id = :id"
            ),
            {"node": dead.id, "id": range_id},
        )
    env = {
        "COORDINATOR_URL": edge_api.url,
        "NODE_TOKEN": token,
        "COORDINATOR_CAFILE": edge_api.cafile,
        "NNTP_HOST": inn.host,
        "NNTP_PORT": str(inn.reader_port),
        "NNTP_SSL": "0",
        "POLL_INTERVAL": "0.5",
    }
    edge = run_edge(env, "--exit-when-idle")
    waiting = edge.wait_for(lambda e: e["event"] == "idle" and "still leased" in e["reason"], timeout=30)
    assert "(1)" in waiting["reason"]
    assert edge.proc.poll() is None, "exited while a range was still leased"
    with session_scope() as s:  # the dead node's lease lapses, as the beat task finds it
        assert expire_leases(s, 0) == [range_id]
    assert edge.wait(120) == 0, edge.log()
    assert [e["range"] for e in edge.named("done")] == [range_id]
    assert_stored_once(clean_db, posted)
