"""Digest processes: the node's batches digested and encoded outside the node's own process.

In the node's process, the NNTP connections' threads and the digest share one GIL: the digest
runs slower beside them, and only one range can digest at a time. A DigestPool keeps worker
processes, each digesting one batch at a time: the range loop hands a worker the batch's blocks
as they come (edge.digest.runner.run_range's digester) and gets back the batch encoded
(edge.digest.batch.EncodedBatch), a few MB instead of the batch's tens of MB of objects. The node's
DigestTurns gives as many turns at once as there are workers.

The workers are started with "spawn" (the node has threads: a forked child would inherit their
locks held), once, and each keeps the digest's per-process caches from batch to batch, as the
node's process would. A worker ignores SIGINT and SIGTERM once it serves (a Ctrl-C reaches the
whole process group; the node stops its workers itself, after it gave its ranges back) and
exits when the node's end of its pipe closes, however the node ends.

A worker that dies (killed, out of memory) fails the batch it had with DigestWorkerLost; it is
replaced for the next batch. An exception in a worker's digest comes back as DigestFailed with
the worker's traceback. A batch whose hand-over breaks off on the node's side (a stop, a source
that fails part way through a chunk) leaves its worker mid-chunk: that worker is replaced.

Messages on a worker's pipe (pickled tuples; blocks as raw byte messages):

    node -> worker  ("batch", group, layout, rules, fmt)     a new batch
                    ("chunk", first, last) block... b""      one chunk's blocks, b"" after the last
                    ("build",)                               build and encode the batch
    worker -> node  ("ready", None)                          after "batch"
                    ("lines", n)                             after each chunk: its lines
                    ("encoded", EncodedBatch)                after "build"
                    ("error", text)                          instead of any of them (the worker goes on)
"""

from __future__ import annotations

import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal

from edge.digest.batch import EncodedBatch
from edge.digest.gather import Gatherer
from edge.digest.overview import OverviewLayout
from edge.digest.rules import RuleSet
from edge.digest.runner import Blocks, batch_chunks_of

if TYPE_CHECKING:  # multiprocessing is imported only once a pool is made (DigestPool.__init__)
    from multiprocessing.connection import Connection
    from multiprocessing.context import SpawnContext

# The messages of the module's docstring, as pickled down a worker's pipe (blocks go as raw bytes).
_Request = (
    tuple[Literal["batch"], str, OverviewLayout, RuleSet | None, str]
    | tuple[Literal["chunk"], int, int]
    | tuple[Literal["build"]]
)
_Reply = (
    tuple[Literal["ready"], None]
    | tuple[Literal["lines"], int]
    | tuple[Literal["encoded"], EncodedBatch]
    | tuple[Literal["error"], str]
)


class DigestWorkerLost(Exception):
    """A digest worker process died with a batch in hand."""


class DigestFailed(RuntimeError):
    """The digest raised in a worker process (a bug, or a chunk given out of order)."""


class DigestPool:
    """`processes` digest workers, taken one per batch (DigestPool.digest)."""

    def __init__(self, processes: int, fmt: str = "msgpack"):
        if processes < 1:
            raise ValueError("a digest pool needs at least one process")
        self.processes = processes
        self.fmt = fmt
        # Imported here, because a node without digest processes (the default on two cores) never
        # needs it.
        import multiprocessing

        self._context = multiprocessing.get_context("spawn")
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._started = 0  # workers alive or being started
        self._closed = False

    def start(self) -> None:
        """Starts the workers now (else each starts when first needed)."""
        while True:
            with self._cond:
                if self._closed or self._started >= self.processes:
                    return
                self._started += 1
            self._give_back(self._spawn(), reusable=True)

    def digest(
        self,
        group: str,
        layout: OverviewLayout,
        rules: RuleSet | None,
        spans: list[tuple[int, int]],
        chunks: Iterator[tuple[int, int, Blocks]],
        on_chunk: Callable[[int], None] | None = None,
    ) -> EncodedBatch:
        """One batch (edge.digest.runner's digester): the chunks of `spans`, taken from `chunks` in
        order, digested and encoded by a worker."""
        worker = self._take()
        clean = False
        try:
            worker.call(("batch", group, layout, rules, self.fmt))
            for first, last, blocks in batch_chunks_of(spans, chunks):
                lines = worker.chunk(first, last, blocks)
                if on_chunk is not None:
                    on_chunk(lines)
            encoded = worker.build()
            clean = True
            return encoded
        except DigestFailed:
            clean = True  # the worker caught it and waits for the next batch
            raise
        finally:
            self._give_back(worker, clean or worker.between_chunks)

    def close(self) -> None:
        """Stops the workers (those in use stop when their batch ends)."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.stop()

    def _take(self) -> _Worker:
        with self._cond:
            # the node's DigestTurns gives no more turns than workers: a wait here is short
            while not self._closed and not self._idle and self._started >= self.processes:
                self._cond.wait()
            if self._closed:
                raise RuntimeError("the digest pool is closed")
            if self._idle:
                return self._idle.pop()
            self._started += 1
        return self._spawn()

    def _spawn(self) -> _Worker:
        """A new worker, counted in _started already."""
        try:
            return _Worker(self._context)
        except BaseException:
            with self._cond:
                self._started -= 1
                self._cond.notify()
            raise

    def _give_back(self, worker: _Worker, reusable: bool) -> None:
        with self._cond:
            keep = reusable and not self._closed and worker.alive()
            if keep:
                self._idle.append(worker)
            else:
                self._started -= 1  # replaced when next needed
            self._cond.notify()
        if not keep:
            worker.stop()


class _Worker:
    """One worker process and the node's end of its pipe."""

    def __init__(self, context: SpawnContext):
        self.connection: Connection[_Request, _Reply]
        self.connection, child = context.Pipe(duplex=True)
        self.process = context.Process(target=serve, args=(child,), name="edge-digest", daemon=True)
        self.process.start()
        child.close()
        self.between_chunks = True  # no chunk half sent: the worker reads the next message

    def chunk(self, first: int, last: int, blocks: Blocks) -> int:
        self._send(("chunk", first, last))
        self.between_chunks = False
        for block in blocks:  # what the source raises goes up as it is
            if block:  # b"" ends the chunk
                self._send_block(block)
        self._send_block(b"")
        self.between_chunks = True
        reply = self._reply()
        if reply[0] != "lines":
            raise DigestFailed(f"the digest worker answered {reply[0]!r} to a chunk")
        return reply[1]

    def build(self) -> EncodedBatch:
        """The batch built and encoded."""
        self._send(("build",))
        reply = self._reply()
        if reply[0] != "encoded":
            raise DigestFailed(f"the digest worker answered {reply[0]!r} to build")
        return reply[1]

    def call(self, message: _Request) -> object:
        """A message, and the value the worker answers it with."""
        self._send(message)
        return self._reply()[1]

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self) -> None:
        self.connection.close()  # the worker sees the end of its pipe and exits
        self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1)

    def _send(self, message: _Request) -> None:
        """A message, pickled."""
        try:
            self.connection.send(message)
        except OSError as exc:
            raise self._gone(exc) from None

    def _send_block(self, block: bytes) -> None:
        """A block as it is."""
        try:
            self.connection.send_bytes(block)
        except OSError as exc:
            raise self._gone(exc) from None

    def _gone(self, exc: OSError) -> DigestWorkerLost:
        return DigestWorkerLost(f"the digest worker {self.process.pid} is gone ({exc})")

    def _reply(self) -> _Reply:
        """The worker's answer; DigestFailed for its "error"."""
        try:
            reply = self.connection.recv()
        except (EOFError, OSError) as exc:
            self.process.join(1)
            raise DigestWorkerLost(
                f"the digest worker {self.process.pid} ended "
                f"(exit code {self.process.exitcode}) with a batch in hand ({exc!r})"
            ) from None
        if reply[0] == "error":
            raise DigestFailed(f"in the digest worker: {reply[1]}")
        return reply


# -- the worker process ----------------------------------------------------------------------


def serve(connection: Connection[_Reply, _Request]) -> None:
    """A worker's loop: messages from the node until its end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    gatherer: Gatherer | None = None
    fmt = ""
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        try:
            if message[0] == "batch":
                _, group, layout, rules, fmt = message
                gatherer = None  # a batch broken off by the node is dropped
                gatherer = Gatherer(group, layout, rules)
                connection.send(("ready", None))
            elif message[0] == "chunk":
                blocks = _ChunkBlocks(connection)
                try:
                    if gatherer is None:
                        raise RuntimeError("a chunk outside a batch")
                    lines = gatherer.add_chunk(message[1], message[2], blocks)
                finally:
                    blocks.drain()  # what the digest did not read of the chunk, after a failure
                connection.send(("lines", lines))
            elif message[0] == "build":
                if gatherer is None:
                    raise RuntimeError("a build outside a batch")
                batch, gatherer = gatherer.build(), None
                encoded = EncodedBatch.of(batch, fmt)
                del batch  # freed before the body is sent
                connection.send(("encoded", encoded))
                del encoded
            else:
                raise ValueError(f"unknown message {kind!r}")
        except (EOFError, OSError):
            return
        except Exception:  # noqa: BLE001 - the node raises it for the batch; this worker goes on
            gatherer = None
            try:
                connection.send(("error", traceback.format_exc()))
            except OSError:
                return


class _ChunkBlocks:
    """A chunk's blocks as they come down the pipe, up to the empty one."""

    def __init__(self, connection: Connection[_Reply, _Request]):
        self.connection = connection
        self.ended = False

    def __iter__(self) -> _ChunkBlocks:
        return self

    def __next__(self) -> bytes:
        if self.ended:
            raise StopIteration
        block = self.connection.recv_bytes()
        if not block:
            self.ended = True
            raise StopIteration
        return block

    def drain(self) -> None:
        for _ in self:
            pass
