"""The range loop's posting ahead (edge.digest.runner.run_range's post_ahead) and the node's digest turns
(edge.node.node.DigestTurns): plain threads and an in-memory source, no server."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from edge.node.node import DigestTurns
from edge.node.retry import Stopped
from edge.digest.runner import RangeHooks, RangeJob, run_range
from tests.edge.helpers import overview_line
from tests.fixtures.waiting import WatchedCondition, wait_until

BIG = 2**32 + 10_000  # article numbers past 32 bits


class Source:
    """Every span's lines at once (article numbers first..last)."""

    def chunks(self, spans):
        for first, last in spans:
            yield first, last, [b"".join(overview_line(n) + b"\r\n" for n in range(first, last + 1))]


class Sink:
    """Records the batches it takes; `hold` makes each submit wait for an event; `fail_at` raises
    on that batch (by its first article)."""

    def __init__(self, hold: threading.Event | None = None, fail_at: int | None = None):
        self.taken: list[int] = []
        self.asked: list[int] = []
        self.refused: list[int] = []
        self.hold, self.fail_at = hold, fail_at
        self.busy = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def submit(self, batch: dict) -> None:
        with self.lock:
            self.asked.append(batch["first"])
            self.busy += 1
            self.most_at_once = max(self.most_at_once, self.busy)
        try:
            if self.hold is not None:
                assert self.hold.wait(5)
            time.sleep(0.02)
            if batch["first"] == self.fail_at:
                self.refused.append(batch["first"])
                raise RuntimeError("refused")
            self.taken.append(batch["first"])
        finally:
            with self.lock:
                self.busy -= 1


class Hooks(RangeHooks):
    """The hooks a test gives as functions; those not given keep RangeHooks' defaults."""

    def __init__(self, digest_slot=None, should_stop=None, on_digested=None, progress=None):
        for name, hook in (
            ("digest_slot", digest_slot),
            ("should_stop", should_stop),
            ("on_digested", on_digested),
            ("progress", progress),
        ):
            if hook is not None:
                setattr(self, name, hook)


JOB = RangeJob(group="alt.binaries.test", next_id=BIG, last_id=BIG + 399, chunk_size=50, batch_chunks=2)


def run(sink, post_ahead=False, **hooks):
    return run_range(JOB, Source(), sink, Hooks(**hooks), post_ahead=post_ahead)


def test_without_hooks_the_range_is_digested_into_the_sink_batch_by_batch():
    sink = Sink()
    state = run_range(JOB, Source(), sink)
    assert sink.taken == [BIG + 100 * i for i in range(4)]
    assert (state.done, state.next_id, state.batches, state.lines) == (True, BIG + 400, 4, 400)


def test_posting_ahead_the_next_batch_is_digested_while_the_sink_takes_one():
    turns = []
    second_turn = threading.Event()

    @contextmanager
    def slot():
        turns.append(time.monotonic())
        if len(turns) == 2:
            second_turn.set()
        yield

    sink = Sink(hold=second_turn)  # the first batch is taken only once the second is being digested
    state = run(sink, post_ahead=True, digest_slot=slot)
    assert second_turn.is_set() and len(turns) == 4
    assert sink.taken == [BIG + 100 * i for i in range(4)]  # in order
    assert sink.most_at_once == 1  # one at a time
    assert (state.done, state.next_id, state.batches, state.lines) == (True, BIG + 400, 4, 400)


@pytest.mark.parametrize("post_ahead", [True, False])
def test_on_digested_follows_the_last_batch_digested_before_its_post(post_ahead):
    """Once, after the range's last turn to digest and before the sink has its last batch: the
    node leases the next range then, while that batch is posted."""
    turns, digested = [], []
    sink = Sink()

    @contextmanager
    def slot():
        turns.append(len(turns))
        yield

    state = run(
        sink,
        post_ahead=post_ahead,
        digest_slot=slot,
        on_digested=lambda: digested.append((len(turns), list(sink.asked))),
    )
    ((turns_then, asked_then),) = digested
    assert turns_then == 4 and BIG + 300 not in asked_then  # the last batch not handed over yet
    if not post_ahead:
        assert asked_then == [BIG, BIG + 100, BIG + 200]
    assert sink.taken == [BIG + 100 * i for i in range(4)] and state.done


def test_on_digested_is_not_called_for_a_range_stopped_before_its_end():
    digested = []
    state = run(Sink(), post_ahead=True, should_stop=lambda: True, on_digested=lambda: digested.append(1))
    assert digested == [] and state.batches == 0


def test_without_posting_ahead_the_sink_takes_a_batch_before_the_next_is_digested():
    turns = []
    sink = Sink()

    @contextmanager
    def slot():
        turns.append(len(sink.taken))  # batches taken when each digest begins
        yield

    assert run(sink, digest_slot=slot).done
    assert turns == [0, 1, 2, 3]


def test_posting_ahead_a_batch_the_sink_refuses_ends_the_range_and_nothing_after_it_is_posted():
    sink = Sink(fail_at=BIG + 100)
    progress = []
    with pytest.raises(RuntimeError, match="refused"):
        run(sink, post_ahead=True, progress=lambda state: progress.append(state.next_id))
    assert sink.asked == [BIG, BIG + 100]  # the batch digested meanwhile is never posted
    assert sink.taken == [BIG]
    assert progress == [BIG + 100]  # only what was taken is counted


def test_posting_ahead_a_stop_waits_for_the_batch_under_way_and_counts_it():
    sink = Sink()
    stop = threading.Event()
    turns = []

    @contextmanager
    def slot():
        turns.append(None)
        if len(turns) == 2:
            stop.set()  # asked to stop while the first batch is being posted and the second digested
        yield

    state = run(sink, post_ahead=True, digest_slot=slot, should_stop=stop.is_set)
    assert sink.asked == sink.taken == [BIG]  # the first taken and counted; the second never posted
    assert (state.next_id, state.batches, state.done) == (BIG + 100, 1, False)  # the resume point


def test_a_stop_asked_while_the_first_batch_is_digested_posts_nothing():
    sink = Sink()
    stop = threading.Event()

    @contextmanager
    def slot():
        yield
        stop.set()

    state = run(sink, post_ahead=True, digest_slot=slot, should_stop=stop.is_set)
    assert sink.asked == []
    assert (state.next_id, state.batches) == (BIG, 0)


def test_digest_turns_go_to_the_longest_held_range_first():
    turns = DigestTurns(threading.Event())
    order = []
    first_in = threading.Event()
    release_first = threading.Event()

    def holder():
        with turns.turn(5):
            first_in.set()
            assert release_first.wait(5)

    def waiter(number):
        with turns.turn(number):
            order.append(number)

    threading.Thread(target=holder).start()
    assert first_in.wait(5)
    waiters = [threading.Thread(target=waiter, args=(n,)) for n in (9, 3, 7)]  # ask in this order
    for thread in waiters:
        thread.start()
    wait_until(
        lambda: turns._waiting == {3, 7, 9}, timeout=5, what="the three ranges waiting for a turn", interval=0.01
    )
    release_first.set()
    for thread in waiters:
        thread.join(5)
    assert order == [3, 7, 9]


def test_a_range_leased_later_waits_for_the_first_turn_of_one_leased_before_it():
    """Ranges leased together start their threads at once: the one leased first digests first
    (the prefetcher fetches its chunks first), whichever thread asks first; a range that ends
    before its first turn lets the others go."""
    turns = DigestTurns(threading.Event())
    turns._cond = WatchedCondition()
    for order in (0, 1, 2):
        turns.expect(order)
    order = []

    def ranged(number):
        with turns.turn(number):
            order.append(number)

    late = [threading.Thread(target=ranged, args=(n,)) for n in (2, 1)]
    for thread in late:
        thread.start()
    wait_until(
        lambda: set(late) <= turns._cond.waited, timeout=5, what="ranges 1 and 2 waiting for a turn", interval=0.01
    )
    assert order == []  # range 0 has not asked yet: nobody goes before it
    turns.forget(0)  # it ended before its first turn (failed, given back)
    for thread in late:
        thread.join(5)
    assert order == [1, 2]


def test_digest_turns_without_an_expected_range_go_to_whoever_asks():
    turns = DigestTurns(threading.Event())
    turns.expect(0)
    with turns.turn(0):
        pass
    # Range 0 has taken its first turn, so a later range may digest between its batches.
    done = threading.Event()

    def later():
        with turns.turn(1):
            done.set()

    threading.Thread(target=later).start()
    assert done.wait(5)


def test_a_range_waiting_for_its_turn_stops_when_the_node_stops():
    stop = threading.Event()
    turns = DigestTurns(stop)
    held = threading.Event()
    release = threading.Event()

    def holder():
        with turns.turn(1):
            held.set()
            release.wait(5)

    threading.Thread(target=holder).start()
    assert held.wait(5)
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(Stopped):
        with turns.turn(2):
            pass
    assert time.monotonic() - started < 2
    release.set()


def test_posting_ahead_a_stop_asked_while_a_batch_is_posted_leaves_the_next_one_unposted():
    stop = threading.Event()
    turns = []
    second_turn = threading.Event()

    @contextmanager
    def slot():
        turns.append(None)
        if len(turns) == 2:
            second_turn.set()
        yield

    class StoppingSink(Sink):
        def submit(self, batch):
            if batch["first"] == BIG:
                assert second_turn.wait(5)  # the second batch is being digested
                stop.set()  # SIGTERM (or the range dropped) while the first batch is on its way
            super().submit(batch)

    sink = StoppingSink()
    state = run(sink, post_ahead=True, digest_slot=slot, should_stop=stop.is_set)
    assert len(turns) == 2
    assert sink.asked == [BIG]  # the batch digested meanwhile is never posted
    assert (state.next_id, state.batches) == (BIG + 100, 1)


def test_posting_ahead_a_refusal_ends_the_range_before_it_waits_for_its_next_turn():
    sink = Sink(fail_at=BIG)
    turns = []

    @contextmanager
    def slot():
        turns.append(len(turns))
        if len(turns) == 2:
            wait_until(lambda: sink.refused, timeout=5, what="the first batch refused", interval=0.01)
        yield

    with pytest.raises(RuntimeError, match="refused"):
        run(sink, post_ahead=True, digest_slot=slot)
    assert sink.asked == [BIG]
    assert len(turns) == 2  # not a third turn after the refusal was known


def test_posting_ahead_a_sink_s_prepared_form_waits_for_the_post_not_the_batch():
    """The node's sink encodes a batch on the range's thread (prepare): only the body waits while
    the batch before is posted."""
    range_thread = threading.current_thread()

    class PreparingSink(Sink):
        def __init__(self):
            super().__init__()
            self.prepared_on = []

        def prepare(self, batch):
            self.prepared_on.append(threading.current_thread())
            return {"first": batch["first"], "stats": batch["stats"], "prepared": True}

        def submit(self, item):
            assert item["prepared"] and threading.current_thread() is not range_thread
            super().submit(item)

    sink = PreparingSink()
    state = run(sink, post_ahead=True)
    assert sink.prepared_on == [range_thread] * 4
    assert sink.taken == [BIG + 100 * i for i in range(4)]
    assert (state.done, state.lines) == (True, 400)


def test_posting_ahead_a_batch_the_sink_cannot_prepare_ends_the_range_and_is_never_posted():
    class TooLarge(Sink):
        def prepare(self, batch):
            if batch["first"] == BIG + 100:
                raise ValueError("batch too large")
            return batch

    sink = TooLarge()
    with pytest.raises(ValueError, match="too large"):
        run(sink, post_ahead=True)
    assert sink.asked == [BIG]  # the first posted (and waited for), the second never


def test_digest_turns_with_two_slots_let_two_ranges_digest_and_the_third_wait():
    turns = DigestTurns(threading.Event(), slots=2)
    inside, release = [], threading.Event()
    lock = threading.Lock()
    entered = [threading.Event() for _ in range(3)]

    def holder(order):
        with turns.turn(order):
            with lock:
                inside.append(order)
            entered[order].set()
            assert release.wait(5)

    threads = [threading.Thread(target=holder, args=(order,)) for order in range(3)]
    for order, thread in enumerate(threads[:2]):
        thread.start()
        assert entered[order].wait(5)
    threads[2].start()
    wait_until(lambda: 2 in turns._waiting, timeout=5, what="the third range waiting for a turn", interval=0.01)
    assert not entered[2].is_set()  # both slots taken
    assert sorted(inside) == [0, 1]
    release.set()
    for thread in threads:
        thread.join(5)
    assert sorted(inside) == [0, 1, 2]


def test_digest_turns_need_a_slot():
    with pytest.raises(ValueError):
        DigestTurns(threading.Event(), slots=0)
