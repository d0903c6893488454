"""Health endpoints, unauthenticated (orchestrators and load balancers call them):

- GET /livez: the process is up and answers; no I/O.
- GET /readyz: the process can serve: the database answers, Redis answers, and the schema is at
  the migrations' head; with DATABASE_READ_URL, the replica answers, streams from the primary and
  is at most DATABASE_READ_MAX_LAG seconds behind (its lag is in the check). 200 with each check,
  or 503 saying which failed and why.
- GET /healthz: the process is up and the database answers; "impl" tells whether the compiled
  parts or their Python twins run (edge.digest.compiled.IMPL: "c" or "python"), and "compiled"
  which of the compiled parts this process runs, by module (false: its twin runs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psycopg
import redis
from flask import Blueprint, current_app, jsonify
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from app.db import get_engine, get_read_engine, replica_state
from edge.digest.compiled import IMPL, load

health = Blueprint("health", __name__)

# The migrations the code was shipped with (alembic.ini's script_location).
MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
# Every compiled part, the edge's and the data center's (setup.py, edge/setup.py).
COMPILED_PARTS = ("edge.digest._overview", "app.services._copyrows", "app.services._msgcolumns")
# Each check's own limit: an orchestrator's probe gives up after a few seconds itself.
CHECK_TIMEOUT_SECONDS = 3

T = TypeVar("T")


def _checked(engine: Engine, check: Callable[[Connection], T]) -> T:
    """check(conn) on a pooled connection, within CHECK_TIMEOUT_SECONDS, tried once more on a new
    connection when the first proves dropped (the pool pings only connections idle a while,
    app.db.PING_IDLE_AFTER): a probe says how the database is now, not how it was when that
    connection was last used."""

    def bounded(conn: Connection) -> T:
        conn.execute(text(f"SET LOCAL statement_timeout = '{CHECK_TIMEOUT_SECONDS}s'"))
        return check(conn)

    try:
        with engine.connect() as conn:
            return bounded(conn)
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
    with engine.connect() as conn:
        return bounded(conn)


@health.get("/healthz")
def healthz():
    try:
        _checked(get_engine(), lambda conn: conn.execute(text("SELECT 1")))
    except SQLAlchemyError as exc:
        response = jsonify(status="error", database="unavailable", message=str(exc.__class__.__name__), impl=IMPL)
        response.status_code = 503
        return response
    return jsonify(status="ok", database="ok", impl=IMPL, compiled=_compiled())


@functools.cache
def _compiled() -> dict[str, bool]:
    return {name: load(name) is not None for name in COMPILED_PARTS}


@health.get("/livez")
def livez():
    return jsonify(status="ok")


@health.get("/readyz")
def readyz():
    database, migrations = _database_and_schema()
    checks = {"database": database, "redis": _redis(), "migrations": migrations}
    if current_app.config["SETTINGS"].database_read_url is not None:
        checks["replica"] = _replica()
    failed = [f"{name}: {check['message']}" for name, check in checks.items() if check["status"] != "ok"]
    if not failed:
        return jsonify(status="ok", checks=checks)
    response = jsonify(status="unavailable", error="not_ready", message="; ".join(failed), checks=checks)
    response.status_code = 503
    return response


def _database_and_schema() -> tuple[dict, dict]:
    """The database's check, and the schema's: its alembic_version against the migrations' head."""

    def read_revisions(conn: Connection) -> list[str]:
        return sorted(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())

    try:
        revisions = _checked(get_engine(), read_revisions)
    except (SQLAlchemyError, psycopg.Error) as exc:
        if "alembic_version" in str(exc) and "does not exist" in str(exc):
            return _ok(), _failed("the database has no schema: run `alembic upgrade head`")
        return _failed(_reason(exc)), _failed("not checked: the database is unavailable")
    try:
        head = migrations_head()
    except Exception as exc:  # noqa: BLE001 - a broken install is said, never a 500
        return _ok(), _failed(f"the migrations in {MIGRATIONS} cannot be read: {_reason(exc)}")
    found = ",".join(revisions) or "none"
    if found != head:
        return _ok(), _failed(
            f"the database is at revision {found}, the code needs {head}: run `alembic upgrade head`",
            revision=found,
            head=head,
        )
    return _ok(), _ok(revision=found, head=head)


def _replica() -> dict:
    settings = current_app.config["SETTINGS"]

    try:
        state = _checked(get_read_engine(), replica_state)
    except (SQLAlchemyError, psycopg.Error) as exc:
        return _failed(_reason(exc))
    lag = round(state.lag_seconds, 3)
    if not state.standby:
        return _failed("DATABASE_READ_URL names a server that is not a standby", lag_seconds=lag)
    if not state.streaming:
        return _failed("the replica is not streaming from the primary", lag_seconds=lag)
    if lag > settings.database_read_max_lag:
        return _failed(
            f"the replica is {lag:.1f} s behind the primary (DATABASE_READ_MAX_LAG is"
            f" {settings.database_read_max_lag})",
            lag_seconds=lag,
        )
    return _ok(lag_seconds=lag)


def _redis() -> dict:
    client = redis.Redis.from_url(
        current_app.config["SETTINGS"].redis_url,
        socket_timeout=CHECK_TIMEOUT_SECONDS,
        socket_connect_timeout=CHECK_TIMEOUT_SECONDS,
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return _failed(_reason(exc))
    finally:
        client.close()
    return _ok()


@functools.cache
def migrations_head() -> str:
    """The head revision(s) of the migrations shipped with the code, read once per process (a
    failure is not cached: the next probe tries again)."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory(str(MIGRATIONS)).get_heads()
    if not heads:
        raise LookupError("no migration found")
    return ",".join(sorted(heads))


def _ok(**extra) -> dict:
    return {"status": "ok", **extra}


def _failed(message: str, **extra) -> dict:
    return {"status": "failed", "message": message, **extra}


def _reason(exc: BaseException) -> str:
    """One line saying why (a database's message names its host and port, never a password)."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"[:300]
