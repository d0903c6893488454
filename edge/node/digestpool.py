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

from edge.digest.batch import EncodedBatch
from edge.digest.gather import Gatherer
from edge.digest.overview import OverviewLayout
from edge.digest.rules import RuleSet
from edge.digest.runner import Blocks, batch_chunks_of


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
            encoded = worker.call(("build",))
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

    def __init__(self, context):
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
                self._send(block, raw=True)
        self._send(b"", raw=True)
        self.between_chunks = True
        return self._reply()

    def call(self, message: tuple):
        self._send(message)
        return self._reply()

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self) -> None:
        self.connection.close()  # the worker sees the end of its pipe and exits
        self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1)

    def _send(self, message, raw: bool = False) -> None:
        """A message pickled, or (raw) a block as it is."""
        try:
            if raw:
                self.connection.send_bytes(message)
            else:
                self.connection.send(message)
        except OSError as exc:
            raise DigestWorkerLost(f"the digest worker {self.process.pid} is gone ({exc})") from None

    def _reply(self):
        try:
            kind, value = self.connection.recv()
        except (EOFError, OSError) as exc:
            self.process.join(1)
            raise DigestWorkerLost(
                f"the digest worker {self.process.pid} ended "
                f"(exit code {self.process.exitcode}) with a batch in hand ({exc!r})"
            ) from None
        if kind == "error":
            raise DigestFailed(f"in the digest worker: {value}")
        return value


# -- the worker process ----------------------------------------------------------------------


def serve(connection) -> None:
    """A worker's loop: messages from the node until its end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    gatherer = fmt = None
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        try:
            if kind == "batch":
                _, group, layout, rules, fmt = message
                gatherer = None  # a batch broken off by the node is dropped
                gatherer = Gatherer(group, layout, rules)
                connection.send(("ready", None))
            elif kind == "chunk":
                blocks = _ChunkBlocks(connection)
                try:
                    lines = gatherer.add_chunk(message[1], message[2], blocks)
                finally:
                    blocks.drain()  # what the digest did not read of the chunk, after a failure
                connection.send(("lines", lines))
            elif kind == "build":
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

    def __init__(self, connection):
        self.connection = connection
        self.ended = False

    def __iter__(self):
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
