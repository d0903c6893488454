"""The prefetcher with an in-memory NNTP server: order, the in-flight cap, no starving, lost
connections, group switches, refusals, the local spool and stopping. (The real thing, INN
through the provider-like proxy, is in test_failures.py and bench/edge.py.)"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from edge.node.localspool import LocalSpool
from edge.digest.nntp import NNTPConnectionError, NNTPReplyError
from edge.digest.overview import DEFAULT_LAYOUT
from edge.node.prefetch import ChunkUnavailable, FatalNNTPError, Prefetcher
from edge.node.retry import Stopped
from edge.digest.runner import RangeHooks, RangeJob, chunk_spans, run_range
from tests.edge.helpers import overview_line
from tests.fixtures.waiting import wait_until


class FakeServer:
    """Groups of articles 1..high; records every OVER; can cut replies or refuse logins."""

    def __init__(self, groups: dict[str, int], *, cuts: int = 0, login_refused: bool = False):
        self.groups = groups
        self.cuts = cuts
        self.login_refused = login_refused
        self.overs: list[tuple[str, int, int]] = []
        self.asked = threading.Semaphore(0)  # released by every OVER, before it waits at the gate
        self.group_switches = 0
        self.connects = 0
        self.lock = threading.Lock()
        self.gate = threading.Event()  # cleared: every OVER waits
        self.gate.set()

    def connect(self):
        with self.lock:
            self.connects += 1
        if self.login_refused:
            raise NNTPReplyError(481, "Authentication failed", "AUTHINFO PASS ****")
        return FakeClient(self)


class FakeClient:
    def __init__(self, server: FakeServer):
        self.server = server
        self.current: str | None = None

    def overview_layout(self):
        return DEFAULT_LAYOUT

    def group(self, name: str):
        if name not in self.server.groups:
            raise NNTPReplyError(411, "No such group", f"GROUP {name}")
        with self.server.lock:
            self.server.group_switches += 1
        self.current = name

    def over(self, first: int, last: int):
        self.server.asked.release()
        self.server.gate.wait()
        with self.server.lock:
            self.server.overs.append((self.current, first, last))
            cut = self.server.cuts > 0
            self.server.cuts -= cut
        high = self.server.groups[self.current]
        lines = [overview_line(n) + b"\r\n" for n in range(first, min(last, high) + 1)]
        yield b"".join(lines[: len(lines) // 2])
        if cut:
            raise NNTPConnectionError("connection closed by the server")
        yield b"".join(lines[len(lines) // 2 :])

    def close(self):
        pass


def numbers(blocks) -> list[int]:
    return [int(line.split(b"\t")[0]) for block in blocks for line in block.split(b"\r\n") if line]


@pytest.fixture
def make_prefetcher():
    made = []

    def make(server, connections=2, in_flight=4, **options) -> Prefetcher:
        prefetcher = Prefetcher(
            server.connect, connections, in_flight, stop=threading.Event(), backoff_cap=0.01, **options
        )
        made.append(prefetcher)
        return prefetcher

    yield make
    for prefetcher in made:
        prefetcher.stop.set()
        prefetcher.wake()


def test_every_chunk_comes_once_and_in_order(make_prefetcher):
    server = FakeServer({"g": 950})
    prefetcher = make_prefetcher(server, connections=4)
    spans = chunk_spans(1, 1000, 50)
    got = [(first, last, numbers(blocks)) for first, last, blocks in prefetcher.source("r", "g").chunks(spans)]
    assert [(first, last) for first, last, _ in got] == spans
    assert [n for _, _, found in got for n in found] == list(range(1, 951))  # past 950: empty chunks
    assert sorted(first for _, first, _ in server.overs) == [first for first, _ in spans]
    assert prefetcher.layout() == DEFAULT_LAYOUT


def test_one_connection_takes_the_first_leased_range_first_and_switches_group(make_prefetcher):
    server = FakeServer({"a": 100, "b": 100})
    prefetcher = make_prefetcher(server, connections=1, in_flight=10)
    server.gate.clear()
    first = prefetcher.source(1, "a").chunks(chunk_spans(1, 60, 20))
    second = prefetcher.source(2, "b").chunks(chunk_spans(1, 60, 20))
    results = {}
    threads = [
        threading.Thread(target=lambda name, it: results.__setitem__(name, list(it)), args=args)
        for args in (("a", first), ("b", second))
    ]
    threads[0].start()
    assert server.asked.acquire(timeout=5)  # range a is open: its first chunk is asked for
    threads[1].start()
    wait_until(
        lambda: second.state.waiting, timeout=5, what="range b's loop waiting for its first chunk", interval=0.01
    )
    server.gate.set()
    for thread in threads:
        thread.join(5)
    assert [(g, f) for g, f, _ in server.overs] == [("a", 1), ("a", 21), ("a", 41), ("b", 1), ("b", 21), ("b", 41)]
    assert server.group_switches == 2
    assert [numbers(blocks) for _, _, blocks in results["b"]][0] == list(range(1, 21))


def test_chunks_in_flight_are_capped_but_a_waiting_range_is_never_starved(make_prefetcher):
    server = FakeServer({"a": 10_000, "b": 10_000})
    prefetcher = make_prefetcher(server, connections=3, in_flight=4)
    slow = prefetcher.source(1, "a").chunks(chunk_spans(1, 10_000, 100))
    next(slow)  # takes one chunk, then takes nothing more for now
    # Once the cap's worth is fetched, no connection takes another chunk of a range whose loop
    # does not wait: the count below is final.
    wait_until(lambda: len(slow.state.results) == 4, timeout=5, what="the cap's worth of chunks fetched", interval=0.01)
    assert len(server.overs) == 1 + 4  # the one taken, and the cap
    late = list(prefetcher.source(2, "b").chunks(chunk_spans(1, 300, 100)))  # beyond the cap, as it waits
    assert [first for first, _, _ in late] == [1, 101, 201]
    assert len(server.overs) == 5 + 3
    slow.close()


def test_a_lost_connection_is_reopened_and_the_chunk_fetched_again(make_prefetcher):
    server = FakeServer({"g": 500}, cuts=3)
    events = []
    prefetcher = make_prefetcher(server, connections=2, on_event=lambda name, **f: events.append((name, f)))
    got = list(prefetcher.source(7, "g").chunks(chunk_spans(1, 500, 100)))
    assert [n for _, _, blocks in got for n in numbers(blocks)] == list(range(1, 501))
    assert [name for name, _ in events] == ["nntp_retry"] * 3
    assert all(fields["range"] == 7 for _, fields in events)
    assert server.connects == 2 + 3


def test_a_group_the_server_lacks_fails_that_range_only(make_prefetcher):
    prefetcher = make_prefetcher(FakeServer({"g": 100}))
    with pytest.raises(ChunkUnavailable, match="no group missing"):
        list(prefetcher.source(1, "missing").chunks(chunk_spans(1, 100, 50)))
    assert len(list(prefetcher.source(2, "g").chunks(chunk_spans(1, 100, 50)))) == 2


def test_a_refused_login_is_fatal(make_prefetcher):
    prefetcher = make_prefetcher(FakeServer({"g": 100}, login_refused=True))
    with pytest.raises(FatalNNTPError, match="refuses the login"):
        list(prefetcher.source(1, "g").chunks(chunk_spans(1, 100, 50)))


def test_chunks_in_the_spool_are_not_fetched_and_fetched_ones_are_kept(make_prefetcher, tmp_path):
    spool = LocalSpool(str(tmp_path), 10**8)
    spool.store("g", 1, 50, [overview_line(7) + b"\r\n"])
    server = FakeServer({"g": 100})
    got = list(make_prefetcher(server, spool=spool).source(1, "g").chunks(chunk_spans(1, 100, 50)))
    assert numbers(got[0][2]) == [7]  # from the spool, not from the server
    assert [first for _, first, _ in server.overs] == [51]
    assert numbers([spool.load("g", 51, 100)]) == list(range(51, 101))


def test_a_waiting_range_loop_stops_at_once_when_the_node_stops(make_prefetcher):
    server = FakeServer({"g": 100})
    server.gate.clear()
    prefetcher = make_prefetcher(server)
    chunks = prefetcher.source(1, "g").chunks(chunk_spans(1, 100, 50))
    threading.Timer(0.2, lambda: (prefetcher.stop.set(), prefetcher.wake())).start()
    started = time.monotonic()
    with pytest.raises(Stopped):
        next(chunks)
    assert time.monotonic() - started < 1
    server.gate.set()


def test_a_range_is_fetched_from_as_soon_as_it_is_opened_before_any_chunk_is_taken(make_prefetcher):
    server = FakeServer({"g": 300})
    prefetcher = make_prefetcher(server, connections=2, in_flight=4)
    chunks = prefetcher.source(1, "g").chunks(chunk_spans(1, 300, 100))
    # The connections fetch the range's chunks before its loop takes any.
    wait_until(lambda: len(server.overs) == 3, timeout=5, what="the range's three chunks fetched", interval=0.01)
    assert [n for _, _, blocks in chunks for n in numbers(blocks)] == list(range(1, 301))
    assert len(server.overs) == 3  # each fetched once


def test_a_range_closed_before_any_chunk_was_taken_gives_its_slots_back(make_prefetcher):
    server = FakeServer({"a": 300, "b": 300})
    prefetcher = make_prefetcher(server, connections=2, in_flight=2)
    dropped = prefetcher.source(1, "a").chunks(chunk_spans(1, 300, 100))
    wait_until(lambda: len(server.overs) == 2, timeout=5, what="the cap's worth fetched", interval=0.01)
    dropped.close()
    kept = prefetcher.source(2, "b").chunks(chunk_spans(1, 300, 100))
    wait_until(
        lambda: len([o for o in server.overs if o[0] == "b"]) == 2,
        timeout=5,
        what="the cap's worth of b fetched",
        interval=0.01,
    )
    assert len([n for _, _, blocks in kept for n in numbers(blocks)]) == 300
    assert [o for o in server.overs if o[0] == "a"] == [("a", 1, 100), ("a", 101, 200)]


def test_a_range_loop_waiting_for_its_turn_to_digest_has_its_chunks_fetched_meanwhile(make_prefetcher):
    """run_range asks its source for the chunks before it waits for the digest slot (the node lets
    one range digest at a time): the connections work for the next range meanwhile."""
    server = FakeServer({"g": 400})
    prefetcher = make_prefetcher(server, connections=2, in_flight=8)
    fetched_before_the_turn = []

    class Hooks(RangeHooks):
        @contextmanager
        def digest_slot(self):
            fetched_before_the_turn.append(
                wait_until(
                    lambda: len(server.overs) == 4,
                    timeout=3,
                    interval=0.01,
                    what="the range's chunks fetched before its turn",
                )
            )
            yield

    batches = []
    job = RangeJob(group="g", next_id=1, last_id=400, chunk_size=100, batch_chunks=4)
    state = run_range(
        job, prefetcher.source(1, "g"), type("Sink", (), {"submit": lambda _, b: batches.append(b)})(), Hooks()
    )
    assert fetched_before_the_turn == [True]
    assert (
        state.done
        and len(batches[0]["fragments"]["article"])
        + sum(counts[2] for rule, counts in batches[0]["rules"].items() if rule)
        == 400
    )


def test_the_node_s_range_loop_opens_its_range_when_it_asks_for_the_chunks(make_prefetcher):
    from edge.node.node import HeldRange, _TrackedSource

    server = FakeServer({"g": 300})
    prefetcher = make_prefetcher(server, connections=2, in_flight=4)
    held = HeldRange(lease=None, next_id=1)
    chunks = _TrackedSource(prefetcher.source(1, "g"), held).chunks(chunk_spans(1, 300, 100))
    # The range is opened, and its chunks fetched, before the loop takes any.
    wait_until(lambda: len(server.overs) == 3, timeout=5, what="the range's chunks fetched", interval=0.01)
    before = held.last_activity
    assert next(chunks)[:2] == (1, 100)
    assert held.last_activity > before  # each chunk taken is the range's sign of life
    chunks.close()  # read in part: the range is closed all the same, its chunks fetched ahead dropped
    assert 1 not in prefetcher._ranges and prefetcher._in_flight == 0


def test_beyond_the_cap_a_waiting_range_has_a_connection_s_worth_of_chunks_fetched_at_once(make_prefetcher):
    """An older range's look-ahead fills the cap; the range that digests (the one waiting for its
    next chunk) still has every connection work for it, not one chunk at a time."""
    server = FakeServer({"a": 10_000, "b": 10_000})
    prefetcher = make_prefetcher(server, connections=3, in_flight=2)
    ahead = prefetcher.source(1, "a").chunks(chunk_spans(1, 10_000, 100))
    # The cap's worth of range a is fetched, and none of it taken.
    wait_until(lambda: len(server.overs) == 2, timeout=5, what="the cap's worth fetched", interval=0.01)
    server.gate.clear()
    while server.asked.acquire(blocking=False):  # what was asked so far
        pass
    late = prefetcher.source(2, "b").chunks(chunk_spans(1, 1_000, 100))
    got = []
    reader = threading.Thread(target=lambda: got.append(next(late)))
    reader.start()
    for _ in range(3):  # asked at once, before the server answers any
        assert server.asked.acquire(timeout=5)
    server.gate.set()
    reader.join(5)
    assert got[0][:2] == (1, 100)
    # The loop takes no more: once the connection's worth is fetched, nothing beyond it is, and the
    # count below is final.
    wait_until(lambda: len(late.state.results) == 2, timeout=5, what="b's look-ahead fetched", interval=0.01)
    assert len([o for o in server.overs if o[0] == "b"]) == 3
    late.close()
    ahead.close()
    assert prefetcher._in_flight == 0


def test_ranges_are_fetched_by_priority_not_by_the_order_they_were_opened(make_prefetcher):
    """The node opens its ranges from their own threads, in any order; its digest turns follow
    the lease order, and so does the fetching (the priority it gives)."""
    server = FakeServer({"a": 200, "b": 200})
    prefetcher = make_prefetcher(server, connections=1, in_flight=10)
    server.gate.clear()
    later = prefetcher.source(2, "b", priority=2).chunks(chunk_spans(1, 200, 100))
    assert server.asked.acquire(timeout=5)  # the connection is on b's first chunk already
    earlier = prefetcher.source(1, "a", priority=1).chunks(chunk_spans(1, 200, 100))
    server.gate.set()
    assert [first for first, _, _ in earlier] == [1, 101]
    assert [first for first, _, _ in later] == [1, 101]
    assert [(g, f) for g, f, _ in server.overs] == [("b", 1), ("a", 1), ("a", 101), ("b", 101)]
