"""Engine, sessions, the declarative Base, and a group's partitions made on demand."""

from __future__ import annotations

import logging
import os
import select
import time
from contextlib import contextmanager
from functools import lru_cache
from dataclasses import dataclass
from datetime import date
from typing import Any, Iterable, Iterator, cast

import psycopg
from sqlalchemy import MetaData, create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.orm import DeclarativeBase, Session, configure_mappers, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

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


def array_literal(values: Iterable[int | str | date | None]) -> str:
    """An array parameter as its text literal, for a statement that casts it (CAST(:keys AS
    bigint[])): the server parses it in C, where psycopg would adapt a list value by value in
    Python (finding a type that fits them all first), the larger part of the CPU a join of posts
    spends in its parameters. None is NULL; every value not an int goes quoted."""
    values = values if isinstance(values, (list, tuple)) else list(values)
    types = set(map(type, values))
    if types <= {int}:
        return "{" + ",".join(map(str, values)) + "}"
    if types <= {int, type(None)}:  # a column of numbers with NULLs (the posts' years, seasons...)
        return "{" + ",".join(["NULL" if value is None else str(value) for value in values]) + "}"
    return "{" + ",".join(map(_array_element, values)) + "}"


def _array_element(value: int | str | date | None) -> str:
    if value is None:
        return "NULL"
    if type(value) is int:
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextmanager
def driver_connection(session: Session) -> Iterator[psycopg.Connection[Any]]:
    """The psycopg connection under the session's, in the session's transaction: for statements
    whose cost is mostly SQLAlchemy's (a search's: app.services.search._bounded_run), which
    psycopg can send together in one pipeline and give rows without SQLAlchemy's result machinery. Its
    errors are raised as SQLAlchemy raises them (sqlalchemy.exc.OperationalError and the rest,
    what callers catch), and a connection they broke is invalidated, as SQLAlchemy does with its
    own. Statements are psycopg's (driver_sql makes one of a SQLAlchemy text)."""
    with _driver(session.connection()) as raw:
        yield raw


@contextmanager
def autocommit_driver_connection() -> Iterator[psycopg.Connection[Any]]:
    """A psycopg connection of the pool in autocommit, as driver_connection gives one: for a
    statement outside any transaction that every call makes (a node call's token:
    app.services.nodes.authenticate_call), where SQLAlchemy's execution would double its CPU."""
    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        with _driver(connection) as raw:
            yield raw


@contextmanager
def _driver(connection: Connection) -> Iterator[psycopg.Connection[Any]]:
    raw = cast("psycopg.Connection[Any]", connection.connection.driver_connection)
    try:
        yield raw
    except psycopg.Error as exc:
        if raw.broken or raw.closed:
            connection.invalidate(exc)
        raise sa_exc.DBAPIError.instance(None, None, exc, psycopg.Error) from exc


_DIALECT = psycopg_dialect.dialect()


@lru_cache(maxsize=256)
def driver_sql(statement: str) -> str:
    """A statement written with SQLAlchemy text()'s :name parameters as psycopg takes it
    (%(name)s, a % doubled), compiled by SQLAlchemy's own psycopg dialect."""
    return str(text(statement).compile(dialect=_DIALECT))


# Tables partitioned by LIST (group_id); each group gets one partition of each.
PARTITIONED_TABLES = ("files", "fragment_packs", "release_chunks")
# Columns of a partitioned table that ANALYZE leaves alone (statistics target 0; migration 0031):
# the packs' arrays. No statement is planned by their values, and gathering them costs ANALYZE
# most of its time: it decompresses every sampled pack and counts each element (a partition of
# 21,108 packs: 3.0 - 3.6 s with them, 52 ms without; docs/benchmarks.md). A file's packs are found
# by the GIN index of file_keys either way, planned on containment's default selectivity.
UNANALYZED_COLUMNS: dict[str, tuple[str, ...]] = {
    "fragment_packs": ("file_keys", "articles", "parts", "bytes", "host_ids", "message_locals"),
}


def partition_name(table: str, group_id: int) -> str:
    return f"{table}_g{int(group_id)}"


def is_partition_name(name: str) -> bool:
    table, sep, suffix = name.rpartition("_g")
    return bool(sep) and table in PARTITIONED_TABLES and suffix.isdigit()


# A pooled connection is pinged before it is used again only when there is a reason to: its socket
# has something to read while it sits idle (a server that ends a connection, in a restart, a
# shutdown or pg_terminate_backend, sends its goodbye and closes, which one poll of the socket
# sees), or it has been idle this long (a connection cut without a word, which only a round trip
# finds). Under load, when connections come back to the pool within milliseconds, no call pays a
# round trip for the ping (SQLAlchemy's pool_pre_ping pinged at every checkout: two round trips
# for each call of the node API).
PING_IDLE_AFTER = 1.0  # seconds


def make_engine(
    settings: Settings | None = None, *, reads: bool = False, ping_idle_after: float = PING_IDLE_AFTER, **kwargs
) -> Engine:
    """The engine of the primary, or with reads=True of the replica (settings.database_read_url),
    whose transactions are read-only: a write routed there by mistake fails at once, on a
    replica or not. Its pool pings a connection before handing it out when the server has closed
    it or it has been idle `ping_idle_after` seconds (PING_IDLE_AFTER)."""
    settings = settings or get_settings()
    # No JIT for any of the app's statements: PostgreSQL compiles a statement it prices high, and
    # the app's are short ones whose price a misjudged row count inflates (a probe of a file's
    # articles priced at 3,953 rows for 47), where compiling costs hundreds of ms and saves little:
    # an inspection lease's 5 ms read of 51 files took 627 ms, 597 of them compiling.
    options = ["-cjit=off"]
    if settings.db_search_path:
        options.append(f"-csearch_path={settings.db_search_path}")
    url = settings.database_url
    if reads:
        if settings.database_read_url is None:
            raise ValueError("no DATABASE_READ_URL is set")
        url = settings.database_read_url
        options.append("-cdefault_transaction_read_only=on")
    connect_args = {"options": " ".join(options)} if options else {}
    engine = create_engine(url, connect_args=connect_args, future=True, **kwargs)
    _ping_when_idle(engine, ping_idle_after)
    return engine


def _readable(dbapi_connection: DBAPIConnection) -> bool:
    """Whether an idle connection's socket has data or an end of stream waiting (no round trip)."""
    poller = select.poll()
    poller.register(dbapi_connection.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def _ping_when_idle(engine: Engine, after: float) -> None:
    """SQLAlchemy's pool_pre_ping, for connections whose socket has something to say or that have
    been idle `after` seconds or more (PING_IDLE_AFTER)."""

    @event.listens_for(engine, "checkin")
    def checked_in(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def checked_out(
        dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
    ) -> None:
        since = record.info.pop("idle_since", None)
        if since is None:
            return  # new: its connect was its check
        try:
            if time.monotonic() - since < after and not _readable(dbapi_connection):
                return  # used a moment ago, and the server has said nothing since
            engine.dialect.do_ping(dbapi_connection)
        except (psycopg.Error, OSError) as exc:
            # As the pre-ping: this connection and every one older are replaced, and the
            # checkout is tried again on a new connection. psycopg's fileno() raises too, for a
            # connection whose socket libpq has already closed.
            raise sa_exc.InvalidatePoolError(f"the pooled connection is gone: {exc}") from exc


_engine: Engine | None = None
_engine_pid: int | None = None
_sessionmaker: sessionmaker[Session] | None = None
_read_engine: Engine | None = None
_read_sessionmaker: sessionmaker[Session] | None = None


def get_engine() -> Engine:
    """The process's engine; a forked child makes its own (pooled connections never cross a fork)."""
    global _engine, _engine_pid, _sessionmaker, _read_engine, _read_sessionmaker
    if _engine is None or _engine_pid != os.getpid():
        for engine in (_engine, _read_engine):
            if engine is not None:
                engine.dispose(close=False)
        _read_engine = _read_sessionmaker = None
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


def get_read_engine() -> Engine:
    """The engine the catalog's reads use: the replica's when DATABASE_READ_URL is set, else the
    primary's own."""
    engine = get_engine()  # made anew in a forked child: the replica's then too
    global _read_engine, _read_sessionmaker
    if get_settings().database_read_url is None:
        return engine
    if _read_engine is None:
        _read_engine = make_engine(reads=True)
        _read_sessionmaker = sessionmaker(bind=_read_engine, expire_on_commit=False)
    return _read_engine


def reset_engine() -> None:
    """Forget the engines (after fork, or when settings change)."""
    global _engine, _engine_pid, _sessionmaker, _read_engine, _read_sessionmaker
    for engine in (_engine, _read_engine):
        if engine is not None:
            engine.dispose(close=_engine_pid == os.getpid())
    _engine = _engine_pid = _sessionmaker = _read_engine = _read_sessionmaker = None


@contextmanager
def _unit_of_work(maker: sessionmaker[Session] | None) -> Iterator[Session]:
    """A session of `maker` that commits on success, rolls back on error, and is closed."""
    assert maker is not None
    session = maker()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@contextmanager
def session_scope() -> Iterator[Session]:
    """One unit of work: commits on success, rolls back on error."""
    get_engine()
    with _unit_of_work(_sessionmaker) as session:
        yield session


# For this transaction only (set_config's is_local): its commit does not wait for its WAL to be
# flushed to disk. A crash may lose the last fraction of a second of such commits, whole. The
# expression, for statements that set it as they do their work (UNFLUSHED_SQL AS unflushed).
UNFLUSHED_SQL = "set_config('synchronous_commit', 'off', true)"
UNFLUSHED_COMMIT = text(f"SELECT {UNFLUSHED_SQL}")


def commit_unflushed(session: Session) -> None:
    """The session's transaction commits without waiting for the WAL flush: for writes whose
    loss in a crash harms nothing (a lease, a heartbeat, a range's end: docs/api.md). Under a
    store's stream of WAL, a commit that waits can wait hundreds of milliseconds for it."""
    session.execute(UNFLUSHED_COMMIT)


@contextmanager
def read_session_scope(primary: Session | None = None) -> Iterator[Session]:
    """A unit of reading for the catalog: on the replica when DATABASE_READ_URL is set (read-only,
    and maybe a moment behind the primary); without one, `primary` itself when given (one
    connection and transaction for the request), else a session_scope(). Nothing read here may
    have been written by the same request: such a read goes to the primary's session."""
    if get_read_engine() is get_engine():
        if primary is not None:
            yield primary
            return
        with session_scope() as session:
            yield session
        return
    with _unit_of_work(_read_sessionmaker) as session:
        yield session


# How far the replica is behind, by its own clock of replay: 0 while it has replayed all it has
# received (an idle primary sends nothing, and a replica that is up to date is not behind however
# long ago the last write was); else the age of the last transaction it replayed. Whether it is a
# standby at all, and whether its WAL receiver streams (a replica cut off from the primary
# receives nothing and would look up to date).
REPLICA_LAG = text(
    "SELECT pg_is_in_recovery(),"
    " EXISTS (SELECT FROM pg_stat_wal_receiver WHERE status = 'streaming'),"
    " CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0"
    " ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8"
)


@dataclass(frozen=True)
class ReplicaState:
    standby: bool  # false: the read URL names a server that is not a standby (a primary)
    streaming: bool
    lag_seconds: float


def replica_state(conn: Connection) -> ReplicaState:
    standby, streaming, lag = conn.execute(REPLICA_LAG).one()
    return ReplicaState(bool(standby), bool(streaming), max(0.0, float(lag)))


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
            text(
                f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" (group_id DEFAULT {int(group_id)})'
                f" FOR VALUES IN ({int(group_id)})"
            )
        )
        # A partition made by PARTITION OF takes no statistics targets from its table: given here.
        changes = [f"ALTER COLUMN group_id SET DEFAULT {int(group_id)}"]
        changes += [f"ALTER COLUMN {column} SET STATISTICS 0" for column in UNANALYZED_COLUMNS.get(table, ())]
        conn.execute(text(f'ALTER TABLE "{name}" ' + ", ".join(changes)))
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
