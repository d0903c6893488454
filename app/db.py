"""Engine, sessions, the declarative Base, and a group's partitions made on demand."""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Iterator

import psycopg
from sqlalchemy import MetaData, create_engine, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Session, configure_mappers, sessionmaker

from app.config import Settings, get_settings

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# Tables partitioned by LIST (group_id); each group gets one partition of each.
PARTITIONED_TABLES = ("files", "fragments", "release_chunks")


def partition_name(table: str, group_id: int) -> str:
    return f"{table}_g{int(group_id)}"


def is_partition_name(name: str) -> bool:
    table, sep, suffix = name.rpartition("_g")
    return bool(sep) and table in PARTITIONED_TABLES and suffix.isdigit()


def make_engine(settings: Settings | None = None, **kwargs) -> Engine:
    settings = settings or get_settings()
    connect_args = {}
    if settings.db_search_path:
        connect_args["options"] = f"-csearch_path={settings.db_search_path}"
    return create_engine(
        settings.database_url,
        connect_args=connect_args,
        pool_pre_ping=True,
        future=True,
        **kwargs,
    )


_engine: Engine | None = None
_engine_pid: int | None = None
_sessionmaker: sessionmaker[Session] | None = None


def get_engine() -> Engine:
    """The process's engine; a forked child makes its own (pooled connections never cross a fork)."""
    global _engine, _engine_pid, _sessionmaker
    if _engine is None or _engine_pid != os.getpid():
        if _engine is not None:
            _engine.dispose(close=False)
        _engine = make_engine()
        _engine_pid = os.getpid()
        _sessionmaker = sessionmaker(bind=_engine, expire_on_commit=False)
    return _engine


def warm_pool(connections: int = 2) -> int:
    """Open the process's first database connections now (a worker process, as it starts): the
    first batch it takes would otherwise wait for them, about 30 ms each (connect, and the
    dialect's first queries). The ORM's mappers are configured first (about 14 ms of CPU the
    first store or request would pay). Never keeps a worker from starting: a database that does
    not answer is met again, and said, by the first request or task. Returns how many opened."""
    import app.models  # noqa: F401 - every mapped class, so that all are configured

    configure_mappers()
    opened, ready = [], 0
    try:
        engine = get_engine()
        for _ in range(connections):  # held together, so that each is a connection of its own
            opened.append(engine.connect())
            opened[-1].exec_driver_sql("SELECT 1")
            ready += 1
    except Exception as exc:  # noqa: BLE001 - see above
        logging.getLogger(__name__).warning("could not open database connections at start: %s", exc)
    finally:
        for connection in opened:
            try:
                connection.close()  # back to the pool, open
            except Exception as exc:  # noqa: BLE001 - the database went away meanwhile
                logging.getLogger(__name__).warning("could not return a connection at start: %s", exc)
    return ready


def reset_engine() -> None:
    """Forget the engine (after fork, or when settings change)."""
    global _engine, _engine_pid, _sessionmaker
    if _engine is not None:
        _engine.dispose(close=_engine_pid == os.getpid())
    _engine = _engine_pid = _sessionmaker = None


@contextmanager
def session_scope() -> Iterator[Session]:
    """One unit of work: commits on success, rolls back on error."""
    get_engine()
    assert _sessionmaker is not None
    session = _sessionmaker()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _partitions_ready(conn: Connection | Session, names: list[str]) -> bool:
    """Whether every partition is present with its group_id default. A partition without the
    default (as made before migration 0006) is not ready, and ensure_group_partitions gives it one."""
    present = conn.execute(
        text(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'group_id'"
            " WHERE c.relname = ANY(:names) AND n.nspname = current_schema() AND a.atthasdef"
        ),
        {"names": names},
    ).scalar_one()
    return present == len(names)


def ensure_group_partitions(conn: Connection | Session, group_id: int) -> bool:
    """Make sure the group's partitions exist; True when some had to be created.

    Cheap when they exist (one catalog look-up), so ingest checks it for every batch instead
    of remembering it in a process. A partition's group_id defaults to its group, so rows are
    COPYed into it without that column. Creation runs under a transaction-scoped advisory lock so
    concurrent workers never race on the same CREATE.
    """
    names = [partition_name(t, group_id) for t in PARTITIONED_TABLES]
    if _partitions_ready(conn, names):
        return False
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('partitions'), :gid)"), {"gid": int(group_id)})
    if _partitions_ready(conn, names):  # made by the worker we waited for
        return False
    for table, name in zip(PARTITIONED_TABLES, names):
        conn.execute(
            text(f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" (group_id DEFAULT {int(group_id)})'
                 f" FOR VALUES IN ({int(group_id)})")
        )
        conn.execute(text(f'ALTER TABLE "{name}" ALTER COLUMN group_id SET DEFAULT {int(group_id)}'))
    return True


# What a database error says of the moment rather than of the data: the connection lost or refused
# (class 08, and errors without a SQLSTATE, which psycopg raises when the connection breaks), a
# serialization failure or deadlock (40001, 40P01), a lock or statement timeout (55P03, 57014), the
# server shutting down, crashed or starting (57P01-57P03), too many connections or out of memory
# (53300, 53200). Everything else (data exceptions 22, integrity 23, program limits 54 such as
# "string is too long for tsvector" or an index row too large, syntax 42...) comes again whenever
# the same work is tried.
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300", "53200"})


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same work again later may succeed: see TRANSIENT_SQLSTATES. A pool that
    has no free connection is transient; an error that is not the database's is not."""
    if isinstance(exc, sa_exc.TimeoutError):  # no free pooled connection
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig if exc.orig is not None else exc
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate
        if state is None:  # raised by psycopg itself: the connection is gone or broken
            return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        return state.startswith("08") or state in TRANSIENT_SQLSTATES
    return isinstance(exc, sa_exc.OperationalError)


class TransientDatabaseError(Exception):
    """An error is_transient() says may pass: the tasks retry it with backoff (autoretry_for),
    without counting an attempt against their batch, because the batch is fine and only the moment
    is not. Any other error would come again: it counts an attempt (app.services.ingest.lifecycle)."""

    @classmethod
    def raise_if(cls, exc: BaseException) -> None:
        """Raises one of these from exc when exc is transient."""
        if is_transient(exc):
            raise cls(f"{type(exc).__name__}: {exc}") from exc
