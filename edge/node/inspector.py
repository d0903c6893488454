"""Inspections on an edge node: a few small articles of a post read, to tell what its headers
cannot (docs/api.md, Inspections; docs/edge.md, Inspections).

One thread, beside the range loops: it leases up to INSPECT_BATCH inspections when it has read
those it held, reads each one's articles with BODY over one NNTP connection of its own (at most
the lease's max_bytes for a post), hands the bodies to edge.inspect.result.inspect_post (which
decodes their yEnc and reads the par2, archive and .nfo headers) and leaves the result to a
second thread, which posts what is waiting together (POST /inspections/results) while the first
reads on: the coordinator's work on results costs more than the reading, and it is paid once a
call rather than once a post. Results waiting are bounded (twice INSPECT_BATCH): past that the
reader waits for the poster.
With nothing to inspect it waits POLL_INTERVAL, and closes its connection meanwhile: a Usenet
account allows few connections, and the range loops hold NNTP_CONNECTIONS of them.

What goes wrong is counted and skipped, never the node's end:

- an article the server lacks (430, 423) is counted as missing; the inspection is still posted;
- a body that goes on past the budget is cut (its connection dropped: it cannot be used
  mid-answer), a message-id that is not ``<...>`` is not sent: both counted in the result's
  ``malformed``, and the inspection goes on with the other articles;
- the server failing (the connection lost or refused, an error status, no answer in time) is
  tried again on a new connection, NNTP_ATTEMPTS times; then every inspection held is given back
  (another node's server may serve it) and the thread waits, longer each time, before leasing again;
- a server that does not know BODY (500, 501: a header-only feed) turns inspections off for the
  run (``inspect_off`` event): what is held is given back, and the ranges go on;
- the coordinator: a result it refuses (another node holds it now, or another reason) is dropped
  and said (its lease lapses), an unreadable answer is counted; a coordinator older than posting
  results together (404) is sent them one by one; network errors, 5xx
  and 429 are retried as for ranges (edge.node.coordinator), and 401/403, an untrusted certificate
  or no answer for COORDINATOR_GIVE_UP stop the node as they do for ranges.

On the node's stop (SIGTERM), :meth:`Inspector.close` gives back every inspection held, and any a
lease call under way brings. What it did is counted (:class:`InspectionCounts`): the node shows
it in its events, its live table and its ``stop`` event.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from edge.digest.nntp import NNTPClient, NNTPError, NNTPReplyError, NNTPReplyTooLong
from edge.inspect.result import inspect_post
from edge.node.coordinator import (
    BadAnswer,
    Conflict,
    Coordinator,
    CoordinatorError,
    InspectionAnswer,
    InspectionLease,
    Refused,
    RetryHook,
)
from edge.node.retry import Backoff, Stopped, pause

# Tries of one article on a new connection before the server is taken as failing for now.
NNTP_ATTEMPTS = 3
# How long a give-back may take (each; the node is stopping or the server failing).
RELEASE_DEADLINE = 2.0
# After the server failed, the wait before leasing again grows from POLL_INTERVAL to this many times it.
FAILURE_WAIT_FACTOR = 10

EventHook = Callable[..., None]


class ServerFailing(Exception):
    """The Usenet server could not serve an article after NNTP_ATTEMPTS tries."""


class NoBodies(Exception):
    """The Usenet server does not know BODY (500, 501): this node inspects nothing more."""


class _LeaseRefused(Exception):
    """The coordinator refused a lease call (4xx): said, and asked again after POLL_INTERVAL."""


class _NoInspections(Exception):
    """The coordinator has no inspections to lease (404): the loop ends."""


@dataclass(frozen=True)
class _Result:
    """A result read, waiting to be posted."""

    lease: InspectionLease
    result: dict[str, Any]
    name: str | None
    malformed: int
    seconds: float


@dataclass
class InspectionCounts:
    """What the inspector did since the node started."""

    leased: int = 0
    inspected: int = 0  # results the coordinator took (stored, or already stored)
    articles_read: int = 0
    articles_missing: int = 0
    bytes_read: int = 0
    malformed: int = 0  # bodies refused or cut, bad message-ids, coordinator answers not readable
    dropped: int = 0  # results refused: another node holds it (409), or another 4xx
    given_back: int = 0
    nntp_errors: int = 0  # attempts the server failed (each tried again, or given back)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def row(self) -> str:
        """The live table's line."""
        return (
            f"inspections: {self.inspected:,} done, {self.articles_read:,} articles read "
            f"({self.bytes_read / 1e6:,.1f} MB), {self.articles_missing:,} missing, {self.malformed:,} malformed, "
            f"{self.dropped:,} dropped, {self.given_back:,} given back"
        )


class Inspector:
    """The inspection loop (see the module's doc). `connect` opens an NNTP connection; `on_event`
    reports (the node's event); `on_fatal` gets what must stop the node (the coordinator refuses
    it, or a bug); `on_idle` is called when it starts waiting with nothing held (at its first
    wait, and then each time it had inspections before)."""

    def __init__(
        self,
        coordinator: Coordinator,
        connect: Callable[[], NNTPClient],
        *,
        stop: threading.Event,
        batch: int = 10,
        poll_interval: float = 30.0,
        on_event: EventHook | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        retry_backoff: Backoff | None = None,
    ):
        self.coordinator = coordinator
        self.connect = connect
        self.stop = stop
        self.batch = batch
        self.poll_interval = poll_interval
        self.on_event: EventHook = on_event or (lambda event, **fields: None)
        self.on_fatal = on_fatal
        self.on_idle = on_idle
        self.counts = InspectionCounts()
        self._retry_backoff = retry_backoff or Backoff()
        self._failure_backoff = Backoff(base=poll_interval, cap=poll_interval * FAILURE_WAIT_FACTOR)
        self._client: NNTPClient | None = None
        self._lock = threading.Lock()
        self._held: dict[int, InspectionLease] = {}
        self._closing = False
        # Cleared while a lease call is under way: close() waits for it (what it brings is given back).
        self._not_leasing = threading.Event()
        self._not_leasing.set()
        # Waiting with nothing held (after a 204, or after the server failed); False until the
        # first wait, so that --exit-when-idle asks once before it exits.
        self._idle = False
        self._thread: threading.Thread | None = None
        # Results read and not yet posted, and how many the poster is posting now.
        self._outbox: list[_Result] = []
        self._posting = 0
        self._reading_done = False
        self._posted = threading.Condition(self._lock)
        self._poster: threading.Thread | None = None
        self._poster_failed: BaseException | None = None
        self._one_by_one = False  # the coordinator is older than POST /inspections/results

    # -- running ---------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing held, and waiting before it leases again."""
        return self._idle

    @property
    def held(self) -> list[int]:
        """The ids of the inspections held now."""
        with self._lock:
            return sorted(self._held)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="inspector", daemon=True)
        self._thread.start()

    def run(self) -> None:
        """The loop, until the node stops; what must stop the node goes to on_fatal."""
        self._poster = threading.Thread(target=self._post_loop, name="inspection-poster", daemon=True)
        self._poster.start()
        try:
            try:
                while not self.stop.is_set():
                    try:
                        leases = self._lease()
                    except _LeaseRefused as exc:
                        self.counts.malformed += 1
                        self.on_event("error", call="inspection_lease", message=f"inspection lease refused: {exc}")
                        leases = []
                    if leases:
                        self._work(leases)
                    else:
                        self._wait(self.poll_interval)
                return
            except _NoInspections as exc:
                self.on_event("error", call="inspection_lease", message=str(exc))
            except NoBodies as exc:
                # A server that reads overviews but no bodies (a header-only feed): ranges go on,
                # inspections are left to nodes whose server has them.
                self.on_event("inspect_off", reason=str(exc))
            self._drain()
            self._become_idle()
        except Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - every way out of a thread must reach the node
            if self.on_fatal is None:
                raise
            self.on_fatal(exc)
        finally:
            self._disconnect()
            # What was read is posted before the loop ends (unless the node stops: close() gives it back).
            with self._lock:
                self._reading_done = True
                self._posted.notify_all()
            self._poster.join()

    def join(self, timeout: float | None = None) -> None:
        """Waits for the loop's thread to end (after the stop event is set)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def close(self, deadline: float = RELEASE_DEADLINE * 2) -> None:
        """Gives back every inspection held (the node stops; the loop stops with the node's stop
        event), and waits up to `deadline` seconds for a lease call under way, whose inspections
        its thread gives back."""
        with self._lock:
            self._closing = True
            held, self._held = list(self._held.values()), {}
        for lease in held:
            self._give_back(lease, "the node is stopping")
        self._not_leasing.wait(deadline)

    def _wait(self, seconds: float) -> None:
        """Waits with nothing held (what was read posted first), the connection closed meanwhile."""
        self._disconnect()
        self._drain()
        self._become_idle()
        pause(self.stop, seconds)

    def _become_idle(self) -> None:
        """Notes that it waits with nothing held, and tells the node when it did not before (only
        then: --exit-when-idle asks the coordinator again on it, and a call more each poll would
        be a call more for nothing)."""
        was_idle, self._idle = self._idle, True
        if not was_idle and self.on_idle is not None:
            self.on_idle()

    # -- leasing ---------------------------------------------------------------------------

    def _lease(self) -> list[InspectionLease]:
        with self._lock:
            if self._closing:
                raise Stopped()
            self._not_leasing.clear()
        leases: list[InspectionLease] = []
        closing = False
        try:
            try:
                leases = self.coordinator.lease_inspections(self.batch, on_retry=self._retry_hook())
            except Conflict as exc:
                self.on_event("idle", reason=f"inspections: {exc}")
            except Refused as exc:
                if exc.status != 404:
                    raise _LeaseRefused(str(exc)) from exc
                # A coordinator older than inspections: said once, and the node inspects nothing.
                raise _NoInspections(
                    f"the coordinator does not lease inspections ({exc}): inspections are off"
                ) from exc
            except BadAnswer as exc:
                self.counts.malformed += 1
                self.on_event("error", call="inspection_lease", message=f"unusable inspection lease answer: {exc}")
        finally:
            with self._lock:
                closing = self._closing
                if not closing:
                    self._held.update((lease.id, lease) for lease in leases)
            try:
                if closing:
                    # Leased while the node stopped: given back here, close() has already run.
                    for lease in leases:
                        self._give_back(lease, "the node is stopping")
            finally:
                self._not_leasing.set()
        if closing:
            raise Stopped()
        if leases:
            self._idle = False
            self.counts.leased += len(leases)
            self.on_event("inspection_lease", count=len(leases), ids=[lease.id for lease in leases])
        return leases

    def _work(self, leases: list[InspectionLease]) -> None:
        for position, lease in enumerate(leases):
            try:
                self._inspect(lease)
            except NoBodies as exc:
                for left in leases[position:]:
                    if self._forget(left.id):
                        self._give_back(left, str(exc))
                raise
            except ServerFailing as exc:
                # The server cannot serve now: what is left goes back for another node (or this
                # one later), and the next lease waits, longer each time it fails again.
                self.on_event("error", inspection=lease.id, message=f"inspections given back: {exc}")
                for left in leases[position:]:
                    if self._forget(left.id):
                        self._give_back(left, str(exc))
                self._wait(self._failure_backoff.next_delay())
                return
        self._failure_backoff.reset()

    # -- one inspection ----------------------------------------------------------------------

    def _inspect(self, lease: InspectionLease) -> None:
        started = time.monotonic()
        bodies: dict[str, bytes] = {}
        problems: Counter[str] = Counter()
        missing = 0
        budget = lease.max_bytes
        for file in lease.files:
            if self.stop.is_set():
                raise Stopped()  # close() gives it back
            if budget <= 0:
                problems["over_budget"] += 1
                continue
            try:
                body = self._body(file.message_id, budget)
            except ValueError:
                problems["bad_message_id"] += 1  # never sent: the server would take its rest as a command
                continue
            except NNTPReplyTooLong:
                problems["body_too_long"] += 1
                continue
            if body is None:
                missing += 1
                continue
            budget -= len(body)
            label, copy = file.name, 1
            while label in bodies:  # two files of one name: each read (inspect_post joins them by yEnc name)
                copy += 1
                label = f"{file.name}#{copy}"
            bodies[label] = body
        try:
            found = inspect_post(bodies, missing=missing)
        except Exception as exc:  # noqa: BLE001 - it never raises; a bug must not end the node
            self.counts.malformed += 1
            self._forget(lease.id)
            self.on_event("error", inspection=lease.id, message=f"inspection failed: {type(exc).__name__}: {exc}")
            return
        for why, times in problems.items():
            found.count(why, times)
        result = found.to_dict()
        malformed = sum(found.malformed.values())
        self.counts.articles_read += found.articles_read
        self.counts.articles_missing += found.articles_missing
        self.counts.bytes_read += found.bytes_read
        self.counts.malformed += malformed
        self._hand_over(_Result(lease, result, found.name, malformed, time.monotonic() - started))

    # -- posting results ---------------------------------------------------------------------

    def _hand_over(self, item: _Result) -> None:
        """Leaves a result to the poster; waits while twice INSPECT_BATCH are waiting already."""
        with self._lock:
            while len(self._outbox) >= 2 * self.batch and self._poster_failed is None and not self.stop.is_set():
                self._posted.wait(0.5)
            self._raise_poster_failure()
            self._outbox.append(item)
            self._posted.notify_all()

    def _drain(self) -> None:
        """Waits until every result read is posted (or the node stops)."""
        with self._lock:
            while (self._outbox or self._posting) and self._poster_failed is None and not self.stop.is_set():
                self._posted.wait(0.5)
            self._raise_poster_failure()

    def _raise_poster_failure(self) -> None:
        """What stopped the poster, raised in the reader's thread (which reports it as its own)."""
        if self._poster_failed is not None:
            raise self._poster_failed

    def _post_loop(self) -> None:
        """The poster: posts what waits, up to INSPECT_BATCH results a call, until the reader is done
        and nothing waits, or the node stops."""
        try:
            while True:
                with self._lock:
                    while not self._outbox and not self._reading_done and not self.stop.is_set():
                        self._posted.wait(0.5)
                    if self.stop.is_set() or not self._outbox:
                        return
                    taken, self._outbox = self._outbox[: self.batch], self._outbox[self.batch :]
                    self._posting = len(taken)
                try:
                    self._post(taken)
                finally:
                    with self._lock:
                        self._posting = 0
                        self._posted.notify_all()
        except Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - the reader reports it (the node stops, or it is raised)
            with self._lock:
                self._poster_failed = exc
                self._posted.notify_all()

    def _post(self, taken: list[_Result]) -> None:
        with self._lock:
            # Given back meanwhile (the node is stopping): not posted.
            items = [item for item in taken if item.lease.id in self._held and not self.stop.is_set()]
        if not items:
            return
        results = [(item.lease.id, item.result) for item in items]
        try:
            if self._one_by_one:
                answers = [self._post_one(inspection_id, result) for inspection_id, result in results]
            else:
                answers = self.coordinator.post_inspections(results, on_retry=self._retry_hook())
        except Refused as exc:
            if exc.status == 404 and not self._one_by_one:
                # A coordinator older than results posted together: one by one from now on.
                self._one_by_one = True
                self.on_event(
                    "error",
                    call="inspection_results",
                    message=f"the coordinator takes inspection results one by one ({exc})",
                )
                self._post(taken)
                return
            answers = [InspectionAnswer(inspection_id, "refused", str(exc)) for inspection_id, _ in results]
        except BadAnswer as exc:
            for item in items:
                self._forget(item.lease.id)
                self.counts.malformed += 1
            self.on_event(
                "error",
                inspections=[item.lease.id for item in items],
                message=f"unusable answer to inspection results: {exc}",
            )
            return
        # (Stopped, or the coordinator lost for good: still held, so that close() gives them back.)
        for item, answer in zip(items, answers):
            self._answered(item, answer)

    def _post_one(self, inspection_id: int, result: dict[str, Any]) -> InspectionAnswer:
        try:
            return InspectionAnswer(
                inspection_id, self.coordinator.post_inspection(inspection_id, result, on_retry=self._retry_hook())
            )
        except Conflict as exc:
            return InspectionAnswer(inspection_id, "not_your_inspection", str(exc))
        except Refused as exc:
            if exc.status == 404 and exc.code != "unknown_inspection":
                raise  # no such call
            return InspectionAnswer(inspection_id, exc.code, str(exc))

    def _answered(self, item: _Result, answer: InspectionAnswer) -> None:
        lease, result = item.lease, item.result
        self._forget(lease.id)
        if answer.status == "not_your_inspection":
            self.counts.dropped += 1
            self.on_event("inspection_dropped", inspection=lease.id, reason=answer.message)
            return
        if not answer.taken:
            # A result the coordinator will never take (or an id it does not know): its lease
            # lapses, and after a few the post is given up there.
            self.counts.dropped += 1
            self.on_event(
                "error", inspection=lease.id, message=f"inspection result refused: {answer.status}: {answer.message}"
            )
            return
        self.counts.inspected += 1
        self.on_event(
            "inspected",
            inspection=lease.id,
            group=lease.group,
            post_key=lease.post_key,
            told_name=item.name,
            files=len(result.get("files") or ()),
            articles_read=result["articles_read"],
            articles_missing=result["articles_missing"],
            bytes=result["bytes_read"],
            malformed=item.malformed,
            password=result["password"],
            status=answer.status,
            seconds=round(item.seconds, 2),
        )

    def _forget(self, inspection_id: int) -> bool:
        """No longer held here; False when it was not (close() gave it back)."""
        with self._lock:
            return self._held.pop(inspection_id, None) is not None

    def _give_back(self, lease: InspectionLease, why: str) -> None:
        try:
            status = self.coordinator.release_inspection(lease.id, deadline=RELEASE_DEADLINE)
        except Conflict as exc:
            self.on_event("inspection_release", inspection=lease.id, note=f"not ours any more ({exc})")
        except CoordinatorError as exc:
            if isinstance(exc, BadAnswer):
                self.counts.malformed += 1
            self.on_event(
                "error",
                inspection=lease.id,
                message=f"could not give the inspection back ({exc}); its lease will lapse",
            )
        else:
            self.counts.given_back += 1
            self.on_event("inspection_release", inspection=lease.id, status=status, reason=why)

    # -- NNTP ------------------------------------------------------------------------------

    def _body(self, message_id: str, limit: int) -> bytes | None:
        """The article's body (None: the server lacks it), on the kept connection or a new one;
        ValueError for a bad message-id, NNTPReplyTooLong past `limit`, ServerFailing when the
        server fails NNTP_ATTEMPTS times in a row."""
        self._retry_backoff.reset()
        for attempt in range(1, NNTP_ATTEMPTS + 1):
            try:
                if self._client is None:
                    self._client = self.connect()
                return self._client.body(message_id, limit)
            except NNTPReplyTooLong:
                self._client = None  # closed by the client: the rest of the reply is unread
                raise
            except NNTPError as exc:
                if isinstance(exc, NNTPReplyError) and exc.code in (500, 501):
                    # "Command not recognized", "syntax error": it never will serve bodies.
                    raise NoBodies(f"the Usenet server does not serve BODY ({exc})") from exc
                self.counts.nntp_errors += 1
                self._disconnect()
                if attempt == NNTP_ATTEMPTS:
                    raise ServerFailing(
                        f"the Usenet server failed {NNTP_ATTEMPTS} times in a row (last: {type(exc).__name__}: {exc})"
                    ) from exc
                delay = self._retry_backoff.next_delay()
                self.on_event(
                    "nntp_retry", call="inspection", reason=f"{type(exc).__name__}: {exc}", delay=round(delay, 2)
                )
                pause(self.stop, delay)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.quit()

    def _retry_hook(self) -> RetryHook:
        def on_retry(call: str, reason: str, delay: float) -> None:
            self.on_event("retry", call=call, reason=reason, delay=round(delay, 2))

        return on_retry
