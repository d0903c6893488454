"""The digest's per-process caches stay bounded and change no result; the collector's pause."""

import gc
import sys
import threading

import pytest

from edge.digest import gather as gather_module
from edge.digest import overview as overview_module
from edge.digest import subjects as subjects_module
from edge.digest.gather import Gatherer, clear_caches
from edge.digest.rules import RuleSet
from simnews.generator import Config, generate
from simnews.scripted import overview_lines
from tests.edge.helpers import as_received, block

GROUP = "alt.binaries.test"
EBOOKS = "alt.binaries.e-book.french"  # small releases: texts around their counters to clean (_CLEANED)
FIRST = 6_000_000_001
BLOCK_LINES = 300


def lines_of(seed: int, count: int, group: str = GROUP) -> list[bytes]:
    return list(overview_lines(generate(count, Config(seed=seed, groups=(group,))), group, FIRST))


def digest(lines, chunk=1000, per_batch=3, rules=None, watch=None, group=GROUP):
    """Batches (as the coordinator decodes them); watch() is called after every chunk."""
    batches = []
    for batch_start in range(0, len(lines), chunk * per_batch):
        gatherer = Gatherer(group, rules=rules() if rules else RuleSet())
        for start in range(batch_start, min(len(lines), batch_start + chunk * per_batch), chunk):
            chunk_lines = lines[start : start + chunk]
            blocks = [block(chunk_lines[at : at + BLOCK_LINES]) for at in range(0, len(chunk_lines), BLOCK_LINES)]
            gatherer.add_chunk(FIRST + start, FIRST + start + chunk - 1, blocks)
            if watch:
                watch()
        batches.append(as_received(gatherer.build()))
    return batches


@pytest.fixture
def tiny_caches(monkeypatch):
    monkeypatch.setattr(gather_module, "_COUNTER_TAILS_MAX", 7)
    monkeypatch.setattr(gather_module, "_SUBJECTS_MAX", 5)
    monkeypatch.setattr(overview_module, "_SIZES_MAX", 3)
    monkeypatch.setattr(subjects_module, "_CLEANED_MAX", 2)
    clear_caches()
    yield
    clear_caches()


@pytest.mark.parametrize("group", [GROUP, EBOOKS])
@pytest.mark.parametrize(
    "rules",
    [
        RuleSet,
        lambda: RuleSet(executable=False),
        lambda: RuleSet.from_data(
            [
                {"name": "k", "field": "subject", "pattern": "rar", "action": "keep"},
                {"name": "d", "field": "poster", "pattern": "^[a-m]", "action": "drop"},
            ]
        ),
    ],
)
def test_overflowing_caches_change_no_batch(rules, group, monkeypatch):
    lines = lines_of(4, 9000, group)
    clear_caches()
    expected = digest(lines, rules=rules, group=group)
    with monkeypatch.context() as patched:
        patched.setattr(gather_module, "_COUNTER_TAILS_MAX", 7)
        patched.setattr(gather_module, "_SUBJECTS_MAX", 5)
        patched.setattr(overview_module, "_SIZES_MAX", 3)
        patched.setattr(subjects_module, "_CLEANED_MAX", 2)
        clear_caches()
        sizes = []
        got = digest(
            lines,
            rules=rules,
            group=group,
            watch=lambda: sizes.append(
                (
                    len(gather_module._COUNTER_TAILS),
                    len(gather_module._SUBJECTS),
                    len(overview_module._SIZES),
                    len(subjects_module._CLEANED),
                )
            ),
        )
    clear_caches()
    assert got == expected
    # Each cache stays within its bound plus what one block adds (at most one entry for each line).
    assert max(tails for tails, _, _, _ in sizes) <= 7 + BLOCK_LINES
    assert max(subjects for _, subjects, _, _ in sizes) <= 5 + BLOCK_LINES
    assert max(known for _, _, known, _ in sizes) <= 3 + BLOCK_LINES
    # This cache is emptied when it is over its bound at a miss, so it holds at most one more.
    assert max(cleaned for _, _, _, cleaned in sizes) <= 2 + 1


def test_the_caches_stay_bounded_over_a_long_range(monkeypatch):
    """Lines from ever new posts: the caches grow to their bounds and no further."""
    monkeypatch.setattr(gather_module, "_COUNTER_TAILS_MAX", 100)
    monkeypatch.setattr(gather_module, "_SUBJECTS_MAX", 200)
    monkeypatch.setattr(overview_module, "_SIZES_MAX", 20)
    clear_caches()
    largest = [0, 0, 0]

    def watch():
        for at, size in enumerate(
            (len(gather_module._COUNTER_TAILS), len(gather_module._SUBJECTS), len(overview_module._SIZES))
        ):
            largest[at] = max(largest[at], size)

    for seed in (1, 2, 3):
        digest(lines_of(seed, 6000), watch=watch)
    clear_caches()
    assert largest[0] <= 100 + BLOCK_LINES and largest[1] <= 200 + BLOCK_LINES and largest[2] <= 20 + BLOCK_LINES
    assert largest[0] > 100 and largest[1] > 200  # they did fill up


def test_trim_drops_the_oldest_half():
    cache = {n: str(n) for n in range(11)}
    gather_module._trim(cache, 10)
    assert list(cache) == list(range(6, 11))
    small = {1: 1, 2: 2}
    gather_module._trim(small, 10)
    assert small == {1: 1, 2: 2}


def in_threads(target, count: int) -> None:
    """target run by `count` threads at once, until all have returned."""
    workers = [threading.Thread(target=target) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


@pytest.fixture
def frequent_switches():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.parametrize("group", [GROUP, EBOOKS])
def test_threads_digesting_with_tiny_caches(tiny_caches, group, frequent_switches):
    """Threads trimming and filling the same caches: each gets the batches one thread gets. The
    interpreter switches threads as often as it can, so that a trim that is not one step breaks."""
    lines = lines_of(6, 3000, group)
    expected = digest(lines, group=group)
    results, raised = [], []

    def digesting():
        try:
            results.append(digest(lines, group=group))
        except Exception as exc:  # noqa: BLE001 - shown by the assert below
            raised.append(repr(exc))

    for _ in range(5):
        in_threads(digesting, 4)
    assert raised == []
    assert results == [expected] * 20


# -- the collector -----------------------------------------------------------------------------


def test_pauses_nest_across_threads_and_the_collector_runs_again():
    assert gc.isenabled()
    inside, release = threading.Barrier(3), threading.Event()
    seen = []

    def pausing():
        with gather_module._collector_paused():
            inside.wait()
            seen.append(gc.isenabled())
            release.wait()

    threads = [threading.Thread(target=pausing) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    seen.append(gc.isenabled())
    release.set()
    for thread in threads:
        thread.join()
    assert seen == [False, False, False]
    assert gc.isenabled() and gather_module._pauses == 0


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with gather_module._collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_objects_frozen_by_the_program_stay_frozen():
    frozen_before = gc.get_freeze_count()
    kept = [[n] for n in range(1000)]  # noqa: F841 - tracked objects to freeze
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > frozen_before
        with gather_module._collector_paused():
            [[n] for n in range(1000)]
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()


def test_what_a_pause_made_is_moved_to_the_oldest_generation():
    gc.collect()
    with gather_module._collector_paused():
        made = [[n] for n in range(5000)]
    assert gc.get_count()[0] < 100  # no young collection is due for them
    assert not any(any(obj is made for obj in gc.get_objects(generation)) for generation in (0, 1))
    assert any(obj is made for obj in gc.get_objects(2))


def test_a_full_collection_follows_enough_moved_lines(monkeypatch):
    monkeypatch.setattr(gather_module, "_FULL_COLLECTION_LINES", 2500)
    monkeypatch.setattr(gather_module, "_lines_moved", 0)
    collect, full = gc.collect, []

    def counted(*args):
        full.append(args)
        return collect(*args)

    monkeypatch.setattr(gc, "collect", counted)
    digest(lines_of(7, 7000), chunk=1000, per_batch=1)  # 7 batches of 1000 lines
    # when the 4th batch starts (3000 lines moved) and when the 7th does (3000 again)
    assert full == [(), ()]


def test_threads_digesting_count_every_moved_line_and_collect_when_due(monkeypatch, frequent_switches):
    """While one thread's digest has the collector paused, another's batch counts its lines all the
    same, and a full collection due is made, not dropped (gc.isenabled() said False then)."""
    monkeypatch.setattr(gather_module, "_FULL_COLLECTION_LINES", 10**12)  # first only counted
    monkeypatch.setattr(gather_module, "_lines_moved", 0)
    lines = lines_of(8, 6000)
    threads, rounds = 4, 3

    def digesting():
        for _ in range(rounds):
            digest(lines, chunk=1000, per_batch=2)  # 3 batches of 2000 lines

    in_threads(digesting, threads)
    assert gather_module._lines_moved == threads * rounds * len(lines)

    threshold, batch_lines = 4000, 2000
    monkeypatch.setattr(gather_module, "_FULL_COLLECTION_LINES", threshold)
    monkeypatch.setattr(gather_module, "_lines_moved", 0)
    collect, full = gc.collect, []
    monkeypatch.setattr(gc, "collect", lambda *args: full.append(args) or collect(*args))
    in_threads(digesting, threads)
    # each collection resets a count of at least the threshold and at most the threshold plus
    # one batch from every thread (each checks when its next batch starts)
    moved = threads * rounds * len(lines)
    assert len(full) >= (moved - threshold) // (threshold + threads * batch_lines)
    assert len(full) <= moved // threshold
