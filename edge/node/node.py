"""The edge node (`edge run`): lease ranges, fetch them with N connections, digest, post batches.

Threads: a control thread leases up to MAX_LEASES ranges (one more while a range's last batch
is posted) and sends heartbeats; one thread per
held range runs the range loop (edge.digest.runner.run_range) fed by the shared prefetcher (or by the
coordinator's spool stream for spooled ranges), digesting each batch itself or, with
DIGEST_PROCESSES, in a worker process (edge.node.digestpool), into a sink that posts it; the main
thread waits for a stop (signal, fatal error, or nothing left to do with --once /
--exit-when-idle), then gives every held range back at its resume point and exits. With INSPECT
on (the default with NNTP settings), an inspector thread (edge.node.inspector) leases inspections
beside the ranges, reads their few articles over an NNTP connection of its own and posts what they
tell; on the way out it gives back every inspection it holds.

What happens on failure: network errors, timeouts and 5xx are retried with backoff (a batch is
never dropped while the coordinator may take it); 409 drops the range (it is not ours any
more); 401/403 stops the node; a batch the coordinator refuses (400/413/422), a group the
Usenet server lacks, a chunk it cannot serve within a bounded number of tries (edge.node.prefetch),
or bad rules fail that range only: it is given back, and the node goes on. Every range still
held is given back on every way out, except when the coordinator refuses the node (exit 3, 5).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import NoReturn, TextIO

from edge.digest.batch import Batch, EncodedBatch
from edge.digest.compiled import IMPL as COMPILED_IMPL
from edge.digest.settings import PLACEHOLDER_NNTP_HOST
from edge.node.config import ConfigError, EdgeConfig, add_arguments, load_config
from edge.node.coordinator import (
    BadAnswer,
    CertificateRejected,
    Conflict,
    Coordinator,
    CoordinatorError,
    Lease,
    Refused,
    RetryHook,
    Unauthorized,
    Unreachable,
)
from edge.node.digestpool import DigestPool, DigestWorkerLost
from edge.node.inspector import Inspector
from edge.node.localspool import LocalSpool
from edge.digest.overview import DEFAULT_LAYOUT
from edge.node.prefetch import WAKE_INTERVAL, ChunkUnavailable, FatalNNTPError, Prefetcher
from edge.node.report import JsonLog, LiveDisplay
from edge.node.retry import Stopped
from edge.digest.rules import RuleError, RuleSet
from edge.digest.runner import Blocks, ChunkSource, RangeHooks, RangeJob, run_range
from edge.node.spoolstream import SpoolStreamSource

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_UNAUTHORIZED = 3
EXIT_UNREACHABLE = 4
EXIT_CERTIFICATE = 5
EXIT_NNTP = 6
EXIT_CODES = {
    EXIT_OK: "finished: --once or --exit-when-idle and nothing left to do",
    EXIT_INTERNAL: "internal error (a bug; the log has the details)",
    EXIT_CONFIG: "bad configuration (environment or flags)",
    EXIT_UNAUTHORIZED: "the coordinator refuses the node token (401/403)",
    EXIT_UNREACHABLE: "no answer from the coordinator for COORDINATOR_GIVE_UP seconds",
    EXIT_CERTIFICATE: "the coordinator's TLS certificate is not trusted",
    EXIT_NNTP: "the Usenet server refuses the settings (login, TLS, overview format)",
    128 + signal.SIGINT: "stopped by SIGINT, held ranges given back",
    128 + signal.SIGTERM: "stopped by SIGTERM, held ranges given back",
}
FATAL_EXIT_CODES = {
    Unauthorized: EXIT_UNAUTHORIZED,
    Unreachable: EXIT_UNREACHABLE,
    CertificateRejected: EXIT_CERTIFICATE,
    FatalNNTPError: EXIT_NNTP,
}
FATAL_ERRORS = tuple(FATAL_EXIT_CODES)
# Why a range alone fails: it is given back and the node goes on with others.
# (A digest worker that died may have died of this range's lines: it is not tried here again.)
RANGE_FAILURES = (Refused, BadAnswer, RuleError, ChunkUnavailable, DigestWorkerLost)
# On stop: how long range loops get to finish what they are doing, and each release call.
STOP_GRACE = 1.5
# The coordinator takes at most 10,000 ids in a lease's `skip`; older failures may be offered again.
MAX_SKIPPED = 10_000
RELEASE_DEADLINE = 2.0
# How often --exit-when-idle asks again while ranges are leased by other nodes (POLL_INTERVAL if shorter).
OTHERS_POLL_INTERVAL = 5.0


@dataclass(eq=False)
class HeldRange:
    """A leased range and what the operator sees of it."""

    lease: Lease
    next_id: int
    state: str = "running"  # the range's state: running, done, lost (409) or failed (given back)
    lines: int = 0  # the overview lines received and digested
    batches: int = 0
    retries: int = 0
    started: float = field(default_factory=time.monotonic)
    # when the last batch was accepted or heartbeat answered
    last_contact: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)  # when the last chunk was received
    thread: threading.Thread | None = None
    order: int = 0  # the order it was leased in: the longest-held range digests first (DigestTurns)
    # Whether every line is digested, so that only its last batch's post and `done` are left.
    digested: bool = False

    @property
    def lines_per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.lines / elapsed if elapsed > 0 else 0.0

    def add_lines(self, lines: int) -> None:
        self.lines += lines

    def row(self) -> str:
        span = self.lease.last_id - self.lease.next_id + 1
        share = 100.0 * (self.next_id - self.lease.next_id) / span if span > 0 else 100.0
        return (
            f"{self.lease.range_id:>7} {self.lease.group[:36]:<36} {share:5.1f}% {self.lines:>12,} "
            f"{self.lines_per_second:>10,.0f} {self.batches:>7} {self.retries:>7}"
        )


TABLE_HEADER = f"{'range':>7} {'group':<36} {'done':>6} {'articles':>12} {'lines/s':>10} {'batches':>7} {'retries':>7}"


class CoordinatorSink:
    """The range loop's sink: each batch encoded, gzip'd and posted until the coordinator takes it.

    prepare() encodes a batch on the range's thread, so that only its body (a few MB) waits
    while the batch before is posted, not the batch (some tens of MB in objects)."""

    def __init__(self, node: Node, held: HeldRange):
        self.node = node
        self.held = held

    def prepare(self, batch: Batch | EncodedBatch) -> EncodedBatch:
        """The batch encoded (by a digest process already, or here), within the coordinator's limit."""
        encoded = batch if isinstance(batch, EncodedBatch) else EncodedBatch.of(batch, self.node.config.batch_format)
        del batch
        body = encoded.body
        limit = self.held.lease.max_body_bytes
        if limit is not None and len(body) > limit:
            # The coordinator would answer 413 and close before reading it: a send that fails
            # the same way every time. The range fails here instead of being retried for ever.
            raise Refused(
                413, "batch_too_large", f"batch of {len(body)} bytes is over the coordinator's {limit} byte limit"
            )
        return encoded

    def submit(self, batch: Batch | EncodedBatch) -> None:
        held, node = self.held, self.node
        encoded = self.prepare(batch)
        del batch
        answer = node.coordinator.post_batch(
            held.lease.range_id,
            encoded.body,
            encoded.content_type,
            encoded.encoding,
            on_retry=node.retry_hook(held.lease.range_id),
        )
        held.last_contact = time.monotonic()
        held.batches += 1
        held.next_id = encoded.last + 1
        if node.spool is not None:
            node.spool.discard(encoded.group, encoded.first, encoded.last)
        node.event(
            "batch",
            range=held.lease.range_id,
            first=encoded.first,
            last=encoded.last,
            lines=encoded.lines,
            missing=encoded.missing,
            bytes=len(encoded.body),
            status=answer.get("status"),
            lines_per_second=round(held.lines_per_second),
        )


class _HeldRangeHooks(RangeHooks):
    """The node's hooks on a held range's loop: it stops with the node or once the range is no
    longer running here, digests in its turn (DigestTurns), counts the lines digested, and lets
    the control loop lease the next range once its last batch is digested."""

    def __init__(self, node: Node, held: HeldRange):
        self.node = node
        self.held = held

    def should_stop(self) -> bool:
        return self.node.stop.is_set() or self.held.state != "running"

    def digest_slot(self) -> AbstractContextManager[None]:
        return self.node._turns.turn(self.held.order)

    def on_chunk(self, lines: int) -> None:
        self.held.add_lines(lines)

    def on_digested(self) -> None:
        self.node._digested(self.held)


class _TrackedSource:
    """Notes when a range last received a chunk, for the heartbeat's "still working" (its lines
    are counted by the digest: the hooks' on_chunk)."""

    def __init__(self, source: ChunkSource, held: HeldRange):
        self.source = source
        self.held = held

    def chunks(self, spans: list[tuple[int, int]]) -> _TrackedChunks:
        # Asked for at once, not when first iterated: a prefetching source opens the range now.
        return _TrackedChunks(self.source.chunks(spans), self.held)


class _TrackedChunks:
    def __init__(self, chunks: Iterable[tuple[int, int, Blocks]], held: HeldRange):
        self.chunks = iter(chunks)
        self.held = held

    def __iter__(self) -> _TrackedChunks:
        return self

    def __next__(self) -> tuple[int, int, Blocks]:
        chunk = next(self.chunks)
        self.held.last_activity = time.monotonic()
        return chunk

    def close(self) -> None:
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()


class DigestTurns:
    """`slots` ranges digest at a time (one in the node's process: the GIL allows no more; one
    per digest worker process), which bounds memory too; of the ranges waiting for a turn the
    one held longest goes first: the prefetcher fetches for ranges in lease order, so the ranges
    digesting are those whose chunks are fetched, and each digests batch after batch while its
    batches are posted (run_range's post_ahead).

    A range counts as waiting from its lease (expect()) to its first turn: ranges leased together
    start their threads at once, and one leased later must not take the first turn because its
    thread got here first, then wait on chunks fetched for the others (it did: the first batch of
    a run came a second late, the data center idle meanwhile)."""

    def __init__(self, stop: threading.Event, slots: int = 1):
        if slots < 1:
            raise ValueError("digest turns need at least one slot")
        self.stop = stop
        self.slots = slots
        self._cond = threading.Condition()
        self._busy = 0
        self._waiting: set[int] = set()

    def expect(self, order: int) -> None:
        """A range just leased: it waits for its first turn from now on."""
        with self._cond:
            self._waiting.add(order)

    def forget(self, order: int) -> None:
        """A range that ended (maybe before its first turn): the others need not wait for it."""
        with self._cond:
            self._waiting.discard(order)
            self._cond.notify_all()

    @contextmanager
    def turn(self, order: int) -> Iterator[None]:
        with self._cond:
            self._waiting.add(order)
            try:
                while self._busy >= self.slots or min(self._waiting) != order:
                    if self.stop.is_set():
                        raise Stopped()
                    self._cond.wait(WAKE_INTERVAL)
            finally:
                self._waiting.discard(order)
                self._cond.notify_all()  # the next in line may go, should this one stop
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()


class Node:
    def __init__(
        self,
        config: EdgeConfig,
        *,
        once: bool = False,
        exit_when_idle: bool = False,
        live: bool = False,
        stream: TextIO | None = None,
    ):
        self.config = config
        self.once = once
        self.exit_when_idle = exit_when_idle
        self.stop = threading.Event()
        self.coordinator = Coordinator(
            config.coordinator_url,
            config.node_token,
            cafile=config.coordinator_cafile,
            timeout=config.coordinator_timeout,
            give_up=config.coordinator_give_up,
            stop=self.stop,
        )
        self.spool = LocalSpool(config.spool_dir, config.spool_max_mb * 1024 * 1024) if config.spool_dir else None
        self.prefetcher = Prefetcher(
            config.nntp.connect,
            config.nntp_connections,
            config.chunks_in_flight,
            stop=self.stop,
            spool=self.spool,
            on_event=self.event,
        )
        self.held: dict[int, HeldRange] = {}
        # Ranges given back after failing here, not worked on again (named in `skip` on leases):
        # the latest MAX_SKIPPED, in the order they failed.
        self.failed: dict[int, None] = {}
        # Without NNTP_HOST only spooled ranges can be fetched: the others are given back as soon as
        # they are leased (not as failed: another node can fetch them) and named in `skip` too.
        self.no_server = config.nntp.host == PLACEHOLDER_NNTP_HOST
        self.unfetchable: dict[int, None] = {}
        self.leased = 0
        # Set under _lock once the node gives its ranges back: a lease granted after that is
        # given back by the control thread at once instead of being started.
        self._closing = False
        self._control: threading.Thread | None = None
        self.exit_code: int | None = None
        self._lock = threading.Lock()
        self._changed = threading.Event()  # a range ended: the control loop may lease again
        # The coordinator's last answer to a lease was 204: it is asked again after POLL_INTERVAL,
        # however many of the node's ranges end meanwhile (their ends bring it no new work), or
        # at once when the node has no range left (--exit-when-idle asks before it exits).
        self._nothing_to_do = False
        # --exit-when-idle with nothing to lease while the inspector has inspections: asked again
        # as soon as it has none (_inspector_idle).
        self._waiting_for_inspections = False
        # --exit-when-idle with nothing to lease while other nodes hold ranges: asked again
        # every OTHERS_POLL_INTERVAL at most, so that the node exits soon after the last is done.
        self._waiting_for_others = False
        # Batches digested by worker processes (DIGEST_PROCESSES), else on the ranges' threads.
        self.digest_processes = config.digest_processes_or_default
        self.digest_pool = DigestPool(self.digest_processes, config.batch_format) if self.digest_processes else None
        self._turns = DigestTurns(self.stop, max(1, self.digest_processes))
        stream = stream or sys.stderr
        self.reporter = LiveDisplay(stream, self._rows) if live else JsonLog(stream)
        # Inspections, beside the ranges: not with --once (one range, then exit), nor with INSPECT
        # off or without a Usenet server to read them from (config.inspecting).
        self.inspector = (
            Inspector(
                self.coordinator,
                replace(config.nntp, compress=False).connect,
                stop=self.stop,
                batch=config.inspect_batch,
                poll_interval=config.poll_interval,
                on_event=self.event,
                on_fatal=self._fail_node,
                on_idle=self._inspector_idle if exit_when_idle else None,
            )
            if config.inspecting and not once
            else None
        )

    # -- running and stopping --------------------------------------------------------------

    def run(self) -> int:
        """Runs until stopped; returns the exit code."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        config = self.config
        self.event(
            "start",
            coordinator=config.coordinator_url,
            nntp=config.nntp.address,
            connections=config.nntp_connections,
            max_leases=config.max_leases,
            digest_processes=self.digest_processes,
            spool_dir=config.spool_dir,
            impl=COMPILED_IMPL,
            inspect=self.inspector is not None,
            warning="; ".join(
                config.warnings
                + (
                    ("NNTP_HOST is not set: only spooled ranges are taken, others are given back",)
                    if self.no_server
                    else ()
                )
            )
            or None,
        )
        if self.digest_pool is not None:
            self.digest_pool.start()  # while the first lease is asked for
        self._control = threading.Thread(target=self._control_loop, name="control", daemon=True)
        self._control.start()
        if self.inspector is not None:
            self.inspector.start()
        while not self.stop.wait(WAKE_INTERVAL):
            pass
        code = self.exit_code
        assert code is not None, "finish() sets the exit code before it sets the stop"
        self._shut_down(code)
        return code

    def finish(self, code: int, **why: object) -> None:
        """Stops the node with this exit code (the first reason to stop wins)."""
        with self._lock:
            if self.exit_code is None:
                self.exit_code = code
                if why:
                    self.event(
                        "error" if code not in (EXIT_OK, 128 + signal.SIGINT, 128 + signal.SIGTERM) else "stopping",
                        exit_code=code,
                        **why,
                    )
        self.stop.set()
        self.prefetcher.wake()
        self._changed.set()  # the control loop ends now, not after its wait: _shut_down joins it

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Asked to stop a second time, the node waits no more, not even for a post under way.
        if self.stop.is_set():
            _exit_now(128 + signum)
        self.finish(128 + signum, reason=signal.Signals(signum).name)

    def _shut_down(self, code: int) -> None:
        with self._lock:
            self._closing = True
        # A lease call under way when the node stopped: its range is given back by the control
        # thread (see _start), which is waited for, as long as a give-back may take.
        if self._control is not None:
            self._control.join(STOP_GRACE + RELEASE_DEADLINE)
        deadline = time.monotonic() + STOP_GRACE
        for held in list(self.held.values()):
            if held.thread is not None:
                held.thread.join(max(0.0, deadline - time.monotonic()))
        # Give the ranges back unless the coordinator refuses this node's token or certificate: it
        # would refuse the give-back too.
        if code not in (EXIT_UNAUTHORIZED, EXIT_CERTIFICATE):
            for held in self._running():
                self._give_back(held)
            if self.inspector is not None:
                self.inspector.close()
        if self.digest_pool is not None:
            self.digest_pool.close()
        self.event(
            "stop",
            exit_code=code,
            meaning=EXIT_CODES.get(code, ""),
            inspections=self.inspector.counts.as_dict() if self.inspector is not None else None,
        )
        self.reporter.close()

    def _give_back(self, held: HeldRange, failure: str | None = None) -> None:
        range_id = held.lease.range_id
        try:
            answer = self.coordinator.release(range_id, deadline=RELEASE_DEADLINE, failure=failure)
        except Conflict as exc:
            self.event("release", range=range_id, note=f"not ours any more ({exc})")
        except CoordinatorError as exc:
            self.event("error", range=range_id, message=f"could not give the range back ({exc}); its lease will expire")
        else:
            self.event("release", range=range_id, next_id=answer.get("next_id"))

    # -- the control loop: leases and heartbeats -------------------------------------------

    def _control_loop(self) -> None:
        try:
            next_lease = 0.0
            while not self.stop.is_set():
                self._heartbeats()
                if time.monotonic() >= next_lease and self._may_lease():
                    if self._lease_one():
                        continue  # Try to lease another range at once: one may be waiting.
                    interval = self.config.poll_interval
                    if self._waiting_for_others:
                        interval = min(interval, OTHERS_POLL_INTERVAL)
                    next_lease = time.monotonic() + interval
                if self.once and self.leased and not self._running():
                    self.finish(EXIT_OK)
                    return
                self._changed.wait(WAKE_INTERVAL * 2)
                if self._changed.is_set():
                    self._changed.clear()
                    if not self._nothing_to_do or not self._running():
                        next_lease = 0.0
        except Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - every way out of a thread must stop the node
            self._fail_node(exc)

    def _may_lease(self) -> bool:
        """Fewer than MAX_LEASES ranges with lines still to digest, and at most one more held: a
        range whose last batch is being posted makes room for the next, so its chunks are
        fetched meanwhile and the digest has them when its turn comes (else it waits for the
        post, the `done` and the lease, then for its first chunks)."""
        if self.once and self.leased:
            return False
        running = self._running()
        digesting = sum(1 for held in running if not held.digested)
        return digesting < self.config.max_leases and len(running) <= self.config.max_leases

    def _digested(self, held: HeldRange) -> None:
        held.digested = True
        self._changed.set()  # the control loop may lease the next range now

    def _running(self) -> list[HeldRange]:
        # list() takes a snapshot, because other threads add and remove ranges meanwhile.
        return [h for h in list(self.held.values()) if h.state == "running"]

    def _lease_one(self) -> bool:
        """Leases a range and starts it; False when there is nothing to start now."""
        self._nothing_to_do = self._waiting_for_others = False
        try:
            with self._lock:  # range threads add to it
                skip = (list(self.unfetchable) + list(self.failed))[-MAX_SKIPPED:]
            lease = self.coordinator.lease(on_retry=self.retry_hook(None), skip=skip)
        except Conflict as exc:
            # A 409 here is the lease cap: ranges held by an earlier run of this node still count
            # until their leases expire.
            self.event("idle", reason=str(exc))
            return False
        except BadAnswer as exc:
            self.event("error", message=f"unusable lease answer: {exc}")
            return False
        self._nothing_to_do = lease is None
        if lease is None:
            if (self.exit_when_idle or self.once) and not self._running():
                # Inspections under way (or not asked for yet) are work too: the inspector tells
                # the control loop when it waits with none held (_inspector_idle), and the node
                # asks again then. (Set before the look, so that a change right after it is not missed.)
                self._waiting_for_inspections = True
                if self.inspector is not None and not self.inspector.idle:
                    self.event("idle", reason="no range to lease; waiting for the inspections under way")
                    return False
                self._waiting_for_inspections = False
                leased = self._leased_elsewhere()
                if not leased:
                    self.finish(EXIT_OK, reason="nothing to do")
                    return False
                # Ranges of another node (maybe a dead one) may come back when their leases lapse.
                self._waiting_for_others = True
                self.event("idle", reason=f"ranges still leased by other nodes ({leased}): waiting for them")
            else:
                self.event("idle", reason="the coordinator has nothing to do")
            return False
        if lease.range_id in self.held:  # this node's lapsed lease, granted again: its loop goes on
            return True
        # A coordinator that ignored `skip` offers a range that failed here: it is given back, so
        # that the node never loops on it.
        if lease.range_id in self.failed:
            self.event("failed", range=lease.range_id, reason="failed here before: given back")
            self._give_back(HeldRange(lease, lease.next_id), failure="failed on this node before")
            return False
        if self.no_server and not lease.spooled:
            self.event(
                "skipped",
                range=lease.range_id,
                reason="NNTP_HOST is not set: only spooled ranges can be fetched; given back",
            )
            with self._lock:
                self.unfetchable[lease.range_id] = None
                while len(self.unfetchable) > MAX_SKIPPED:
                    del self.unfetchable[next(iter(self.unfetchable))]
            self._give_back(HeldRange(lease, lease.next_id))
            return True  # another range (a spooled one) may be waiting
        return self._start(lease)

    def _inspector_idle(self) -> None:
        """The inspector waits with nothing held: a control loop that waits for it asks again now."""
        if self._waiting_for_inspections:
            self._changed.set()

    def _leased_elsewhere(self) -> int:
        """How many ranges of the plan are leased while this node holds none (GET /status: the
        plan's totals by group); 0 when the coordinator cannot tell."""
        try:
            answer = self.coordinator.status(deadline=RELEASE_DEADLINE * 5)
            return sum(int(group.get("leased") or 0) for group in answer.get("groups", []))
        except (CoordinatorError, TypeError, ValueError, AttributeError) as exc:
            self.event(
                "error",
                message=f"the coordinator's status cannot be read ({exc}): "
                "ranges leased by other nodes are not waited for",
            )
            return 0

    def _start(self, lease: Lease) -> bool:
        """Starts the range's thread; a range leased while the node stops is given back instead."""
        held = HeldRange(lease, lease.next_id, order=self.leased)
        held.thread = threading.Thread(target=self._work, args=(held,), name=f"range-{lease.range_id}", daemon=True)
        self.event(
            "lease",
            range=lease.range_id,
            group=lease.group,
            first_id=lease.first_id,
            last_id=lease.last_id,
            next_id=lease.next_id,
            spooled=lease.spooled,
        )
        with self._lock:
            closing = self._closing or self.stop.is_set()
            if not closing:
                self.held[lease.range_id] = held
                self.leased += 1
        if closing:
            self._give_back(held)
            return False
        if self.spool is not None and lease.next_id > lease.first_id:
            self.spool.discard(lease.group, lease.first_id, lease.next_id - 1)
        self._turns.expect(held.order)  # its thread forgets it when it ends
        try:
            held.thread.start()
        except BaseException:
            self._turns.forget(held.order)
            raise
        return True

    def _heartbeats(self) -> None:
        now = time.monotonic()
        for held in self._running():
            interval = held.lease.lease_timeout / 3
            # Only for a range that received something since: a stuck one lets its lease lapse.
            if now - held.last_contact < interval or held.last_activity <= held.last_contact:
                continue
            range_id = held.lease.range_id
            try:
                self.coordinator.heartbeat(range_id, deadline=interval)
            except Conflict as exc:
                self._drop(held, exc)
            except FATAL_ERRORS:
                raise
            except CoordinatorError as exc:  # the lease may lapse; the next batch will tell
                self.event("retry", range=range_id, call="heartbeat", reason=str(exc))
            else:
                held.last_contact = time.monotonic()

    def _drop(self, held: HeldRange, why: Exception) -> None:
        held.state = "lost"
        self.prefetcher.close_range(held.lease.range_id)
        self.event("dropped", range=held.lease.range_id, reason=str(why))

    # -- one range -------------------------------------------------------------------------

    def _work(self, held: HeldRange) -> None:
        lease = held.lease
        range_id = lease.range_id
        try:
            rules = RuleSet.from_data(lease.rules)
            source: ChunkSource
            if lease.spooled:
                source = SpoolStreamSource(
                    self.coordinator,
                    range_id,
                    lambda: self.prefetcher.source(range_id, lease.group, held.order),
                    self.event,
                )
                layout = DEFAULT_LAYOUT  # the spool holds the lines as the data center's server sent them
            else:
                source = self.prefetcher.source(range_id, lease.group, held.order)
                layout = self.prefetcher.layout()
            job = RangeJob(
                group=lease.group,
                next_id=lease.next_id,
                last_id=lease.last_id,
                chunk_size=lease.chunk_size,
                batch_chunks=lease.batch_chunks,
                rules=rules,
                layout=layout,
            )
            state = run_range(
                job,
                _TrackedSource(source, held),
                CoordinatorSink(self, held),
                _HeldRangeHooks(self, held),
                post_ahead=True,
                digester=self.digest_pool.digest if self.digest_pool is not None else None,
            )
            if state.done:
                self.coordinator.done(range_id, on_retry=self.retry_hook(range_id))
                held.state = "done"
                if self.spool is not None:
                    self.spool.discard(lease.group, lease.first_id, lease.last_id)
                self.event(
                    "done",
                    range=range_id,
                    lines=held.lines,
                    batches=held.batches,
                    seconds=round(time.monotonic() - held.started, 1),
                    lines_per_second=round(held.lines_per_second),
                )
        except Stopped:
            pass
        except Conflict as exc:
            if not self.stop.is_set():
                self._drop(held, exc)
        except RANGE_FAILURES as exc:
            held.state = "failed"
            with self._lock:
                self.failed[range_id] = None
                while len(self.failed) > MAX_SKIPPED:
                    del self.failed[next(iter(self.failed))]
            reason = f"{type(exc).__name__}: {exc}"
            self.event("failed", range=range_id, reason=reason)
            self._give_back(held, failure=reason)
        except BaseException as exc:  # noqa: BLE001 - every way out of a thread must stop the node
            self._fail_node(exc, range_id)
        finally:
            self._turns.forget(held.order)
            self.prefetcher.close_range(range_id)
            with self._lock:
                if held.state != "running":
                    self.held.pop(range_id, None)
            self._changed.set()

    def _fail_node(self, exc: BaseException, range_id: int | None = None) -> None:
        for kind, code in FATAL_EXIT_CODES.items():
            if isinstance(exc, kind):
                self.finish(code, range=range_id, message=str(exc))
                return
        self.finish(
            EXIT_INTERNAL,
            range=range_id,
            message=f"internal error: {type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )

    # -- what the operator sees ------------------------------------------------------------

    def event(self, name: str, **fields: object) -> None:
        range_id = fields.get("range")
        held = self.held.get(range_id) if isinstance(range_id, int) else None
        if name in ("retry", "nntp_retry") and held is not None:
            held.retries += 1
        self.reporter.event(name, **{key: value for key, value in fields.items() if value is not None})

    def retry_hook(self, range_id: int | None) -> RetryHook:
        def on_retry(call: str, reason: str, delay: float) -> None:
            self.event("retry", range=range_id, call=call, reason=reason, delay=round(delay, 2))

        return on_retry

    def _rows(self) -> list[str]:
        held = sorted(self._running(), key=lambda h: h.lease.range_id)
        rows = [TABLE_HEADER] + [h.row() for h in held] if held else ["(no range held)"]
        if self.inspector is not None:
            rows.append(self.inspector.counts.row())
        return rows


# -- `edge run` ------------------------------------------------------------------------------


def add_run_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "run",
        help="run the edge node: lease ranges, fetch and digest them, post batches",
        description="Runs the edge node. Needs COORDINATOR_URL and NODE_TOKEN in the environment; every other "
        "setting has a default and can be given as an environment variable or a flag.",
        epilog="exit codes:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.add_argument("--once", action="store_true", help="work on one range, then exit")
    parser.add_argument(
        "--exit-when-idle", action="store_true", help="exit when the coordinator has nothing left to do"
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "live", "json"),
        default="auto",
        help="live table (default on a terminal) or one JSON line per event",
    )
    parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    try:
        config = load_config(vars(args))
    except ConfigError as exc:
        print(f"edge run: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    live = args.progress == "live" or (args.progress == "auto" and sys.stderr.isatty())
    try:
        code = Node(config, once=args.once, exit_when_idle=args.exit_when_idle, live=live).run()
    except Exception as exc:  # noqa: BLE001 - a clear line, not a traceback, for the operator
        print(f"edge run: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    # The node stopped cleanly (its ranges given back, its last event written).
    _exit_now(code)


def _exit_now(code: int) -> NoReturn:
    """End the process at once: no waiting for a post under way (a pool thread the interpreter
    would join), and no freeing of the digest's caches object by object (a few hundred thousand
    of them: about a third of a second of CPU after a run's last batch, seen with a CPU sampler
    beside bench/e2e.py)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
