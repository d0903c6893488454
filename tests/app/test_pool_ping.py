"""The pool pings a connection before reuse only when there is a reason to (app.db.make_engine,
PING_IDLE_AFTER): the server closed it, or it has been idle a while. A connection used a moment ago
is handed out without a round trip; one the server dropped is replaced before anyone uses it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from app.config import Settings
from app.db import make_engine
from tests.fixtures.waiting import wait_until

IDLE_AFTER = 0.2  # seconds: a test engine's threshold, where the test waits it out
NEVER = 600.0  # seconds: a threshold no step of a test comes near, however slow the machine


@pytest.fixture
def watcher(settings: Settings) -> Iterator[Engine]:
    """Another engine, to see and end the tested pool's backends."""
    engine = make_engine(settings)
    yield engine
    engine.dispose()


@pytest.fixture
def pool_of(settings: Settings) -> Iterator:
    made: list[Engine] = []

    def pool(ping_idle_after: float) -> Engine:
        made.append(make_engine(settings, ping_idle_after=ping_idle_after, pool_size=1, max_overflow=0))
        return made[-1]

    yield pool
    for engine in made:
        engine.dispose()


def backend_of(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def last_statement(watcher: Engine, pid: int) -> str:
    """What the backend was last sent: pg_stat_activity's query of it, while it is idle."""
    with watcher.connect() as conn:
        return conn.execute(text("SELECT query FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}).scalar_one()


def drop(watcher: Engine, pid: int) -> None:
    """The server ends the backend, as a restart or idle_session_timeout would."""
    with watcher.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()

    def gone() -> bool:
        # Each look in a transaction of its own: a transaction sees pg_stat_activity as it was at
        # its first look, so a backend still exiting then would be there to the end of it.
        with watcher.connect() as conn:
            return not conn.execute(
                text("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = :pid)"), {"pid": pid}
            ).scalar_one()

    wait_until(gone, 10, "the backend gone")


def idle_past(seconds: float) -> None:
    start = time.monotonic()
    wait_until(lambda: time.monotonic() - start > seconds, 5, f"{seconds} s idle")


def test_a_connection_used_a_moment_ago_is_handed_out_without_a_round_trip(pool_of, watcher):
    engine = pool_of(NEVER)
    pid = backend_of(engine)
    before = last_statement(watcher, pid)  # the transaction's end, as the connection came back
    with engine.connect():  # checked out and in again, nothing executed
        pass
    assert last_statement(watcher, pid) == before


def test_a_connection_idle_a_while_is_pinged_first(pool_of, watcher):
    engine = pool_of(IDLE_AFTER)
    pid = backend_of(engine)
    before = last_statement(watcher, pid)
    idle_past(IDLE_AFTER)
    with engine.connect():
        pass
    assert last_statement(watcher, pid) != before  # the ping (the dialect's: an empty statement)
    assert backend_of(engine) == pid  # and found it well


@pytest.mark.parametrize("ping_idle_after", [IDLE_AFTER, NEVER], ids=["idle a while", "used a moment ago"])
def test_a_connection_the_server_dropped_is_replaced_before_it_is_used(pool_of, watcher, ping_idle_after):
    engine = pool_of(ping_idle_after)
    first = backend_of(engine)
    drop(watcher, first)
    if ping_idle_after == IDLE_AFTER:
        idle_past(IDLE_AFTER)
    # Found gone at the checkout (its idle time, or the server's goodbye waiting on its socket):
    # the statement runs on a new connection, unharmed.
    assert backend_of(engine) != first


def test_the_apps_connections_never_jit_compile(watcher):
    # A short statement PostgreSQL prices high would otherwise be compiled first (app.db.make_engine).
    with watcher.connect() as conn:
        assert conn.execute(text("SHOW jit")).scalar_one() == "off"
