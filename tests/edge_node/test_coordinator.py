"""The coordinator client against a scripted HTTP server: what is retried, what is not, and how
each answer is told apart; and the backoff it waits with."""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from edge.node.coordinator import (
    KEEP_IDLE,
    BadAnswer,
    Conflict,
    Coordinator,
    Refused,
    Unauthorized,
    Unavailable,
    Unreachable,
    parse_lease,
)
from edge.node.retry import Backoff, Stopped
from tests.fixtures.ports import free_port
from tests.fixtures.waiting import wait_until

LEASE = {
    "range": {
        "id": 3,
        "group": "alt.binaries.test",
        "first_id": 2**32,
        "last_id": 2**32 + 99,
        "next_id": 2**32 + 10,
        "spooled": False,
    },
    "chunk_size": 20,
    "batch_chunks": 2,
    "lease_timeout": 900,
    "rules": [],
}


class Scripted:
    """Answers requests in order from a script of (status, body), (status, body, headers) or
    "drop"; the last one repeats."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append((self.path, dict(self.headers), body))
                answer = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                if answer == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                status, payload, *more = answer
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/prefix"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def scripted():
    servers = []

    def make(*script):
        server = Scripted(script)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def client(url, **options) -> Coordinator:
    return Coordinator(url, "seed_token", backoff_cap=0.05, **options)


def test_5xx_and_dropped_connections_are_retried_until_the_batch_is_taken(scripted):
    server = scripted(
        "drop",
        (503, {"error": "unavailable", "message": "later"}),
        (502, b"<html>bad gateway"),
        (202, {"status": "accepted", "next_id": 5}),
    )
    retries = []
    answer = client(server.url).post_batch(
        3,
        b"\x1f\x8b body",
        "application/msgpack",
        "gzip",
        on_retry=lambda call, reason, delay: retries.append((call, reason)),
    )
    assert answer == {"status": "accepted", "next_id": 5}
    assert [call for call, _ in retries] == ["batch"] * 3
    assert "503 unavailable" in retries[1][1] and "502 http_error" in retries[2][1]
    path, headers, body = server.requests[-1]
    assert path == "/prefix/api/v1/seed/ranges/3/batches" and body == b"\x1f\x8b body"
    assert headers["Authorization"] == "Bearer seed_token"
    assert (headers["Content-Type"], headers["Content-Encoding"]) == ("application/msgpack", "gzip")


def test_a_busy_coordinator_is_come_back_to_when_it_says_and_is_not_given_up_on(scripted):
    """429 busy (the data center behind, docs/api.md): the node waits what Retry-After says, up to
    half again at random, however often it is said (not the backoff, whose cap here is 0.05 s);
    and an answer is contact: a node that gives up after 0.1 s of silence waits through three."""
    busy = (429, {"error": "busy", "message": "behind"}, {"Retry-After": "0.2"})
    server = scripted(busy, busy, busy, (202, {"status": "accepted", "next_id": 5}))
    waits = []
    answer = client(server.url, give_up=0.1).post_batch(
        3,
        b"body",
        "application/msgpack",
        "gzip",
        on_retry=lambda call, reason, delay: waits.append((call, reason, delay)),
    )
    assert answer == {"status": "accepted", "next_id": 5}
    assert [(call, reason) for call, reason, _ in waits] == [("batch", "429 busy")] * 3
    assert all(0.2 <= delay <= 0.3 for _, _, delay in waits), waits
    assert len(server.requests) == 4


def test_answers_that_retrying_would_not_change(scripted):
    coordinator = client(scripted((401, {"error": "unauthorized", "message": "unknown token"})).url)
    with pytest.raises(Unauthorized, match="check NODE_TOKEN"):
        coordinator.lease()
    with pytest.raises(Conflict) as conflict:
        client(scripted((409, {"error": "not_your_lease", "message": "x"})).url).heartbeat(3, deadline=5)
    assert conflict.value.code == "not_your_lease"
    with pytest.raises(Refused) as refused:
        client(scripted((422, {"error": "outside_range", "message": "x"})).url).post_batch(3, b"", "a", None)
    assert (refused.value.status, refused.value.code) == (422, "outside_range")
    with pytest.raises(BadAnswer):
        client(scripted((200, b"<html>")).url).done(3)


def test_lease_answers(scripted):
    assert client(scripted((204, b"")).url).lease() is None
    lease = client(scripted((200, LEASE)).url).lease()
    assert (lease.range_id, lease.next_id, lease.chunk_size, lease.batch_chunks) == (3, 2**32 + 10, 20, 2)


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"range": None},
        {**LEASE, "chunk_size": "20"},
        {**LEASE, "chunk_size": 0},
        {**LEASE, "range": {**LEASE["range"], "next_id": 2**32 + 200}},
        {**LEASE, "range": {**LEASE["range"], "group": ""}},
        {**LEASE, "rules": {"a": 1}},
        {**LEASE, "range": {**LEASE["range"], "id": True}},
    ],
)
def test_a_lease_answer_that_makes_no_sense_is_refused(broken):
    with pytest.raises(BadAnswer):
        parse_lease(broken)


def test_a_call_with_a_deadline_gives_up_and_the_node_gives_up_after_give_up(scripted):
    server = scripted((503, {"error": "unavailable", "message": "x"}))
    with pytest.raises(Unavailable):
        client(server.url).heartbeat(3, deadline=0.2)
    down = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(Unreachable, match="no answer from the coordinator"):
        client(down, give_up=0.3).post_batch(3, b"", "application/json", None)
    assert time.monotonic() - started < 5


def test_a_stop_ends_the_retries_but_not_the_release(scripted):
    stop = threading.Event()
    server = scripted(
        (503, {"error": "unavailable", "message": "x"}),
        (503, {"error": "unavailable", "message": "x"}),
        (200, {"status": "planned", "next_id": 7}),
    )
    coordinator = client(server.url, stop=stop)
    stop.set()
    with pytest.raises(Stopped):
        coordinator.post_batch(3, b"", "application/json", None)
    assert coordinator.release(3, deadline=5) == {"status": "planned", "next_id": 7}


def test_backoff_grows_exponentially_with_jitter_up_to_its_cap():
    backoff = Backoff(base=1, cap=8, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(6)]
    for delay, ceiling in zip(delays, [1, 2, 4, 8, 8, 8]):
        assert ceiling / 2 <= delay <= ceiling
    assert len(set(delays)) == len(delays)  # jittered
    backoff.reset()
    assert backoff.next_delay() <= 1
    assert Backoff(base=2, cap=1).next_delay() <= 1
    with pytest.raises(ValueError):
        Backoff(base=0)


class KeepAlive(Scripted):
    """A scripted server speaking HTTP/1.1, counting the connections it takes; close_after: the
    requests after which it closes the connection without saying so (as a keep-alive timeout does)."""

    def __init__(self, script, close_after=()):
        super().__init__(script)
        self.connections = 0
        self.closed = 0  # connections the server has closed (its handler finished)
        handler, server = self.http.RequestHandlerClass, self

        class Handler(handler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                server.connections += 1

            def finish(self):
                super().finish()
                server.closed += 1

            def do_POST(self):
                super().do_POST()
                if len(server.requests) in close_after:
                    self.close_connection = True

        self.http.RequestHandlerClass = Handler


def test_calls_keep_their_connection_and_survive_its_close():
    server = KeepAlive([(200, {"status": "leased"})], close_after={3})
    try:
        retries = []
        coordinator = client(server.url)
        on_retry = lambda call, reason, delay: retries.append(reason)  # noqa: E731
        for _ in range(3):
            assert coordinator.heartbeat(3, deadline=5) == {"status": "leased"}
        assert server.connections == 1  # one connection, three calls
        # The server closes it after the third: the next call finds it out.
        assert wait_until(lambda: server.closed == 1, timeout=5, interval=0.001, what="the server's close")
        assert coordinator.done(3, on_retry=on_retry) == {"status": "leased"}
        assert coordinator.post_batch(3, b"x", "application/json", None, on_retry=on_retry) == {"status": "leased"}
        assert server.connections == 2 and len(server.requests) == 5
        assert retries == []  # made again at once, not after a backoff
        # Each thread its own connection.
        threads = [threading.Thread(target=coordinator.heartbeat, args=(3, 5)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert server.connections == 4
    finally:
        server.close()


class Clock:
    """time as the coordinator client reads it, with a hand to move it on."""

    def __init__(self):
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def __getattr__(self, name):
        return getattr(time, name)


def test_a_connection_idle_too_long_is_not_used_again(monkeypatch):
    clock = Clock()
    monkeypatch.setattr("edge.node.coordinator.time", clock)
    server = KeepAlive([(200, {"status": "leased"})])
    try:
        coordinator = client(server.url)
        coordinator.heartbeat(3, deadline=5)
        clock.ahead += KEEP_IDLE - 1  # idle, but not too long
        coordinator.heartbeat(3, deadline=5)
        assert server.connections == 1
        clock.ahead += KEEP_IDLE + 1
        coordinator.heartbeat(3, deadline=5)
        assert server.connections == 2 and len(server.requests) == 3
    finally:
        server.close()
