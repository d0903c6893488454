"""The range loop, shared by the edge node (`edge run`) and the data center (`flask seed range`).

A range is walked from its resume point in chunks of `chunk_size` articles; every
`batch_chunks` chunks (and at the range's end) the chunks are digested into one batch and
handed to a sink: the node's sink posts it to the coordinator, the data center's stores it.
Where the chunks come from is the source's business: one NNTP connection, the prefetcher's N
connections, or the coordinator's spool stream.

What the loop needs from its caller, run_range(job, source, sink, hooks):

    RangeJob      the range: group, resume point, end, chunk and batch sizes, rules, layout
    ChunkSource   the overview lines of each chunk, in order
    BatchSink     takes each batch (and may prepare it first, when batches are posted ahead)
    RangeHooks    what the caller is asked and told along the way: whether to stop, a slot
                  to digest in, each chunk's lines, the last batch digested, the progress
                  (by default nothing is asked or told)

and, as options, who digests (a Digester: this thread by default) and whether the sink takes
each batch on a thread of its own while the next is digested (post_ahead).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, cast, overload

from edge.digest.batch import Batch, BatchStats, EncodedBatch
from edge.digest.gather import Gatherer
from edge.digest.overview import DEFAULT_LAYOUT, OverviewLayout
from edge.digest.rules import RuleSet

Blocks = Iterable[bytes]  # CRLF-terminated overview lines, as NNTPClient.over yields them

# What a range's batches are as the digester gives them and the sink takes them: the batch dict
# (the default digester's), or edge.digest.batch.EncodedBatch (the node's digest processes').
_B = TypeVar("_B", bound=Batch | EncodedBatch)
_B_co = TypeVar("_B_co", bound=Batch | EncodedBatch, covariant=True)
_B_contra = TypeVar("_B_contra", bound=Batch | EncodedBatch, contravariant=True)


class ChunkSource(Protocol):
    def chunks(self, spans: list[tuple[int, int]]) -> Iterator[tuple[int, int, Blocks]]:
        """The overview lines of each span, yielded in the order given. run_range asks for them
        before it waits for its turn to digest: a source that fetches ahead starts then."""


class Digester(Protocol[_B_co]):
    def __call__(
        self,
        group: str,
        layout: OverviewLayout,
        rules: RuleSet | None,
        spans: list[tuple[int, int]],
        chunks: Iterator[tuple[int, int, Blocks]],
        on_chunk: Callable[[int], None] | None = None,
    ) -> _B_co:
        """One batch: the chunks of spans, taken from chunks in order (on_chunk(lines) after each)."""


class BatchSink(Protocol[_B_contra]):
    def submit(self, batch: _B_contra) -> None:
        """Take one batch; raise to stop the range (the batch was not taken). With run_range's
        post_ahead, a sink may also have prepare(batch), called on the range's thread as soon as
        the batch is built: submit() then gets what prepare returned (raising there stops the
        range too), which must be a batch it takes."""


class OverClient(Protocol):
    """What SingleConnectionSource reads the chunks with (edge.digest.nntp.NNTPClient)."""

    def over(self, first: int, last: int) -> Blocks: ...


def chunk_spans(first: int, last: int, chunk_size: int) -> list[tuple[int, int]]:
    """[first, last] in chunks of chunk_size articles."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    return [(a, min(a + chunk_size - 1, last)) for a in range(first, last + 1, chunk_size)]


def batch_spans(first: int, last: int, chunk_size: int, batch_chunks: int) -> list[list[tuple[int, int]]]:
    """The chunks of [first, last] grouped batch_chunks at a time."""
    chunks = chunk_spans(first, last, chunk_size)
    return [chunks[i : i + batch_chunks] for i in range(0, len(chunks), batch_chunks)]


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

    client: OverClient  # edge.digest.nntp.NNTPClient, already in the range's group

    def chunks(self, spans: list[tuple[int, int]]) -> Iterator[tuple[int, int, Blocks]]:
        for first, last in spans:
            yield first, last, self.client.over(first, last)


@dataclass(frozen=True)
class RangeJob:
    """One range to digest: its group, where the loop resumes and where the range ends, how it is
    cut (chunk_size articles in each chunk, batch_chunks chunks in each batch), and what it is
    digested with (the group's rules, the server's overview layout)."""

    group: str
    next_id: int
    last_id: int
    chunk_size: int
    batch_chunks: int
    rules: RuleSet | None = None
    layout: OverviewLayout = DEFAULT_LAYOUT


class RangeHooks:
    """What run_range asks of its caller while it walks a range, beside the chunks (the source)
    and the batches (the sink). Every method does nothing by default (never stop, no slot to wait
    for, nothing reported): a caller subclasses RangeHooks and overrides what it needs.

    All are called on the range's thread, in this order: for each batch, should_stop() before it
    is digested, digest_slot() around its digest with on_chunk(lines) after each chunk digested,
    and progress(state) once the sink took it; on_digested() once, after the range's last batch
    is digested and before the sink has it.
    """

    def should_stop(self) -> bool:
        """Whether the range stops here, between batches (the node's: it stops, or lost the range)."""
        return False

    def digest_slot(self) -> AbstractContextManager[object]:
        """Held while a batch is gathered and built (the node lets one range at a time digest,
        which bounds memory); the sink has the batch outside it."""
        return nullcontext()

    def on_chunk(self, lines: int) -> None:
        """A chunk was digested, with this many overview lines (the digest counts them: nobody
        scans them again)."""

    def on_digested(self) -> None:
        """The range's last batch is digested: the range needs no more turns to digest (the node
        leases the next range while that batch is posted)."""

    def progress(self, state: RangeProgress) -> None:
        """The sink took a batch: state counts it."""


@overload
def run_range(
    job: RangeJob,
    source: ChunkSource,
    sink: BatchSink[Batch],
    hooks: RangeHooks | None = None,
    *,
    digester: None = None,
    post_ahead: bool = False,
) -> RangeProgress: ...


@overload
def run_range(
    job: RangeJob,
    source: ChunkSource,
    sink: BatchSink[_B],
    hooks: RangeHooks | None = None,
    *,
    digester: Digester[_B],
    post_ahead: bool = False,
) -> RangeProgress: ...


def run_range(
    job: RangeJob,
    source: ChunkSource,
    sink: BatchSink[_B],
    hooks: RangeHooks | None = None,
    *,
    digester: Digester[_B] | None = None,
    post_ahead: bool = False,
) -> RangeProgress:
    """Digest the job's range from job.next_id batch by batch into the sink; returns where it got to.

    Stops between batches when hooks.should_stop() says so; the returned next_id is the resume
    point (the end of the last batch the sink took).

    digester: who digests each batch (by default this thread, into the batch dict,
    edge.digest.batch.Batch: the sink must take those); the node's
    edge.node.digestpool.DigestPool.digest digests in a worker process and gives the batch encoded
    (edge.digest.batch.EncodedBatch), which its sink takes as it is.

    post_ahead: the sink takes each batch on a thread of its own while the next batch is
    digested (the node's: posting a batch takes the coordinator a while, and the digest is the
    node's bottleneck). Batches still reach the sink one at a time and in order: a batch is
    handed over once the sink took the one before, whose error, if any, ends the range here
    (and, seen before the range's next turn to digest, ends it then). Once should_stop() says
    so, no batch is handed over: the one digested meanwhile is dropped, the resume point is the
    end of the last one taken.
    """
    if hooks is None:
        hooks = RangeHooks()
    state = RangeProgress(first_id=job.next_id, last_id=job.last_id, next_id=job.next_id)
    batches = batch_spans(job.next_id, job.last_id, job.chunk_size, job.batch_chunks)
    chunks = iter(source.chunks([span for batch in batches for span in batch]))
    # Without a digester the sink takes Batch (run_range's first overload): _digest is one of _B.
    digest = digester or cast("Digester[_B]", _digest)
    poster = _Poster(sink) if post_ahead else None

    def taken(spans: list[tuple[int, int]], stats: BatchStats) -> None:
        state.next_id = spans[-1][1] + 1
        state.batches += 1
        state.lines += stats["lines"]
        state.rejected += sum(stats["rejected"].values())
        hooks.progress(state)

    try:
        for spans in batches:
            if poster is not None and poster.finished():
                poster.wait(taken)  # a refused batch ends the range before it waits for its turn again
            if hooks.should_stop():
                break
            with hooks.digest_slot():
                batch = digest(job.group, job.layout, job.rules, spans, chunks, hooks.on_chunk)
            if spans is batches[-1]:
                hooks.on_digested()
            if poster is None:
                stats = _stats(batch)
                sink.submit(batch)
                taken(spans, stats)
                del batch  # freed before the next batch is gathered
                continue
            stats = _stats(batch)
            # What waits for the post before is the sink's prepared form (the node's: the encoded
            # body), not the batch, when the sink prepares one.
            item: _B = sink.prepare(batch) if hasattr(sink, "prepare") else batch
            del batch
            poster.wait(taken)
            # A stop asked for while the batch before was posted leaves this one unposted.
            if hooks.should_stop():
                break
            poster.post(item, spans, stats)
            del item
        if poster is not None:
            poster.wait(taken)
    finally:
        if poster is not None:
            # A post under way ends first, taken or not, and nothing is sent after it.
            poster.close()
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return state


class _Poster(Generic[_B]):
    """One range's batches handed to the sink by a thread of its own (one for the range: the
    node's coordinator client keeps a connection per thread), one at a time."""

    def __init__(self, sink: BatchSink[_B]):
        self.sink = sink
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{threading.current_thread().name}-post")
        self.pending: Future[None] | None = None
        self.spans: list[tuple[int, int]] = []
        self.stats: BatchStats = {"lines": 0, "rejected": {}, "bad_dates": 0}  # those of the batch posted

    def post(self, item: _B, spans: list[tuple[int, int]], stats: BatchStats) -> None:
        self.spans, self.stats = spans, stats
        self.pending = self.executor.submit(self.sink.submit, item)

    def finished(self) -> bool:
        return self.pending is not None and self.pending.done()

    def wait(self, taken: Callable[[list[tuple[int, int]], BatchStats], None]) -> None:
        """Until the batch posted last was taken (then counted by taken()), or raise why it was not."""
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        pending.result()
        taken(self.spans, self.stats)

    def close(self) -> None:
        self.executor.shutdown(wait=True)


def _stats(batch: Batch | EncodedBatch) -> BatchStats:
    return batch.stats if isinstance(batch, EncodedBatch) else batch["stats"]


def batch_chunks_of(
    spans: list[tuple[int, int]], chunks: Iterator[tuple[int, int, Blocks]]
) -> Iterator[tuple[int, int, Blocks]]:
    """The next len(spans) chunks of the source, each checked to be the span expected."""
    for expected in spans:
        chunk = next(chunks, None)
        if chunk is None:  # the source has no more chunks
            raise RuntimeError(f"source gave chunk None-None, expected {expected[0]}-{expected[1]}")
        first, last, blocks = chunk
        if (first, last) != expected:
            raise RuntimeError(f"source gave chunk {first}-{last}, expected {expected[0]}-{expected[1]}")
        yield first, last, blocks


def _digest(
    group: str,
    layout: OverviewLayout,
    rules: RuleSet | None,
    spans: list[tuple[int, int]],
    chunks: Iterator[tuple[int, int, Blocks]],
    on_chunk: Callable[[int], None] | None = None,
) -> Batch:
    gatherer = Gatherer(group, layout, rules)
    for first, last, blocks in batch_chunks_of(spans, chunks):
        lines = gatherer.add_chunk(first, last, blocks)
        if on_chunk is not None:
            on_chunk(lines)
    return gatherer.build()
