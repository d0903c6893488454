"""Digest worker processes (edge.node.digestpool): real spawned processes, against the digest in this
process, and the ways a worker or its hand-over can fail."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from edge.digest.batch import EncodedBatch, decode_batch
from edge.node.digestpool import DigestFailed, DigestPool, DigestWorkerLost
from edge.digest.overview import DEFAULT_LAYOUT
from edge.digest.rules import RuleSet
from edge.digest.runner import RangeJob, _digest, batch_spans, run_range
from tests.edge.helpers import overview_line
from tests.fixtures.waiting import WatchedCondition, wait_until

BIG = 2**32 + 7_000_000  # article numbers past 32 bits
GROUP = "alt.binaries.test"


def lines(first: int, last: int) -> list[bytes]:
    """Releases of a few files each, a flood of bare executables among them, a broken line."""
    out = []
    for number in range(first, last + 1):
        release, part = divmod(number - first, 12)
        if number % 97 == 0:
            out.append(b"%d\tnot an overview line" % number)
        elif release % 3 == 0:
            out.append(overview_line(number, f'Film.{release}.2025 - "Film.{release}.2025.exe" yEnc ({part + 1}/12)'))
        else:
            out.append(
                overview_line(
                    number,
                    f'[{part % 3 + 1}/3] - "Book.{release}.part{part % 3 + 1}.rar" yEnc ({part // 3 + 1}/4)',
                    size=1000 + number % 500,
                )
            )
    return out


class Source:
    """Each chunk's lines CRLF-terminated, in blocks of `per_block` lines; `fail_after_blocks`
    makes a chunk's iteration raise part way through (a source that breaks off)."""

    def __init__(self, per_block: int = 40, fail_after_blocks: int | None = None):
        self.per_block = per_block
        self.fail_after_blocks = fail_after_blocks

    def blocks(self, first: int, last: int):
        chunk = [line + b"\r\n" for line in lines(first, last)]
        for sent, start in enumerate(range(0, len(chunk), self.per_block)):
            if self.fail_after_blocks is not None and sent == self.fail_after_blocks:
                raise ConnectionError("the source broke off")
            yield b"".join(chunk[start : start + self.per_block])

    def chunks(self, spans):
        for first, last in spans:
            yield first, last, self.blocks(first, last)


def spans_of(first: int, last: int) -> list[tuple[int, int]]:
    (spans,) = batch_spans(first, last, 200, 10)
    return spans


@pytest.fixture
def pool():
    pool = DigestPool(2)
    yield pool
    pool.close()


def in_process(spans, rules=None) -> EncodedBatch:
    return EncodedBatch.of(_digest(GROUP, DEFAULT_LAYOUT, rules, spans, Source().chunks(spans)))


def test_a_worker_gives_the_batch_the_node_s_process_would_and_counts_each_chunk(pool):
    rules = RuleSet.from_data([{"name": "no-books-7", "field": "subject", "pattern": r"Book\.7\b"}])
    for first in (BIG, BIG + 1000):
        spans = spans_of(first, first + 999)
        counted = []
        got = pool.digest(GROUP, DEFAULT_LAYOUT, rules, spans, Source().chunks(spans), counted.append)
        want = in_process(spans, rules)
        assert got == want  # the same body, byte for byte, and the same stats
        assert counted == [200] * 5
        batch = decode_batch(got.body, got.content_type, got.encoding)
        assert batch["first"] == first and batch["last"] == first + 999
        assert min(batch["fragments"]["article"]) >= first > 2**32
        assert batch["rules"]["no-books-7"][0] == 1 and batch["rules"]["executable"][0] > 0
        assert got.stats["rejected"] and got.stats["lines"] == 1000


def test_two_batches_digest_at_once_in_two_workers(pool):
    spans = [spans_of(BIG + n * 1000, BIG + n * 1000 + 999) for n in range(2)]
    results: dict[int, EncodedBatch] = {}

    def digest(index):
        results[index] = pool.digest(GROUP, DEFAULT_LAYOUT, None, spans[index], Source().chunks(spans[index]))

    threads = [threading.Thread(target=digest, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [results[i] for i in range(2)] == [in_process(spans[i]) for i in range(2)]
    assert len({worker.process.pid for worker in pool._idle}) == 2


def test_a_worker_killed_with_a_batch_in_hand_fails_that_batch_only(pool):
    spans = spans_of(BIG, BIG + 999)
    pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans))  # a worker is running
    (worker,) = pool._idle
    victim = worker.process.pid

    def killing_chunks():
        for index, chunk in enumerate(Source().chunks(spans)):
            if index == 2:
                os.kill(victim, signal.SIGKILL)
                wait_until(lambda: not worker.process.is_alive(), timeout=10, what="the worker's death", interval=0.01)
            yield chunk

    with pytest.raises(DigestWorkerLost, match=str(victim)):
        pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, killing_chunks())
    again = pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans))
    assert again == in_process(spans)
    assert victim not in {worker.process.pid for worker in pool._idle}


def test_an_error_in_the_worker_s_digest_comes_back_and_the_worker_goes_on(pool):
    spans = spans_of(BIG, BIG + 999)
    pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans))
    (pid,) = [worker.process.pid for worker in pool._idle]
    # A chunk that does not follow the one before: the worker's Gatherer refuses it, mid-batch,
    # with its blocks still coming down the pipe.
    gap = [(BIG, BIG + 199), (BIG + 400, BIG + 599)]
    with pytest.raises(DigestFailed, match="does not follow"):
        pool.digest(GROUP, DEFAULT_LAYOUT, None, gap, Source().chunks(gap))
    assert pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans)) == in_process(spans)
    assert [worker.process.pid for worker in pool._idle] == [pid]  # the same worker, in step


def test_a_hand_over_broken_off_mid_chunk_replaces_the_worker(pool):
    spans = spans_of(BIG, BIG + 999)
    pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans))
    (pid,) = [worker.process.pid for worker in pool._idle]
    with pytest.raises(ConnectionError):
        pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source(fail_after_blocks=2).chunks(spans))
    assert not pool._idle  # the worker, left mid-chunk, is gone
    assert pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans)) == in_process(spans)
    assert [worker.process.pid for worker in pool._idle] != [pid]


def test_a_source_giving_the_wrong_chunk_fails_before_the_worker_sees_it(pool):
    spans = spans_of(BIG, BIG + 999)
    wrong = Source().chunks([(BIG + 200, BIG + 399)])
    with pytest.raises(RuntimeError, match="expected"):
        pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, wrong)
    assert pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans)) == in_process(spans)


def test_workers_ignore_the_terminal_s_signals_and_end_with_the_pool(pool):
    pool.start()
    for worker in pool._idle:  # each serving (a round trip): its signals set
        assert worker.call(("batch", GROUP, DEFAULT_LAYOUT, None, "msgpack")) is None
    pids = [worker.process.pid for worker in pool._idle]
    assert len(pids) == 2
    for pid in pids:  # Ctrl-C reaches the whole process group; the node stops its workers itself
        os.kill(pid, signal.SIGINT)
        os.kill(pid, signal.SIGTERM)
    # A signal a worker did not ignore would be acted on before the worker reads what is sent
    # after it, so each worker answering a round trip shows that both were delivered and ignored.
    for worker in pool._idle:
        assert worker.call(("batch", GROUP, DEFAULT_LAYOUT, None, "msgpack")) is None
    spans = spans_of(BIG, BIG + 999)
    assert pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans)) == in_process(spans)
    workers = list(pool._idle)
    pool.close()
    for worker in workers:
        assert not worker.process.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans))


def test_run_range_with_the_pool_as_digester_posts_encoded_batches_in_order(pool):
    taken = []

    class Sink:
        def submit(self, batch):
            assert isinstance(batch, EncodedBatch)
            taken.append((batch.first, batch.last, batch.lines))

    job = RangeJob(group=GROUP, next_id=BIG, last_id=BIG + 2499, chunk_size=200, batch_chunks=5)
    state = run_range(job, Source(), Sink(), digester=pool.digest, post_ahead=True)
    assert taken == [(BIG, BIG + 999, 1000), (BIG + 1000, BIG + 1999, 1000), (BIG + 2000, BIG + 2499, 500)]
    assert (state.next_id, state.batches, state.lines) == (BIG + 2500, 3, 2500)


def test_python_dash_m_edge_spawns_its_workers_without_running_the_program_again(tmp_path):
    """`python -m edge run` with workers: a spawned worker prepares itself from the parent's main
    module, which here is edge.__main__ (multiprocessing leaves a package's __main__ alone: the
    program does not run again in the worker). The coordinator refuses, so the node gives up
    after a second and a half (exit 4), its workers started meanwhile."""
    import subprocess
    import sys

    env = {
        "PATH": os.environ.get("PATH", ""),
        "COORDINATOR_URL": "http://127.0.0.1:1",
        "COORDINATOR_INSECURE": "1",
        "NODE_TOKEN": "seed_x",
        "COORDINATOR_GIVE_UP": "1.5",
        "DIGEST_PROCESSES": "2",
    }
    done = subprocess.run(
        [sys.executable, "-m", "edge", "run", "--progress", "json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4, done.stderr
    assert '"digest_processes": 2' in done.stderr
    assert "usage:" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_batch_waiting_for_a_worker_is_refused_when_the_pool_closes():
    pool = DigestPool(1)
    pool._cond = WatchedCondition()
    spans = spans_of(BIG, BIG + 999)
    release = threading.Event()

    def held_chunks():
        for index, chunk in enumerate(Source().chunks(spans)):
            if index == 1:
                assert release.wait(10)
            yield chunk

    holder = threading.Thread(target=pool.digest, args=(GROUP, DEFAULT_LAYOUT, None, spans, held_chunks()))
    holder.start()
    wait_until(lambda: pool._started == 1, timeout=10, what="the only worker in use", interval=0.01)
    refused = []

    def waiter():
        try:
            pool.digest(GROUP, DEFAULT_LAYOUT, None, spans, Source().chunks(spans))
        except RuntimeError as exc:
            refused.append(str(exc))

    waiting = threading.Thread(target=waiter)
    waiting.start()
    wait_until(
        lambda: waiting in pool._cond.waited, timeout=10, what="the second batch waiting for a worker", interval=0.01
    )
    pool.close()
    waiting.join(5)
    assert refused == ["the digest pool is closed"]
    release.set()
    holder.join(30)
    assert not holder.is_alive()
    assert pool._started == 0  # the worker in use was stopped when its batch ended
