"""The edge node against a hostile Usenet server (simnews.hostile), on the real API: an endless
reply, a reply stalled mid-line, a line over the limit, lines numbered outside the range, 503,
480 and a refused STARTTLS. Each run ends in bounded time and memory (the node's peak RSS is
printed), with the right exit code, and every range it held is given back: failed with its
reason when the server cannot serve it, as it was when the server refuses the node's settings."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from edge.digest.nntp import NNTPConnectionError
from edge.node.prefetch import MAX_ATTEMPTS, FatalNNTPError, Prefetcher
from simnews.hostile import HostileServer
from tests.edge_node.conftest import CHUNK_SIZE, plan
from tests.fixtures.queries import query

pytestmark = pytest.mark.services
FIRST = 7_000_000_000  # past 2**32
ARTICLES = 3 * CHUNK_SIZE
# The node's peak memory against a hostile server: a chunk's reply is bounded, so the node stays
# near its size at rest whatever the server sends.
MAX_RSS_MB = 300
# Per run: three tries of a chunk with a one-second NNTP timeout and their backoff, the lease,
# the give-back and the 204 that ends the run.
MAX_SECONDS = 30
_groups = itertools.count(1)


@pytest.fixture
def hostile_group() -> str:
    """A group name of its own (the hostile server serves it; INN is not needed)."""
    return f"alt.binaries.hostile{next(_groups)}"


def run_measured(edge, timeout: float) -> tuple[int, float, float]:
    """(exit code, seconds, peak RSS in MiB) of a node run, its RSS read from /proc as it runs."""
    started = time.monotonic()
    peak_kb = 0
    status = Path(f"/proc/{edge.proc.pid}/status")
    while edge.proc.poll() is None and time.monotonic() - started < timeout:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak_kb = max(peak_kb, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    code = edge.wait(max(1.0, timeout - (time.monotonic() - started)))
    return code, time.monotonic() - started, peak_kb / 1024


def node_env(api, token: str, server: HostileServer, **extra) -> dict[str, str]:
    return {
        "COORDINATOR_URL": api.url,
        "NODE_TOKEN": token,
        "COORDINATOR_CAFILE": api.cafile,
        "NNTP_HOST": server.host,
        "NNTP_PORT": str(server.port),
        "NNTP_SSL": "0",
        "NNTP_TIMEOUT": "1",
        "NNTP_CONNECTIONS": "2",
        "DIGEST_PROCESSES": "0",
        **extra,
    }


def ranges_of(engine, ids: list[int]) -> dict[int, tuple]:
    rows = query(
        engine,
        "SELECT id, status, node_id, next_id, failures, last_failure FROM seed_ranges WHERE id = ANY(:ids)",
        ids=ids,
    )
    return {row[0]: tuple(row[1:]) for row in rows}


@pytest.mark.parametrize(
    "behaviour, reason",
    [
        ("endless", "lines or"),
        ("stall", "no answer within"),
        ("long_line", "goes on past"),
        ("out_of_range", "outside the range"),
        ("unavailable", "503"),
    ],
)
def test_a_range_the_server_cannot_serve_fails_and_is_given_back(
    edge_api, clean_db, run_edge, hostile_group, behaviour, reason
):
    token, (range_id,) = plan(hostile_group, [(FIRST, FIRST + ARTICLES - 1)])
    with HostileServer(behaviour, {hostile_group: (FIRST, FIRST + ARTICLES - 1)}) as server:
        edge = run_edge(node_env(edge_api, token, server), "--exit-when-idle")
        code, seconds, rss = run_measured(edge, MAX_SECONDS + 30)
    print(f"{behaviour}: exit {code} in {seconds:.1f} s, peak RSS {rss:.0f} MiB, {server.overs} OVER commands")
    assert code == 0, edge.log()
    assert seconds < MAX_SECONDS, edge.log()
    assert rss < MAX_RSS_MB, f"peak RSS {rss:.0f} MiB"
    (failed,) = edge.named("failed")
    assert failed["range"] == range_id and reason in failed["reason"], failed
    assert [e["range"] for e in edge.named("release")] == [range_id]
    assert not edge.named("batch")
    ((status, node_id, next_id, failures, last_failure),) = ranges_of(clean_db, [range_id]).values()
    assert (status, node_id, next_id, failures) == ("planned", None, FIRST, 1)
    assert reason in last_failure
    # Bounded tries: three for each chunk fetched at most, never a loop.
    assert server.overs <= 3 * (ARTICLES // CHUNK_SIZE), server.overs


@pytest.mark.parametrize(
    "behaviour, extra, message",
    [
        ("login_required", {}, "login"),
        ("no_starttls", {"NNTP_STARTTLS": "1"}, "STARTTLS"),
    ],
)
def test_a_server_that_refuses_the_settings_stops_the_node_with_its_ranges_given_back(
    edge_api, clean_db, run_edge, hostile_group, behaviour, extra, message
):
    """Exit 6, and every range the node leased (it leases up to MAX_LEASES at once, some maybe
    while it is already stopping) is planned again, unfailed: another node may well serve it."""
    spans = [(FIRST + i * CHUNK_SIZE, FIRST + (i + 1) * CHUNK_SIZE - 1) for i in range(3)]
    token, ids = plan(hostile_group, spans)
    with HostileServer(behaviour, {hostile_group: (FIRST, spans[-1][1])}) as server:
        edge = run_edge(node_env(edge_api, token, server, **extra), "--exit-when-idle")
        code, seconds, rss = run_measured(edge, MAX_SECONDS + 30)
    print(f"{behaviour}: exit {code} in {seconds:.1f} s, peak RSS {rss:.0f} MiB")
    assert code == 6, edge.log()
    assert seconds < MAX_SECONDS, edge.log()
    (error,) = [e for e in edge.named("error") if e.get("exit_code") == 6]
    assert message in error["message"], error
    leased = {e["range"] for e in edge.named("lease")}
    assert leased and leased <= set(ids)
    assert sorted(e["range"] for e in edge.named("release")) == sorted(leased)
    assert {r: row[:4] for r, row in ranges_of(clean_db, ids).items()} == {
        r: ("planned", None, first, 0) for r, (first, _) in zip(ids, spans)
    }


def test_a_server_never_reached_at_start_is_fatal_after_bounded_tries():
    """No connection ever opened (a wrong host or port): after MAX_ATTEMPTS tries the node stops
    (exit 6) instead of leasing range after range that waits for the server's overview format."""
    tries = []

    def connect():
        tries.append(time.monotonic())
        raise NNTPConnectionError("cannot connect to 127.0.0.1:9: connection refused")

    prefetcher = Prefetcher(connect, 2, 4, stop=threading.Event(), backoff_cap=0.01)
    try:
        with pytest.raises(FatalNNTPError, match="NNTP_HOST"):
            prefetcher.layout()
    finally:
        prefetcher.stop.set()
        prefetcher.wake()
    assert MAX_ATTEMPTS <= len(tries) <= 2 * MAX_ATTEMPTS
