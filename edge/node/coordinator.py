"""The node API client (docs/api.md): standard library only, HTTPS verified.

The coordinator's certificate and host name are checked against the system's CAs or a CA file;
plain HTTP only when the URL says http:// (which the node's settings allow only with
COORDINATOR_INSECURE=1: the bearer token would go out unencrypted). Network errors, timeouts, 5xx and 429 are retried
with exponential backoff and jitter (a 429 after the Retry-After it gives, with jitter: the
coordinator is behind and says when to come back); a call ends with an answer, a typed error, or
:class:`Unreachable` once nothing has been heard from the coordinator for `give_up` seconds (a
batch is never dropped while the coordinator may still take it). Waits end early when the node
stops (:class:`edge.node.retry.Stopped`), except for the calls made while stopping (release).

Each thread keeps its connection open between calls (HTTP keep-alive): a call costs no TCP and
TLS handshake, round trips over a WAN, and the coordinator no handshake's CPU. One idle for
longer than the coordinator keeps it is not used again; one the coordinator has closed meanwhile
anyway is found out by the next call's first read and that call made again at once on a new one.
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, overload
from urllib.parse import urlsplit

from edge.node.retry import Backoff, pause

API_PREFIX = "/api/v1/seed"
USER_AGENT = "seed-edge/1"
# Every answer but the spool stream is a small JSON object; more means something is wrong.
MAX_ANSWER_BYTES = 1024 * 1024
RETRIED_STATUSES = {408, 429, 500, 502, 503, 504}
# A connection idle longer than this is not used again: the API keeps an idle one 30 s
# (ops/gunicorn.conf.py keepalive).
KEEP_IDLE = 20.0
# How a kept connection the coordinator closed meanwhile shows on the next call.
STALE_CONNECTION = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)
MAX_RETRY_AFTER = 60.0
# The coordinator's bound of a call's body of inspection results (app.api.seed.MAX_RESULT_BODY).
MAX_RESULTS_BODY = 4 * 1024 * 1024
_RESULTS_FRAME = b'{"results": []}'

# A JSON object as the coordinator answers it (docs/api.md), or as the node posts it: its values
# are whatever JSON holds, read by the functions that check it.
JsonObject = dict[str, Any]


class CoordinatorError(Exception):
    """The coordinator could not be used for this call."""


class Unauthorized(CoordinatorError):
    """401/403: the token is unknown, disabled or malformed. The node stops."""


class CertificateRejected(CoordinatorError):
    """The coordinator's TLS certificate is not trusted (wrong CA file, wrong host). The node stops."""


class Unreachable(CoordinatorError):
    """Nothing usable was heard from the coordinator for `give_up` seconds. The node stops."""


class Unavailable(CoordinatorError):
    """A call with its own deadline ran out of attempts (the coordinator may come back)."""


class Conflict(CoordinatorError):
    """409: not this node's lease any more, out of order, batches missing, or the lease cap."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


class Refused(CoordinatorError):
    """Another 4xx (400 malformed, 404 unknown, 413 too large, 422 outside the range): a bug."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


class BadAnswer(CoordinatorError):
    """A success answer whose body cannot be read."""


@dataclass(frozen=True)
class Lease:
    range_id: int
    group: str
    first_id: int
    last_id: int
    next_id: int
    spooled: bool
    chunk_size: int
    batch_chunks: int
    lease_timeout: int
    rules: list[JsonObject]  # the operator's rules (edge.digest.rules.RuleSet.from_data)
    max_body_bytes: int | None = None  # the coordinator's limit on a batch as sent


def parse_lease(data: JsonObject) -> Lease:
    """The lease answer (docs/api.md), checked; BadAnswer says what is wrong."""
    try:
        seed_range = data["range"]
        lease = Lease(
            range_id=seed_range["id"],
            group=seed_range["group"],
            first_id=seed_range["first_id"],
            last_id=seed_range["last_id"],
            next_id=seed_range["next_id"],
            spooled=seed_range.get("spooled", False),
            chunk_size=data["chunk_size"],
            batch_chunks=data["batch_chunks"],
            lease_timeout=data.get("lease_timeout", 900),
            rules=data.get("rules") or [],
            max_body_bytes=data.get("max_body_bytes"),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise BadAnswer(f"lease answer lacks {exc}: {str(data)[:200]}") from None
    numbers = (
        lease.range_id,
        lease.first_id,
        lease.last_id,
        lease.next_id,
        lease.chunk_size,
        lease.batch_chunks,
        lease.lease_timeout,
    )
    if not all(type(n) is int for n in numbers):
        raise BadAnswer(f"lease answer has a non-integer field: {str(data)[:200]}")
    if lease.max_body_bytes is not None and (type(lease.max_body_bytes) is not int or lease.max_body_bytes < 1):
        raise BadAnswer(f"lease answer has a bad max_body_bytes: {str(data)[:200]}")
    if not isinstance(lease.group, str) or not lease.group or not isinstance(lease.rules, list):
        raise BadAnswer(f"lease answer has a bad group or rules: {str(data)[:200]}")
    if (
        not (lease.first_id <= lease.next_id <= lease.last_id + 1)
        or min(lease.chunk_size, lease.batch_chunks, lease.lease_timeout) < 1
    ):
        raise BadAnswer(f"lease answer is inconsistent: {str(data)[:200]}")
    return lease


# What a node takes of an inspection lease, whatever the coordinator says: a hostile or broken
# answer cannot make the node read more than this for one post, nor hold more of them.
MAX_INSPECTION_BYTES = 16 * 1024 * 1024
MAX_INSPECTION_FILES = 16
MAX_INSPECTIONS = 100  # the API's own cap on one lease (docs/api.md)
DEFAULT_INSPECTION_BYTES = 2 * 1024 * 1024  # docs/api.md: 2 MiB, when an answer leaves it out


@dataclass(frozen=True)
class InspectionFile:
    """One article of a post to read: the first of one of its files."""

    name: str
    message_id: str
    bytes: int  # the article's size as the overview said (headers included)


@dataclass(frozen=True)
class InspectionLease:
    """A post to inspect (docs/api.md, Inspections), with the answer's lease_timeout and
    max_bytes (the bytes to read of it at most) on each."""

    id: int
    group: str
    post_key: int
    name: str
    files: tuple[InspectionFile, ...]
    lease_timeout: int
    max_bytes: int


def parse_inspections(data: Any) -> list[InspectionLease]:
    """The inspection lease answer, checked; BadAnswer says what is wrong. A message-id is kept as
    the coordinator sent it: the NNTP client refuses one that is not ``<...>`` (its reader counts it)."""
    if not isinstance(data, dict) or not isinstance(data.get("inspections"), list):
        raise BadAnswer(f"inspection lease answer lacks its list of inspections: {str(data)[:200]}")
    timeout = data.get("lease_timeout", 900)
    max_bytes = data.get("max_bytes", DEFAULT_INSPECTION_BYTES)
    if type(timeout) is not int or timeout < 1 or type(max_bytes) is not int or max_bytes < 1:
        raise BadAnswer(f"inspection lease answer has a bad lease_timeout or max_bytes: {str(data)[:200]}")
    entries = data["inspections"]
    if len(entries) > MAX_INSPECTIONS:
        raise BadAnswer(f"inspection lease answer has {len(entries)} inspections, more than {MAX_INSPECTIONS}")
    leases = []
    for entry in entries:
        try:
            files = tuple(InspectionFile(f["name"], f["message_id"], f.get("bytes", 0)) for f in entry["files"])
            lease = InspectionLease(
                id=entry["id"],
                group=entry["group"],
                post_key=entry["post_key"],
                name=entry.get("name") or "",
                files=files,
                lease_timeout=timeout,
                max_bytes=min(max_bytes, MAX_INSPECTION_BYTES),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise BadAnswer(f"an inspection lacks {exc}: {str(entry)[:200]}") from None
        if type(lease.id) is not int or lease.id < 1 or type(lease.post_key) is not int:
            raise BadAnswer(f"an inspection has a bad id or post_key: {str(entry)[:200]}")
        if not isinstance(lease.group, str) or not isinstance(lease.name, str) or len(files) > MAX_INSPECTION_FILES:
            raise BadAnswer(f"an inspection has a bad group, name or list of files: {str(entry)[:200]}")
        if not all(
            isinstance(f.name, str) and isinstance(f.message_id, str) and type(f.bytes) is int and f.bytes >= 0
            for f in files
        ):
            raise BadAnswer(f"an inspection has a malformed file: {str(entry)[:200]}")
        leases.append(lease)
    return leases


@dataclass(frozen=True)
class InspectionAnswer:
    """What the coordinator did with one result: status "stored" or "already_stored" (taken), or
    the code of what refused it ("not_your_inspection", "malformed_result", ...) and why."""

    id: int
    status: str
    message: str = ""

    @property
    def taken(self) -> bool:
        return self.status in ("stored", "already_stored")


def parse_inspection_answers(data: Any, ids: list[int]) -> list[InspectionAnswer]:
    """The answers to results posted together, one per id in their order; BadAnswer otherwise."""
    entries = data.get("results") if isinstance(data, dict) else None
    if not isinstance(entries, list) or len(entries) != len(ids):
        raise BadAnswer(f"inspection results answer lacks one answer a result: {str(data)[:200]}")
    answers = []
    for inspection_id, entry in zip(ids, entries):
        if (
            not isinstance(entry, dict)
            or entry.get("id") != inspection_id
            or not isinstance(entry.get("status"), str)
            or not entry["status"]
        ):
            raise BadAnswer(f"inspection results answer is not about result {inspection_id}: {str(entry)[:200]}")
        answers.append(InspectionAnswer(inspection_id, entry["status"], str(entry.get("message") or "")))
    return answers


class _Transient(Exception):
    """An attempt failed in a way worth retrying. `busy`: the coordinator answered 429, asking
    the node to come back after `retry_after` seconds (it is there, and behind with its work)."""

    def __init__(self, reason: str, retry_after: float | None = None, busy: bool = False):
        super().__init__(reason)
        self.retry_after = retry_after
        self.busy = busy


RetryHook = Callable[[str, str, float], None]  # (call, reason, delay before the next attempt)
# What an attempt gives: (status, JSON answer), or (connection, response) of a 200 stream.
_Answer = tuple[int, JsonObject] | tuple[http.client.HTTPConnection, http.client.HTTPResponse]


class Coordinator:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        cafile: str | None = None,
        timeout: float = 60.0,
        give_up: float = 3600.0,
        stop: threading.Event | None = None,
        backoff_cap: float = 30.0,
    ):
        parts = urlsplit(url)
        if not parts.hostname:
            raise ValueError(f"the coordinator's URL names no host: {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._base = parts.path.rstrip("/") + API_PREFIX
        self._token = token
        self._timeout = timeout
        self._context = ssl.create_default_context(cafile=cafile) if self._https else None
        self.give_up = give_up
        self.stop = stop or threading.Event()
        self.backoff_cap = backoff_cap
        self.last_contact = time.monotonic()
        self._jitter = random.Random()
        self._kept = threading.local()  # .connection: this thread's open connection and its last use

    # -- the node API ----------------------------------------------------------------------

    def lease(self, on_retry: RetryHook | None = None, skip: Collection[int] = ()) -> Lease | None:
        """A range for this node, or None when there is nothing to do (204); never one in `skip`."""
        body, headers = _json_body({"skip": sorted(skip)}) if skip else (None, None)
        status, data = self._call("POST", "/lease", "lease", body=body, headers=headers, on_retry=on_retry)
        return None if status == 204 else parse_lease(data)

    def post_batch(
        self,
        range_id: int,
        body: bytes,
        content_type: str,
        content_encoding: str | None,
        on_retry: RetryHook | None = None,
    ) -> JsonObject:
        """Post one encoded batch until it is taken (202, or 200 already accepted)."""
        headers = {"Content-Type": content_type}
        if content_encoding:
            headers["Content-Encoding"] = content_encoding
        return self._call(
            "POST", f"/ranges/{range_id}/batches", "batch", body=body, headers=headers, on_retry=on_retry
        )[1]

    def heartbeat(self, range_id: int, deadline: float) -> JsonObject:
        return self._call("POST", f"/ranges/{range_id}/heartbeat", "heartbeat", deadline=deadline)[1]

    def done(self, range_id: int, on_retry: RetryHook | None = None) -> JsonObject:
        return self._call("POST", f"/ranges/{range_id}/done", "done", on_retry=on_retry)[1]

    def release(self, range_id: int, deadline: float, failure: str | None = None) -> JsonObject:
        """Give the range back, saying why when it failed here; made while stopping, so it is not
        cut short by the stop."""
        body, headers = _json_body({"failure": failure}) if failure else (None, None)
        return self._call(
            "POST",
            f"/ranges/{range_id}/release",
            "release",
            body=body,
            headers=headers,
            deadline=deadline,
            stopping=True,
        )[1]

    def lease_inspections(self, count: int, on_retry: RetryHook | None = None) -> list[InspectionLease]:
        """Up to `count` posts to inspect (POST /inspections/lease); [] when there is none (204)."""
        body, headers = _json_body({"max": count})
        status, data = self._call(
            "POST", "/inspections/lease", "inspection_lease", body=body, headers=headers, on_retry=on_retry
        )
        return [] if status == 204 else parse_inspections(data)

    def post_inspection(self, inspection_id: int, result: JsonObject, on_retry: RetryHook | None = None) -> str:
        """Post an inspection's result until the coordinator takes it: "stored", or "already_stored"
        (an earlier answer was lost). Conflict (409) when another node holds it now."""
        body, headers = _json_body(result)
        answer = self._call(
            "POST",
            f"/inspections/{inspection_id}/result",
            "inspection_result",
            body=body,
            headers=headers,
            on_retry=on_retry,
        )[1]
        return _status_of(answer, "inspection result")

    def post_inspections(
        self, results: list[tuple[int, JsonObject]], on_retry: RetryHook | None = None
    ) -> list[InspectionAnswer]:
        """Post several inspections' results, as few calls as the coordinator's body limit allows
        (POST /inspections/results), until it takes them: one answer each, in their order. A
        result too large for a call alone is answered "too_large" without being sent. Refused
        (404) when the coordinator has no such call (older than it)."""
        answers: list[InspectionAnswer] = []
        call: list[bytes] = []
        ids: list[int] = []
        size = len(_RESULTS_FRAME)
        for inspection_id, result in results:
            item = json.dumps({"id": inspection_id, "result": result}).encode()
            if len(_RESULTS_FRAME) + len(item) > MAX_RESULTS_BODY:
                answers.extend(self._post_results(call, ids, on_retry))
                call, ids, size = [], [], len(_RESULTS_FRAME)
                answers.append(
                    InspectionAnswer(
                        inspection_id, "too_large", f"a result of {len(item):,} bytes, over {MAX_RESULTS_BODY:,}"
                    )
                )
                continue
            if size + len(item) + 1 > MAX_RESULTS_BODY:
                answers.extend(self._post_results(call, ids, on_retry))
                call, ids, size = [], [], len(_RESULTS_FRAME)
            call.append(item)
            ids.append(inspection_id)
            size += len(item) + 1
        answers.extend(self._post_results(call, ids, on_retry))
        return answers

    def _post_results(self, items: list[bytes], ids: list[int], on_retry: RetryHook | None) -> list[InspectionAnswer]:
        if not items:
            return []
        body = _RESULTS_FRAME.replace(b"[]", b"[" + b",".join(items) + b"]")
        answer = self._call(
            "POST",
            "/inspections/results",
            "inspection_results",
            body=body,
            headers={"Content-Type": "application/json"},
            on_retry=on_retry,
        )[1]
        return parse_inspection_answers(answer, ids)

    def release_inspection(self, inspection_id: int, deadline: float) -> str:
        """Give an inspection back ("queued", or its state when it is done or failed); made while
        stopping, so it is not cut short by the stop."""
        answer = self._call(
            "POST", f"/inspections/{inspection_id}/release", "inspection_release", deadline=deadline, stopping=True
        )[1]
        return _status_of(answer, "inspection release")

    def status(self, deadline: float | None = None) -> JsonObject:
        """GET /status: what this node may see of the seed (the plan's totals by group among it)."""
        return self._call("GET", "/status", "status", deadline=deadline)[1]

    @contextmanager
    def spool_stream(self, range_id: int) -> Iterator[BinaryIO]:
        """The range's spooled chunks (GET /ranges/<id>/chunks), read as it arrives."""
        connection, response = self._call("GET", f"/ranges/{range_id}/chunks", "chunks", stream=True)
        try:
            yield response
        finally:
            connection.close()

    # -- plumbing --------------------------------------------------------------------------

    @overload
    def _call(
        self,
        method: str,
        path: str,
        call: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        deadline: float | None = None,
        stopping: bool = False,
        on_retry: RetryHook | None = None,
        stream: Literal[False] = False,
    ) -> tuple[int, JsonObject]: ...

    @overload
    def _call(
        self,
        method: str,
        path: str,
        call: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        deadline: float | None = None,
        stopping: bool = False,
        on_retry: RetryHook | None = None,
        stream: Literal[True],
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]: ...

    def _call(
        self,
        method: str,
        path: str,
        call: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        deadline: float | None = None,
        stopping: bool = False,
        on_retry: RetryHook | None = None,
        stream: bool = False,
    ) -> _Answer:
        """(status, JSON answer), or (connection, response) of a 200 stream; retried as above."""
        backoff = Backoff(cap=self.backoff_cap)
        started = time.monotonic()
        timeout = min(self._timeout, deadline) if deadline is not None else self._timeout
        while True:
            try:
                return self._attempt(method, path, body, headers or {}, stream, timeout)
            except _Transient as failure:
                now = time.monotonic()
                if now - self.last_contact > self.give_up:
                    raise Unreachable(
                        f"no answer from the coordinator for {now - self.last_contact:.0f} s (last: {failure})"
                    ) from None
                if failure.busy and failure.retry_after is not None:
                    # Told when to come back: then, give or take half of it (the nodes answered
                    # together do not come back together), however often it was said before.
                    wait = min(failure.retry_after, MAX_RETRY_AFTER)
                    delay = wait + self._jitter.uniform(0, wait / 2)
                else:
                    delay = max(backoff.next_delay(), min(failure.retry_after or 0, MAX_RETRY_AFTER))
                if deadline is not None and now + delay - started > deadline:
                    raise Unavailable(f"{call}: {failure}") from None
                if on_retry is not None:
                    on_retry(call, str(failure), delay)
                if stopping:
                    time.sleep(delay)
                else:
                    pause(self.stop, delay)

    def _attempt(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], stream: bool, timeout: float
    ) -> _Answer:
        kept: http.client.HTTPConnection | None = None
        if not stream:
            kept, last_used = getattr(self._kept, "connection", None) or (None, 0.0)
            self._kept.connection = None  # taken; given back below once its answer is read whole
            if kept is not None and time.monotonic() - last_used > KEEP_IDLE:
                # Idle longer than the coordinator keeps one (or a NAT on the way may have
                # dropped it without a word, which would cost a whole timeout to find out).
                kept.close()
                kept = None
        if kept is not None:
            try:
                return self._exchange(kept, method, path, body, headers, stream, timeout)
            except _Transient as failure:
                if not isinstance(failure.__cause__, STALE_CONNECTION):
                    raise
                # Closed by the coordinator while it was kept: nothing was answered; again, on a new one.
        return self._exchange(self._connect(timeout), method, path, body, headers, stream, timeout)

    def _exchange(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        stream: bool,
        timeout: float,
    ) -> _Answer:
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        keep_open = False
        try:
            connection.request(
                method,
                self._base + path,
                body=body,
                headers={
                    "Authorization": f"Bearer {self._token}",
                    "User-Agent": USER_AGENT,
                    "Accept": "application/json",
                    **headers,
                },
            )
            response = connection.getresponse()
            if stream and response.status == 200:
                self.last_contact = time.monotonic()
                keep_open = True
                return connection, response
            data = response.read(MAX_ANSWER_BYTES + 1)
            # Kept for the next call when the answer was read whole and the server keeps it open.
            keep_open = not stream and not response.will_close and response.isclosed()
        except ssl.SSLCertVerificationError as exc:
            raise CertificateRejected(
                f"the coordinator's TLS certificate is not trusted ({exc.verify_message}); "
                "check COORDINATOR_URL and COORDINATOR_CAFILE"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Transient(_describe(exc)) from exc
        finally:
            if not keep_open:
                connection.close()
        if keep_open:
            self._kept.connection = (connection, time.monotonic())
        return self._answer(response, data)

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _answer(self, response: http.client.HTTPResponse, data: bytes) -> tuple[int, JsonObject]:
        status = response.status
        if status == 429:  # an answer all the same: the coordinator is there
            self.last_contact = time.monotonic()
        if status in RETRIED_STATUSES:
            raise _Transient(
                f"{status} {_error_of(data)[0]}", _retry_after(response.getheader("Retry-After")), busy=status == 429
            )
        self.last_contact = time.monotonic()
        if status == 204:
            return status, {}
        if 200 <= status < 300:
            try:
                answer = json.loads(data) if len(data) <= MAX_ANSWER_BYTES else None
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                raise BadAnswer(f"{status} answer is not a JSON object: {data[:200]!r}")
            return status, answer
        code, message = _error_of(data)
        if status in (401, 403):
            raise Unauthorized(
                f"the coordinator refuses this node's token ({status} {code}: {message}); check NODE_TOKEN"
            )
        if status == 409:
            raise Conflict(code, message)
        raise Refused(status, code, message)  # other 4xx, and 5xx not worth retrying (501, 505)


def _json_body(data: JsonObject) -> tuple[bytes, dict[str, str]]:
    return json.dumps(data).encode(), {"Content-Type": "application/json"}


def _status_of(answer: JsonObject, what: str) -> str:
    status = answer.get("status")
    if not isinstance(status, str) or not status:
        raise BadAnswer(f"{what} answer has no status: {str(answer)[:200]}")
    return status


def _error_of(data: bytes) -> tuple[str, str]:
    """(code, message) of an error answer; whatever it is, something readable."""
    try:
        answer = json.loads(data)
        return str(answer["error"]), str(answer.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return "http_error", data[:200].decode("utf-8", "replace")


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP date: the backoff decides


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, OSError) else f"{type(exc).__name__}: {text}"
