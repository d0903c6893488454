"""The store: one accepted batch loaded into the catalog, its releases brought up to date, and the
batch marked stored with its release keys, in the ingest task's transaction (the fragments on a
connection of their own, committed just before it: see load_catalog). Joining its releases into
their posts comes next, in a transaction of its own (posts.join_batch).

The store runs under a row lock on the batch and only from 'accepted', and moves the state in the
same transaction, so a redelivered task finds the work done and does nothing. The fragments have
no key: they are the bulk of the rows, and keeping a key up to date would cost about half of
PostgreSQL's work for each batch. A batch's articles are its own, each once (the API checks it),
and its fragments go in whole in a transaction that records the batch in stored_fragments, so a
retry knows they are in. The keyed tables are in catalog.py.
"""

from __future__ import annotations

import logging
import struct
import sys
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, cast

from sqlalchemy import select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session, defer

from app import metrics
from app.collector import collector_paused
from app.db import array_literal, ensure_group_partitions, partition_name
from app.models import Group, SeedBatch, SeedRange
from app.models.batches import BatchState
from app.models.catalog import PACK_ARTICLES
from app.services import postnames
from app.services.ingest import catalog
from app.services.ingest.checks import Column, DecodedBatch, MalformedBatch, Table, check_batch
from app.services.ingest.decode import StoredBatch
from app.services.ingest.hosts import host_column, message_host_ids
from edge.digest.namecolumns import PostName
from app.services.ingest.pgcopy import BINARY_HEADER, BINARY_TRAILER, SLICE_ROWS, StreamedCopy, array_value

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

log = logging.getLogger(__name__)

# The COPYs' writer threads get the GIL this often during a store (seconds; Python's default:
# 0.005). Process-wide: the workers are prefork, one store at a time in a process.
STORE_SWITCH_INTERVAL = 0.0005
# How long making a group's partitions waits for its locks (see _store_batch).
PARTITIONS_LOCK_TIMEOUT = "5s"


@dataclass(frozen=True)
class StoreResult:
    batch_id: int
    stored: bool  # False: found stored already (a redelivery) or gone, nothing done
    # What the node read of its releases' names, by name, where its reading is this code's
    # (postnames.read_by_node): for the join of the batch, which then need not parse them.
    names: Mapping[str, PostName] = field(default_factory=dict)


def store_batch(session: Session, batch_id: int) -> StoreResult:
    """Load one accepted batch into the catalog and bring its releases' aggregates up to date,
    in the session's transaction (the fragments in one of their own, see load_catalog);
    idempotent (see the module's doc). The batch ends 'stored', for posts.join_batch.

    The cyclic garbage collector is paused meanwhile (app.collector): the store makes some hundred
    thousand short-lived tuples and lists, none in a cycle. And the threads that talk to
    the server while this one packs rows (the COPYs' writers) get the GIL sooner
    than every 5 ms: each has short steps to take that would otherwise wait out a full switch
    interval."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(STORE_SWITCH_INTERVAL)
    try:
        with collector_paused():
            return _store_batch(session, batch_id)
    finally:
        sys.setswitchinterval(interval)


def _store_batch(session: Session, batch_id: int) -> StoreResult:
    started = perf_counter()
    # FOR NO KEY UPDATE: it keeps a second store of the batch off, and lets the fragments'
    # connection add the batch to stored_fragments (its foreign key's check: FOR KEY SHARE).
    batch_row = session.scalar(
        select(SeedBatch)
        .where(SeedBatch.id == batch_id)
        .with_for_update(key_share=True)
        .options(defer(SeedBatch.body))
        .execution_options(populate_existing=True)
    )
    if batch_row is None or batch_row.state != BatchState.ACCEPTED:
        # Gone (its range was deleted) or already stored/failed: nothing to do.
        return StoreResult(batch_id, stored=False)
    range_id = batch_row.range_id
    # The body in binary (as text, a bytea comes hex-encoded: twice the bytes, and decoded here).
    with _psycopg(session.connection()).cursor() as cur:
        cur.execute("SELECT body FROM seed_batches WHERE id = %s", (batch_id,), binary=True)
        row = cur.fetchone()
        assert row is not None  # the batch's row, locked above
        (body,) = row
    stored = StoredBatch(body, batch_row.content_type, batch_row.content_encoding)
    group_id, group_name = session.execute(
        select(SeedRange.group_id, Group.name)
        .join(Group, Group.id == SeedRange.group_id)
        .where(SeedRange.id == range_id)
    ).one()
    engine = _engine_of(session)
    # Committed on their own: the fragments' connection must see them, and would wait forever on
    # partitions made, uncommitted, by this session. Making one locks its parent table whole:
    # should a worker's fragments connection hold that parent while its session waits on this
    # one (a wait across two connections the server cannot see as a deadlock), the lock timeout
    # ends it and the task is retried.
    hosts = stored.message_hosts()  # the fragments read (and checked) first: their COPY starts first
    with engine.begin() as partitions:
        partitions.execute(text(f"SET LOCAL lock_timeout = '{PARTITIONS_LOCK_TIMEOUT}'"))
        ensure_group_partitions(partitions, group_id)
        host_ids = message_host_ids(partitions, hosts.names)
    # The fragments' transaction commits when this block ends without an error, after everything
    # else of the batch is written and just before the caller commits the session (see load_catalog).
    with engine.begin() as fragments:
        batch = load_catalog(session, fragments, group_id, range_id, stored, host_ids, batch_id)
        articles = _record_stored(session, batch_row, batch)
        session.flush()
    # Counted when the caller commits the session (the fragments' transaction commits just before).
    metrics.batch_stored(
        session,
        group_name,
        articles=articles,
        numbers=batch_row.batch_to - batch_row.batch_from + 1,
        body_bytes=len(body),
        started=started,
    )
    return StoreResult(batch_id, stored=True, names=postnames.read_by_node(batch))


def _record_stored(session: Session, batch_row: SeedBatch, batch: DecodedBatch) -> int:
    """The batch's counts added to its range's, and the batch marked stored. Returns its
    articles (overview lines read, less the rejected)."""
    range_id = batch_row.range_id
    chunks = batch["chunks"]
    lines = sum(chunk_lines for _, _, chunk_lines, _ in chunks)
    rejected = sum(chunk_rejected for _, _, _, chunk_rejected in chunks)
    missing = sum(b - a + 1 for a, b in batch["missing"])
    kept_releases, kept_files, _, _ = batch["rules"].get("", [0, 0, 0, 0])
    dropped = sum(fragments for rule, (_, _, fragments, _) in batch["rules"].items() if rule != "")
    session.execute(
        text(
            "UPDATE seed_ranges SET articles = articles + :articles, missing = missing + :missing,"
            " rejected = rejected + :rejected, files = files + :files, releases = releases + :releases,"
            " dropped = dropped + :dropped WHERE id = :id"
        ),
        {
            "articles": lines - rejected,
            "missing": missing,
            "rejected": rejected,
            "files": kept_files,
            "releases": kept_releases,
            "dropped": dropped,
            "id": range_id,
        },
    )
    # The releases were brought up to date with the rows (load_catalog); what is left is joining
    # them into their posts (posts.join_batch), in a transaction of its own. The raw body goes:
    # the catalog holds the batch's rows, so it would only take space. One statement, its keys an
    # array literal (the ORM's flush of the row, its keys adapted one by one, cost the store about
    # a millisecond a batch).
    session.execute(
        RECORD_STORED,
        {
            "id": batch_row.id,
            "state": BatchState.STORED.value,
            "keys": array_literal(list(batch["releases"]["key"])),
        },
    )
    return lines - rejected


RECORD_STORED = text(
    "UPDATE seed_batches SET state = :state, stored_at = clock_timestamp(), error = NULL, body = NULL,"
    " release_keys = CAST(:keys AS bigint[]) WHERE id = :id"
)


# Whether a batch's fragments are in (committed with them, see load_catalog).
FRAGMENTS_STORED = "SELECT FROM stored_fragments WHERE batch_id = %s"
RECORD_FRAGMENTS_STORED = "INSERT INTO stored_fragments (batch_id) VALUES (%s)"
# A pack's columns in the table's order, each an array; the partition's own default gives
# group_id. They go in by binary COPY, the bulk of every batch.
PACK_COLUMNS = "file_keys, articles, parts, bytes, host_ids, message_locals"
PACK_COPY = "COPY {table} (" + PACK_COLUMNS + ") FROM STDIN (FORMAT binary)"
# Packs sent to the server at a time (about SLICE_ROWS articles).
PACKS_PER_SLICE = max(1, SLICE_ROWS // PACK_ARTICLES)
_PACK_FIELDS = struct.pack("!h", len(PACK_COLUMNS.split(", ")))
_field_length = struct.Struct("!i").pack


def pack_slices(
    fragments: Table, locals_: list[bytes], host_ids: array[int], articles: int = PACK_ARTICLES
) -> Iterator[bytes]:
    """The fragments as a binary COPY payload for PACK_COPY, `articles` a pack in the batch's
    order, in slices of PACKS_PER_SLICE packs (check_batch first: part and bytes must fit 32
    bits), their message-ids as split_message_ids cut them and the hosts' ids."""
    columns = [
        ("int8", fragments["file"]),
        ("int8", fragments["article"]),
        ("int4", fragments["part"]),
        ("int4", fragments["bytes"]),
        ("int4", host_ids),
        ("utf8", locals_),
    ]
    count = len(fragments["article"])
    if any(len(values) != count for _, values in columns):  # a pack's arrays are of one length
        raise ValueError("columns of different lengths")
    yield BINARY_HEADER
    pieces: list[bytes] = []  # the packs of the slice being made: a field count, then each field
    packs = 0
    for start in range(0, count, articles):
        pieces.append(_PACK_FIELDS)
        for kind, values in columns:
            value = array_value(kind, values[start : start + articles])
            pieces += (_field_length(len(value)), value)
        packs += 1
        if packs == PACKS_PER_SLICE:
            yield b"".join(pieces)
            pieces, packs = [], 0
    if pieces:
        yield b"".join(pieces)
    yield BINARY_TRAILER


def _check_keys(stored: StoredBatch, *columns: Column) -> None:
    """The keys the look-up sends are 64-bit integers (before the rest of the batch is checked)."""
    try:
        for keys in columns:
            array("q", keys)
    except (TypeError, OverflowError):
        stored.raise_if_malformed()
        raise MalformedBatch("malformed batch: keys must be 64-bit integers") from None


def _packed(stored: StoredBatch, table: str, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The pieces, a value that the packing refuses (of the wrong type, past its column's width)
    making the batch malformed: saying what is wrong with it, as the API would."""
    try:
        yield from pieces
    except (struct.error, TypeError, AttributeError) as exc:
        stored.raise_if_malformed()
        raise MalformedBatch(f"malformed batch: {table} hold a value that does not fit its column ({exc})") from None


def load_catalog(
    session: Session,
    fragments_connection: Connection,
    group_id: int,
    range_id: int,
    batch: DecodedBatch | StoredBatch,
    host_ids: array[int],
    batch_id: int,
) -> DecodedBatch:
    """Files, fragments, releases, release chunks and rule counts of one batch, in bulk, and the
    releases' aggregates (what a repair recomputes) kept up to date as rows go in. Returns the
    batch (decoded whole).

    A release's aggregates are sums over its files and release chunks, so they are maintained
    by adding what this batch stored: a new release goes in with them, a known one is updated
    by increments (safe against a concurrent batch: the row lock serialises the additions).

    The fragments (nine tenths of the rows) go in on a second connection of their own,
    `fragments_connection`, in a transaction of its own, so that two server processes work at
    once: their COPY starts as soon as they are read, the longest part of the store, while the
    session's looks up the known keys, stores the files, release chunks and releases and updates
    the known releases. The caller commits the fragments' transaction last, when everything else
    of the batch is written, just before the session's (see _store_batch). That transaction
    also records the batch in stored_fragments (the catalog keeps no key on the fragments,
    migration 0008): should the session's commit fail after it, the batch is still 'accepted'
    and its retry finds it there and leaves its fragments as they are, all in. Nothing is
    stored twice, and nothing is counted from the fragments. A reader may see a batch's
    fragments a moment before their files and releases, never a release counting fragments that
    are not there. The group's partitions must exist, committed, and host_ids hold the
    message_hosts id of each of the batch's hosts (message_host_ids).
    """
    stored = batch if isinstance(batch, StoredBatch) else StoredBatch.of(batch)
    conn = _psycopg(session.connection())  # for COPY
    with conn.cursor() as cur, _psycopg(fragments_connection).cursor() as fragment_cur:
        # The fragments first: their COPY is the longest part of a batch's store, and the server
        # stores them while the rest of the batch is read, looked up and stored on the session's.
        fragment_table, hosts = stored.table("fragments"), stored.message_hosts()
        fragments = None
        cur.execute(FRAGMENTS_STORED, (batch_id,))
        if cur.fetchone() is None:  # else a retry after the fragments committed: they are in
            # Committed with the fragments, so it tells their commit (a second store of the batch
            # would wait on this row and fail, should the batch's lock not have kept it off).
            fragment_cur.execute(RECORD_FRAGMENTS_STORED, (batch_id,))
            if fragment_table["article"]:
                # A plain COPY, each slice sent as it is packed and let go: no key, so nothing to
                # fall back on (PendingCopy's savepoint and kept payload are for the keyed tables).
                packs = pack_slices(fragment_table, hosts.locals, host_column(hosts.numbers, host_ids))
                fragments = StreamedCopy(
                    fragment_cur,
                    PACK_COPY.format(table=f'"{partition_name("fragment_packs", group_id)}"'),
                    _packed(stored, "fragments", packs),
                )
        try:
            files, releases = stored.table("files"), stored.table("releases")
            file_keys, file_releases, release_keys = files["key"], files["release"], releases["key"]
            _check_keys(stored, file_keys, file_releases, release_keys)
            known_files, known_releases = catalog.known_keys(cur, group_id, file_keys, file_releases, release_keys)
            # The other tables' rows are built while the server stores the fragments.
            others = catalog.KeyedRows(
                files,
                releases,
                stored.table("release_chunks"),
                known_files,
                known_releases,
                group_id,
                range_id,
                stored.field("first"),
                stored.raw_text,
            )
            # While the server stores the files, the rest of the batch is decoded and checked.
            others.store(cur, meanwhile=stored.decoded)
            decoded = stored.decoded()  # decoded and checked during the files' COPY, and kept since
            others.update_known_releases(cur)
            cur.executemany(
                "INSERT INTO rule_counts (range_id, batch_from, rule, group_id, releases, files, fragments, bytes)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(range_id, decoded["first"], rule, group_id, *counts) for rule, counts in decoded["rules"].items()],
            )
        except BaseException as exc:
            try:
                if fragments is not None:
                    fragments.abort(exc)
            except Exception as ended:  # the COPY's own end: the error that brought us here counts
                log.warning("fragments COPY ended with %s while failing on %s", ended, exc)
            if isinstance(exc, (struct.error, TypeError, AttributeError)):
                check_batch(stored.decoded())  # says which column, when a value is past 32 bits
                raise MalformedBatch(f"malformed batch: a value does not fit its column ({exc})") from None
            raise
        if fragments is not None:
            fragments.finish()
    return decoded


def _psycopg(connection: Connection) -> psycopg.Connection[TupleRow]:
    """The psycopg connection under one of SQLAlchemy's (for COPY and binary results)."""
    # The engine's driver is psycopg (postgresql+psycopg), and a checked-out connection has one.
    return cast("psycopg.Connection[TupleRow]", connection.connection.driver_connection)


def _engine_of(session: Session) -> Engine:
    return session.get_bind().engine  # an Engine's engine is itself
