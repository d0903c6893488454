"""The range loop, shared by the edge node (`edge run`) and the data center (`flask seed range`).

A range is walked from its resume point in chunks of `chunk_size` articles; every
`batch_chunks` chunks (and at the range's end) the chunks are digested into one batch and
handed to a sink: the node's sink posts it to the coordinator, the data center's stores it.
Where the chunks come from is the source's business: one NNTP connection, the prefetcher's N
connections, or the coordinator's spool stream.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol

from edge.digest.batch import EncodedBatch
from edge.digest.gather import Gatherer
from edge.digest.overview import DEFAULT_LAYOUT, OverviewLayout
from edge.digest.rules import RuleSet

Blocks = Iterable[bytes]  # CRLF-terminated overview lines, as NNTPClient.over yields them


class ChunkSource(Protocol):
    def chunks(self, spans: list[tuple[int, int]]) -> Iterator[tuple[int, int, Blocks]]:
        """The overview lines of each span, yielded in the order given. run_range asks for them
        before it waits for its turn to digest: a source that fetches ahead starts then."""


class Digester(Protocol):
    def __call__(self, group: str, layout: OverviewLayout, rules: RuleSet | None, spans: list[tuple[int, int]],
                 chunks: Iterator[tuple[int, int, Blocks]],
                 on_chunk: Callable[[int], None] | None = None) -> dict | EncodedBatch:
        """One batch: the chunks of spans, taken from chunks in order (on_chunk(lines) after each)."""


class BatchSink(Protocol):
    def submit(self, batch: dict) -> None:
        """Take one batch; raise to stop the range (the batch was not taken). With run_range's
        post_ahead, a sink may also have prepare(batch), called on the range's thread as soon as
        the batch is built: submit() then gets what prepare returned (raising there stops the
        range too)."""


def chunk_spans(first: int, last: int, chunk_size: int) -> list[tuple[int, int]]:
    """[first, last] in chunks of chunk_size articles."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    return [(a, min(a + chunk_size - 1, last)) for a in range(first, last + 1, chunk_size)]


def batch_spans(first: int, last: int, chunk_size: int, batch_chunks: int) -> list[list[tuple[int, int]]]:
    """The chunks of [first, last] grouped batch_chunks at a time."""
    chunks = chunk_spans(first, last, chunk_size)
    return [chunks[i:i + batch_chunks] for i in range(0, len(chunks), batch_chunks)]


@dataclass
class RangeProgress:
    """What an operator sees of a range: counts so far and the rate."""

    first_id: int
    last_id: int
    next_id: int
    lines: int = 0
    rejected: int = 0
    batches: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def lines_per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.lines / elapsed if elapsed > 0 else 0.0

    @property
    def done(self) -> bool:
        return self.next_id > self.last_id


@dataclass
class SingleConnectionSource:
    """Chunks read one after another over one NNTP connection (the data center's runner)."""

    client: object  # edge.digest.nntp.NNTPClient, already in the range's group

    def chunks(self, spans):
        for first, last in spans:
            yield first, last, self.client.over(first, last)


def run_range(
    *,
    group: str,
    next_id: int,
    last_id: int,
    chunk_size: int,
    batch_chunks: int,
    source: ChunkSource,
    sink: BatchSink,
    rules: RuleSet | None = None,
    layout: OverviewLayout = DEFAULT_LAYOUT,
    progress: Callable[[RangeProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    digest_slot: Callable[[], AbstractContextManager] = nullcontext,
    on_chunk: Callable[[int], None] | None = None,
    post_ahead: bool = False,
    on_digested: Callable[[], None] | None = None,
    digester: Digester | None = None,
) -> RangeProgress:
    """Digest [next_id, last_id] batch by batch into the sink; returns where it got to.

    Stops between batches when should_stop() says so; the returned next_id is the resume point
    (the end of the last batch the sink took). Each batch is gathered and built inside
    digest_slot() (the node lets one range at a time digest, which bounds memory) and handed to
    the sink outside it. on_chunk(lines) follows each chunk digested, with the lines it had (the
    digest counts them: nobody scans them again).

    post_ahead: the sink takes each batch on a thread of its own while the next batch is
    digested (the node's: posting a batch takes the coordinator a while, and the digest is the
    node's bottleneck). Batches still reach the sink one at a time and in order: a batch is
    handed over once the sink took the one before, whose error, if any, ends the range here
    (and, seen before the range's next turn to digest, ends it then). Once should_stop() says
    so, no batch is handed over: the one digested meanwhile is dropped, the resume point is the
    end of the last one taken.

    on_digested() follows the range's last batch digested, before it is handed to the sink: the
    range needs no more turns to digest (the node leases the next one while the batch is posted).

    digester: who digests each batch (by default this thread, into the batch dict); the node's
    edge.node.digestpool.DigestPool.digest digests in a worker process and gives the batch encoded
    (edge.digest.batch.EncodedBatch), which its sink takes as it is.
    """
    state = RangeProgress(first_id=next_id, last_id=last_id, next_id=next_id)
    batches = batch_spans(next_id, last_id, chunk_size, batch_chunks)
    chunks = iter(source.chunks([span for batch in batches for span in batch]))
    digest = digester or _digest
    poster = _Poster(sink) if post_ahead else None

    def taken(spans: list[tuple[int, int]], stats: dict) -> None:
        state.next_id = spans[-1][1] + 1
        state.batches += 1
        state.lines += stats["lines"]
        state.rejected += sum(stats["rejected"].values())
        if progress is not None:
            progress(state)

    try:
        for spans in batches:
            if poster is not None and poster.finished():
                poster.wait(taken)  # a refused batch ends the range before it waits for its turn again
            if should_stop():
                break
            with digest_slot():
                batch = digest(group, layout, rules, spans, chunks, on_chunk)
            if on_digested is not None and spans is batches[-1]:
                on_digested()
            if poster is None:
                stats = _stats(batch)
                sink.submit(batch)
                taken(spans, stats)
                del batch  # freed before the next batch is gathered
                continue
            stats = _stats(batch)
            # What waits for the post before is the sink's prepared form (the node's: the encoded
            # body), not the batch, when the sink prepares one.
            item = sink.prepare(batch) if hasattr(sink, "prepare") else batch
            del batch
            poster.wait(taken)
            if should_stop():  # asked while the batch before was posted: this one stays unposted
                break
            poster.post(item, spans, stats)
            del item
        if poster is not None:
            poster.wait(taken)
    finally:
        if poster is not None:
            poster.close()  # a post under way ends first (taken or not): nothing is sent after
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return state


class _Poster:
    """One range's batches handed to the sink by a thread of its own (one for the range: the
    node's coordinator client keeps a connection per thread), one at a time."""

    def __init__(self, sink: BatchSink):
        self.sink = sink
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{threading.current_thread().name}-post")
        self.pending: Future | None = None
        self.spans: list[tuple[int, int]] = []
        self.stats: dict = {}

    def post(self, item, spans: list[tuple[int, int]], stats: dict) -> None:
        self.spans, self.stats = spans, stats
        self.pending = self.executor.submit(self.sink.submit, item)

    def finished(self) -> bool:
        return self.pending is not None and self.pending.done()

    def wait(self, taken: Callable[[list[tuple[int, int]], dict], None]) -> None:
        """Until the batch posted last was taken (then counted by taken()), or raise why it was not."""
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        pending.result()
        taken(self.spans, self.stats)

    def close(self) -> None:
        self.executor.shutdown(wait=True)


def _stats(batch: dict | EncodedBatch) -> dict:
    return batch.stats if isinstance(batch, EncodedBatch) else batch["stats"]


def batch_chunks_of(spans: list[tuple[int, int]],
                    chunks: Iterator[tuple[int, int, Blocks]]) -> Iterator[tuple[int, int, Blocks]]:
    """The next len(spans) chunks of the source, each checked to be the span expected."""
    for expected in spans:
        first, last, blocks = next(chunks, (None, None, None))
        if (first, last) != expected:
            raise RuntimeError(f"source gave chunk {first}-{last}, expected {expected[0]}-{expected[1]}")
        yield first, last, blocks


def _digest(group: str, layout: OverviewLayout, rules: RuleSet | None, spans: list[tuple[int, int]],
            chunks: Iterator[tuple[int, int, Blocks]], on_chunk: Callable[[int], None] | None = None) -> dict:
    gatherer = Gatherer(group, layout, rules)
    for first, last, blocks in batch_chunks_of(spans, chunks):
        lines = gatherer.add_chunk(first, last, blocks)
        if on_chunk is not None:
            on_chunk(lines)
    return gatherer.build()
