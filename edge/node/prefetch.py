"""The prefetcher: N NNTP connections kept busy on the chunks of every held range.

Each connection takes the next missing chunk: ranges by priority (the node's: the order it leased
them, which its digest turns follow too; by default the order opened), chunks in article order;
the range loops take their chunks in order. One connection per range (~26k lines/s at a
provider) would keep the digest waiting; N connections on the same range do not. Memory stays
bounded: at most `max_in_flight` chunks are fetched or being fetched and not yet taken, plus,
beyond that cap, as many chunks as there are connections for the range loop that waits for its
next one (so a range that opened late is never starved by the look-ahead of another: only the
ranges digesting, one at a time or one per digest process, wait so).

A lost connection is reopened with backoff and its chunk fetched again, a bounded number of
times: a chunk the server refuses, answers with a broken or oversized reply, or leaves
unanswered past the timeout MAX_REFUSALS times, or that MAX_ATTEMPTS connections in a row fail
on, is unavailable and its range fails (the node gives it back with the reason). A connection
switches group (GROUP) when its next chunk is in another group. With a local spool, chunks found there
are not fetched, and fetched chunks are written there.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter

from edge.node.localspool import LocalSpool
from edge.digest.nntp import NNTPClient, NNTPConnectionError, NNTPError, NNTPProtocolError, NNTPReplyError, NNTPTimeout
from edge.digest.overview import OverviewLayout
from edge.node.retry import Backoff, Stopped, pause

# Unexpected replies to GROUP/OVER (not a lost connection) tolerated per chunk, each on a fresh
# connection, before the chunk is given up as unavailable from this server.
MAX_REFUSALS = 3
# Lost connections (dropped, refused, unreachable) tolerated per chunk, or in a row at start
# before any connection ever opened (then the settings name no server that answers): with the
# backoff, about two minutes.
MAX_ATTEMPTS = 10
# How often waiting threads look at the stop flag when nobody wakes them.
WAKE_INTERVAL = 0.5

EventHook = Callable[..., None]  # (event name, **fields)
# TLS errors that are a connection lost during the handshake, not settings that never work.
_TLS_DROPS = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


class FatalNNTPError(Exception):
    """The Usenet server refuses this node's settings (login, TLS, overview format)."""


class ChunkUnavailable(Exception):
    """A chunk cannot be had from this server (no such group, repeated refusals): its range fails."""


@dataclass(eq=False)
class _Range:
    key: object
    group: str
    spans: list[tuple[int, int]]
    assigned: int = 0  # chunks handed to connections so far (they go in order)
    taken: int = 0  # chunks the range loop has taken so far
    waiting: bool = False  # the range loop waits for chunk `taken`
    results: dict[int, list[bytes]] = field(default_factory=dict)
    error: Exception | None = None
    closed: bool = False
    priority: int = 0  # lower first (the node's lease order)


class Prefetcher:
    def __init__(
        self,
        connect: Callable[[], NNTPClient],
        connections: int,
        max_in_flight: int,
        *,
        stop: threading.Event,
        spool: LocalSpool | None = None,
        on_event: EventHook | None = None,
        backoff_cap: float = 30.0,
    ):
        if connections < 1 or max_in_flight < 1:
            raise ValueError("the prefetcher needs at least one connection and one chunk in flight")
        self._connect = connect
        self.connections = connections
        self.max_in_flight = max_in_flight
        self.stop = stop
        self.spool = spool
        self._on_event = on_event or (lambda name, **fields: None)
        self._backoff_cap = backoff_cap
        self._cond = threading.Condition()
        self._ranges: dict[object, _Range] = {}  # the open ones (fetched by their priority)
        self._in_flight = 0
        self._opened = 0
        self._layout: OverviewLayout | None = None
        self._threads: list[threading.Thread] = []
        # What stops every range: FatalNNTPError, or a bug in a connection thread (never a silent hang).
        self.fatal: Exception | None = None

    # -- for the node ----------------------------------------------------------------------

    def start(self) -> None:
        """Opens the connections (once; later calls do nothing)."""
        with self._cond:
            if self._threads:
                return
            self._threads = [
                threading.Thread(target=self._connection_loop, args=(number,), daemon=True, name=f"nntp-{number}")
                for number in range(self.connections)
            ]
        for thread in self._threads:
            thread.start()

    def source(self, key: object, group: str, priority: int | None = None) -> PrefetchSource:
        """A chunk source (edge.digest.runner.ChunkSource) for one range, fed by every connection; the
        ranges' chunks are fetched lowest priority first (by default: in the order opened)."""
        return PrefetchSource(self, key, group, priority)

    def layout(self) -> OverviewLayout:
        """The server's overview layout, once a connection has read it."""
        self.start()
        with self._cond:
            while self._layout is None:
                self._check_running()
                self._cond.wait(WAKE_INTERVAL)
            return self._layout

    def close_range(self, key: object) -> None:
        """Forget a range's chunks (done, dropped or stopped); its loop, if waiting, stops."""
        with self._cond:
            state = self._ranges.pop(key, None)
            if state is not None and not state.closed:
                state.closed = True
                self._in_flight -= state.assigned - state.taken
                state.results.clear()
            self._cond.notify_all()

    def wake(self) -> None:
        """Makes waiting threads look at the stop flag now."""
        with self._cond:
            self._cond.notify_all()

    # -- for the range loops ---------------------------------------------------------------

    def _open(self, key: object, group: str, spans: list[tuple[int, int]], priority: int | None = None) -> _Range:
        self.start()
        with self._cond:
            if key in self._ranges:
                raise ValueError(f"range {key} is already open")
            self._opened += 1
            state = self._ranges[key] = _Range(
                key, group, list(spans), priority=self._opened if priority is None else priority
            )
            self._cond.notify_all()
            return state

    def _take(self, state: _Range, index: int) -> list[bytes]:
        with self._cond:
            state.waiting = True
            self._cond.notify_all()  # a connection may take it beyond the cap
            try:
                while index not in state.results:
                    if state.error is not None:
                        raise state.error
                    if state.closed:
                        raise Stopped()
                    self._check_running()
                    self._cond.wait(WAKE_INTERVAL)
            finally:
                state.waiting = False
            state.taken += 1
            self._in_flight -= 1
            self._cond.notify_all()  # a slot is free
            return state.results.pop(index)

    def _check_running(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self.stop.is_set():
            raise Stopped()

    # -- the connections -------------------------------------------------------------------

    def _next_task(self) -> tuple[_Range, int] | None:
        """The next chunk to fetch, or None when stopping."""
        with self._cond:
            while not self.stop.is_set() and self.fatal is None:
                task = self._pick()
                if task is not None:
                    return task
                self._cond.wait(WAKE_INTERVAL)
            return None

    def _pick(self) -> tuple[_Range, int] | None:
        if self._in_flight < self.max_in_flight:
            candidates = [s for s in self._ranges.values() if s.assigned < len(s.spans)]
        else:
            # Beyond the cap, chunks are fetched only for a range loop waiting for its next chunk,
            # so that no range starves; it then has as many of its chunks fetched at once as there
            # are connections, not one at a time.
            candidates = [
                s
                for s in self._ranges.values()
                if s.waiting and s.assigned < min(len(s.spans), s.taken + self.connections)
            ]
        if not candidates:
            return None
        state = min(candidates, key=attrgetter("priority"))
        state.assigned += 1
        self._in_flight += 1
        return state, state.assigned - 1

    def _deliver(self, state: _Range, index: int, blocks: list[bytes]) -> None:
        with self._cond:
            if not state.closed:
                state.results[index] = blocks
            self._cond.notify_all()

    def _fail(self, state: _Range, error: Exception) -> None:
        with self._cond:
            state.error = error
            self._cond.notify_all()

    def _connection_loop(self, number: int) -> None:
        connection = _Connection(self, number)
        try:
            connection.open()
            while (task := self._next_task()) is not None:
                state, index = task
                first, last = state.spans[index]
                try:
                    blocks = self._from_spool(state.group, first, last)
                    if blocks is None:
                        blocks = connection.fetch(state, first, last)
                        if blocks is None:
                            continue  # the range was closed meanwhile
                        if self.spool is not None:
                            self.spool.store(state.group, first, last, blocks)
                except ChunkUnavailable as exc:
                    self._fail(state, exc)
                    continue
                self._deliver(state, index, blocks)
        except Stopped:
            pass
        except Exception as exc:  # noqa: BLE001 - FatalNNTPError, or a bug: the range loops must hear of it
            with self._cond:
                self.fatal = self.fatal or exc
                self._cond.notify_all()
        finally:
            connection.close()

    def _from_spool(self, group: str, first: int, last: int) -> list[bytes] | None:
        if self.spool is None:
            return None
        data = self.spool.load(group, first, last)
        return None if data is None else [data]

    def _learn_layout(self, client: NNTPClient) -> None:
        if self._layout is not None:
            return
        try:
            layout = client.overview_layout()
        except ValueError as exc:
            raise FatalNNTPError(f"the Usenet server's overview format cannot be read: {exc}") from None
        with self._cond:
            self._layout = self._layout or layout
            self._cond.notify_all()


class _Connection:
    """One NNTP connection of the prefetcher: (re)opened with backoff, in the right group."""

    def __init__(self, prefetcher: Prefetcher, number: int):
        self.prefetcher = prefetcher
        self.number = number
        self.client: NNTPClient | None = None
        self.group: str | None = None
        self.backoff = Backoff(cap=prefetcher._backoff_cap)

    def open(self) -> None:
        """Connects, retrying until it works or the node stops. MAX_ATTEMPTS failures in a row
        before any connection of the prefetcher ever opened (none learned the overview format)
        are fatal: the settings name no server that answers, and ranges wait for the format."""
        while self.client is None:
            try:
                self._connect()
            except NNTPError as exc:
                if self.backoff.attempts + 1 >= MAX_ATTEMPTS and self.prefetcher._layout is None:
                    raise FatalNNTPError(
                        f"no connection to the Usenet server in {MAX_ATTEMPTS} tries: {exc} "
                        "(check NNTP_HOST, NNTP_PORT, NNTP_SSL)"
                    ) from None
                self._retry_later(None, exc)

    def fetch(self, state: _Range, first: int, last: int) -> list[bytes] | None:
        """The chunk's lines as blocks; None if the range was closed meanwhile. Refusals, broken
        replies and timeouts (the server's doing, and likely again) end after MAX_REFUSALS
        tries, lost connections after MAX_ATTEMPTS: then the chunk is unavailable."""
        refusals = attempts = 0
        while not state.closed:
            try:
                client = self.client if self.client is not None else self._connect()
                if self.group != state.group:
                    self.group = None
                    client.group(state.group)
                    self.group = state.group
                blocks = list(client.over(first, last))
                self.backoff.reset()
                return blocks
            except NNTPReplyError as exc:
                if exc.command.startswith("GROUP") and exc.code == 411:
                    raise ChunkUnavailable(f"the Usenet server has no group {state.group}") from None
                refusals += 1
                if refusals >= MAX_REFUSALS:
                    raise ChunkUnavailable(f"chunk {first}-{last} of {state.group} refused: {exc}") from None
                self._retry_later(state, exc)
            except (NNTPProtocolError, NNTPTimeout) as exc:  # a broken, oversized or stalled reply
                refusals += 1
                if refusals >= MAX_REFUSALS:
                    raise ChunkUnavailable(
                        f"chunk {first}-{last} of {state.group} failed {refusals} times, last: {exc}"
                    ) from None
                self._retry_later(state, exc)
            except NNTPError as exc:  # a lost connection
                attempts += 1
                if attempts >= MAX_ATTEMPTS:
                    raise ChunkUnavailable(
                        f"chunk {first}-{last} of {state.group}: {attempts} connections failed, last: {exc}"
                    ) from None
                self._retry_later(state, exc)
        return None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def _connect(self) -> NNTPClient:
        """A new connection (the one before closed), kept as self.client."""
        self.close()
        self.group = None
        try:
            client = self.prefetcher._connect()
        except NNTPReplyError as exc:
            if exc.command.startswith("AUTHINFO") or exc.code in (480, 481, 482):
                raise FatalNNTPError(
                    f"the Usenet server refuses the login: {exc} (check NNTP_USER, NNTP_PASSWORD)"
                ) from None
            if exc.command == "STARTTLS":
                raise FatalNNTPError(
                    f"the Usenet server refuses STARTTLS: {exc} (check NNTP_STARTTLS, NNTP_SSL and NNTP_PORT)"
                ) from None
            raise
        except NNTPConnectionError as exc:
            if isinstance(exc.__cause__, ssl.SSLCertVerificationError):
                raise FatalNNTPError(f"{exc} (check NNTP_HOST and NNTP_CAFILE)") from None
            if isinstance(exc.__cause__, ssl.SSLError) and not isinstance(exc.__cause__, _TLS_DROPS):
                # The TLS handshake itself failed (a plain port, an old protocol): every try will.
                raise FatalNNTPError(
                    f"TLS with the Usenet server fails: {exc} (check NNTP_SSL, NNTP_STARTTLS and NNTP_PORT)"
                ) from None
            raise
        self.client = client
        try:
            self.prefetcher._learn_layout(client)
        except BaseException:
            self.close()
            raise
        return client

    def _retry_later(self, state: _Range | None, error: Exception) -> None:
        if isinstance(error, NNTPReplyError) and error.code == 480:
            raise FatalNNTPError(f"the Usenet server wants a login: {error} (set NNTP_USER, NNTP_PASSWORD)")
        self.close()
        delay = self.backoff.next_delay()
        self.prefetcher._on_event(
            "nntp_retry",
            connection=self.number,
            range=state.key if state else None,
            reason=str(error),
            delay=round(delay, 2),
        )
        pause(self.prefetcher.stop, delay)


class PrefetchSource:
    """One range's view of the prefetcher (edge.digest.runner.ChunkSource)."""

    def __init__(self, prefetcher: Prefetcher, key: object, group: str, priority: int | None = None):
        self.prefetcher = prefetcher
        self.key = key
        self.group = group
        self.priority = priority

    def chunks(self, spans: list[tuple[int, int]]) -> RangeChunks:
        """The range is opened here, at once: the connections fetch its chunks from now on, while
        its loop may still wait for its turn to digest (a range opened only by its first take
        would leave the connections idle until then, and its loop waiting on its first chunks)."""
        return RangeChunks(self.prefetcher, self.prefetcher._open(self.key, self.group, spans, self.priority))


class RangeChunks:
    """An open range's chunks, in order, as (first, last, blocks); the range is closed (forgotten
    by the prefetcher, its chunks fetched ahead dropped) after the last, on an error, or by
    close(), whether or not any was taken."""

    def __init__(self, prefetcher: Prefetcher, state: _Range):
        self.prefetcher = prefetcher
        self.state = state
        self.index = 0

    def __iter__(self) -> RangeChunks:
        return self

    def __next__(self) -> tuple[int, int, list[bytes]]:
        state = self.state
        if self.index >= len(state.spans):
            self.close()
            raise StopIteration
        first, last = state.spans[self.index]
        try:
            blocks = self.prefetcher._take(state, self.index)
        except BaseException:
            self.close()
            raise
        self.index += 1
        return first, last, blocks

    def close(self) -> None:
        self.prefetcher.close_range(self.state.key)
