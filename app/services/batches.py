"""Batches: checked at the door, stored by ingest into the catalog tables, retried by beat.

A batch goes accepted -> gathered: the store loads its rows and brings the releases it touched
up to date in the task's transaction, the fragments on a connection of their own committed just
before it (see load_catalog; the 'stored' state, stored but not yet gathered, is left by
earlier versions only; the gather task finishes those). Each step is idempotent by
construction: it runs under a row lock on the batch and only from the state before it, and
moves the state in the same transaction, so a redelivered task finds the work done and does
nothing. Rows go in by COPY straight into the group's partitions, less the files and releases
already there (they span batches); should another worker store one of them meanwhile, that table
falls back to staging and INSERT ... ON CONFLICT DO NOTHING, and only the rows that went in are
added to the releases' aggregates. The fragments keep no key (the bulk of the rows: its upkeep
was half of PostgreSQL's work a batch): a batch's articles are its own, each once (the API's
check), and its fragments go in whole in a transaction that records the batch in
stored_fragments, so a retry knows they are in. Nothing is stored or counted twice either way.
"""
from __future__ import annotations

import gc
import logging
import struct
import sys
import time
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import compress, islice, repeat
from operator import is_not, itemgetter, lt
from typing import NamedTuple

import msgpack

from sqlalchemy import select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session, defer

from app.config import get_settings
from app.db import ensure_group_partitions, partition_name
from app.models import SeedBatch, SeedRange
from app.services.copytext import BINARY_HEADER, BINARY_TRAILER, StreamedCopy, binary_slices
from app.services.errors import ServiceError
from edge.digest.batch import (GZIP, MAX_DECODED, MSGPACK_TYPES, TABLES, BatchError, BatchTooLarge, check_table,
                        decode_batch, validate_batch)
from edge.digest.deflate import ERRORS as GZIP_ERRORS
from edge.digest.deflate import gunzipper

try:  # built by setup.py where a C compiler is at hand; else the fragments are read by msgpack
    from app.services import _msgcolumns
except ImportError:  # pragma: no cover - an install without the compiled parts
    _msgcolumns = None

log = logging.getLogger(__name__)

# Columns stored as PostgreSQL integer: the digest's format allows 64 bits everywhere, the
# catalog does not, so a value past 32 bits is refused at the door rather than poison a task.
INT32_COLUMNS = {
    "files": ("index", "count", "parts"),
    "fragments": ("part", "bytes"),
    "releases": ("file_count",),
    "release_chunks": ("files", "fragments"),
}
INT32 = (-(2**31), 2**31 - 1)
assert array("i").itemsize == 4  # check_batch's 32-bit test
# Dates the catalog's timestamptz columns hold (unix seconds: 4713 BC to 294276 AD, a margin kept).
DATE_COLUMNS = (("files", "date"), ("release_chunks", "first_date"), ("release_chunks", "last_date"))
DATES = (-210_000_000_000, 9_000_000_000_000)
# The COPYs' writer threads get the GIL this often during a store (seconds; Python's default:
# 0.005). Process-wide: the workers are prefork, one store at a time in a process.
STORE_SWITCH_INTERVAL = 0.0005
# How long making a group's partitions waits for its locks (see _store_batch).
PARTITIONS_LOCK_TIMEOUT = "5s"
# Seconds the API waits for a free broker connection from the pool (its threads share it).
ENQUEUE_POOL_WAIT = 5


class MalformedBatch(ServiceError):
    status = 400
    code = "malformed_batch"


class BatchBodyTooLarge(ServiceError):
    status = 413
    code = "batch_too_large"


@dataclass(frozen=True)
class BatchHeader:
    batch_from: int
    batch_to: int
    group: str


def check_batch(batch: dict, int32: bool = True) -> BatchHeader:
    """What the data center needs beyond the format (edge.digest.batch.validate_batch checked that):
    the batch covers first..last with its chunks, and its rows fit the catalog's columns (int32
    False: leave that to the store's COPY, whose packing of those columns as int4 refuses them)."""
    def bad(message: str):
        raise MalformedBatch(f"malformed batch: {message}")

    first, last = batch["first"], batch["last"]
    chunks = batch["chunks"]
    if not chunks or chunks[0][0] != first or chunks[-1][1] != last or any(
        a[0] > a[1] or a[1] + 1 != b[0] for a, b in zip(chunks, chunks[1:])
    ):
        bad("chunks must cover first..last in order, without gaps")
    if not all(first <= a <= b <= last for a, b in batch["missing"]):
        bad("missing spans must lie inside first..last")
    try:
        articles = batch["fragments"]["article"]
        bounds = _bounds(articles)
        if bounds and not (first <= bounds[0] and bounds[1] <= last):
            bad("a fragment's article number is outside first..last")
        # The catalog keeps no key on the fragments (migration 0008): an article is stored once
        # because it is in one batch only (a range's batches follow each other, ranges do not
        # overlap) and once in it. The digest keeps one line of an article a server listed twice.
        if not _each_once(articles):
            bad("fragments.article holds an article twice")
    except TypeError:  # the store checks the fragments' values itself, as it packs them
        bad("fragments.article must hold integers")
    for table, columns in INT32_COLUMNS.items() if int32 else ():
        for column in columns:
            values = batch[table][column]
            try:
                try:
                    array("i", values)  # one pass at C speed (int is 32 bits here, see INT32)
                except TypeError:  # NULLs (a nullable column): leave them out
                    array("i", [v for v in values if v is not None])
            except OverflowError:
                bad(f"{table}.{column} holds a value past 32 bits")
    for table, column in DATE_COLUMNS if int32 else ():
        dates = [d for d in batch[table][column] if d is not None]
        if dates and not (DATES[0] <= min(dates) and max(dates) <= DATES[1]):
            bad(f"{table}.{column} holds a date PostgreSQL cannot store")
    if any(n < 0 for counts in batch["rules"].values() for n in counts):
        bad("rule counts cannot be negative")
    if any(counts[0] > INT32[1] or counts[1] > INT32[1] for counts in batch["rules"].values()):
        bad("rule counts of releases and files must fit 32 bits")
    if any("\0" in name or not _encodes(name) for name in batch["rules"]):
        bad("rule names must be UTF-8 strings without NUL")
    # The catalog's keys: a row of each in a batch (the digest merges repeats before it builds).
    keys = {}
    for table, column in (("files", "key"), ("releases", "key"), ("release_chunks", "release")):
        values = batch[table][column]
        try:
            keys[table] = set(values)
            unique = len(keys[table]) == len(values)
        except TypeError:  # unhashable: the format check refuses it
            unique = False
        if not unique:
            bad(f"{table}.{column} holds a value twice")
    # The tables are one batch's catalog, as the digest builds it: every file's release among the
    # batch's releases, one release chunk for each release, every fragment's file among its files
    # (int32 False: the store leaves the fragments' values to its COPY, see StoredBatch). A node
    # that sent others would leave files no release counts, or fragments of no file.
    try:
        if not keys["releases"].issuperset(batch["files"]["release"]):
            bad("a file's release is not among the batch's releases")
        if keys["release_chunks"] != keys["releases"]:
            bad("release_chunks must hold one row for each of the batch's releases")
        if int32 and not _among(batch["fragments"]["file"], keys["files"], batch["files"]["key"]):
            bad("a fragment's file is not among the batch's files")
    except TypeError:  # unhashable: the format check refuses it
        bad("files.release and fragments.file must hold integers")
    return BatchHeader(batch_from=first, batch_to=last, group=batch["group"])


def _bounds(values) -> tuple[int, int] | None:
    """(min, max) of a column (None when empty): at C speed for one read as an array."""
    if _msgcolumns is not None and type(values) is array:
        return _msgcolumns.bounds(values)
    return (min(values), max(values)) if values else None


def _each_once(values) -> bool:
    """No value of a column comes twice: at C speed for one read as an array in ascending order
    (the digest's articles), else by a set."""
    if _msgcolumns is not None and type(values) is array:
        if _msgcolumns.ascending(values):
            return True
    elif all(map(lt, values, islice(values, 1, None))):
        return True
    return len(set(values)) == len(values)


def _among(values, keys: set, key_list: list) -> bool:
    """Every value of a column is one of the keys (the set of key_list): at C speed for a column
    read as an array."""
    if _msgcolumns is not None and type(values) is array:
        try:
            among = _msgcolumns.among(values, array("q", key_list))
        except (TypeError, OverflowError):  # not all 64-bit integers: the set says which
            among = None
        if among is not None:  # None: keys that collide in its table (chosen to), the set decides
            return among
    return keys.issuperset(values)


def check_body(body: bytes, content_type: str, content_encoding: str, max_decoded: int) -> BatchHeader:
    """Decode and check a posted body whole, as the store will read it (413 too large, 400
    malformed): the format, the fragments' values included, and check_batch."""
    try:
        stored = StoredBatch(body, content_type, content_encoding, max_decoded=max_decoded)
        stored.check_fragments()
        batch = stored.whole(int32=True)  # check_batch included
        return BatchHeader(batch_from=batch["first"], batch_to=batch["last"], group=batch["group"])
    except BatchTooLarge as exc:
        raise BatchBodyTooLarge(str(exc)) from None
    except BatchError as exc:
        raise MalformedBatch(str(exc)) from None


def enqueue_store(batch_id: int) -> bool:
    """Ask a worker to store the batch; False when the broker is unreachable (beat requeues it).

    One connection attempt, no retries: the batch is durable already, and a node waiting on
    an answer while Redis is away must not wait for kombu's reconnection back-off. The
    connection comes from the app's broker pool (a new one costs the API about 3 ms of CPU a
    batch); one that failed is closed before it goes back, so the next enqueue connects anew.
    """
    from app.tasks.ingest import store_batch

    try:
        with store_batch.app.pool.acquire(block=True, timeout=ENQUEUE_POOL_WAIT) as connection:
            try:
                connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
                store_batch.apply_async((batch_id,), connection=connection, retry=False)
            except Exception:
                connection.collect()  # its sockets closed: not handed out again broken
                raise
        return True
    except Exception as exc:  # the batch is durable; the requeue sweep will send it again
        log.warning("could not enqueue batch %s (%s); the requeue sweep will", batch_id, exc)
        return False


@dataclass(frozen=True)
class StoreResult:
    batch_id: int
    stored: bool  # False: found stored already (a redelivery) or gone, nothing done


def store_batch(session: Session, batch_id: int) -> StoreResult:
    """Load one accepted batch into the catalog and bring its releases' aggregates up to date,
    in the session's transaction (the fragments in one of their own, see load_catalog);
    idempotent (see the module's doc). The batch ends 'gathered'.

    The cyclic garbage collector is paused meanwhile: the store makes some hundred thousand
    short-lived tuples and lists (none in a cycle), each few hundred of which would start a
    collection that walks the whole heap of the worker now and then. And the threads that talk to
    the server while this one packs rows (the COPYs' writers) get the GIL sooner
    than every 5 ms: each has short steps to take that would otherwise wait out a full switch
    interval."""
    paused = gc.isenabled()
    gc.disable()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(STORE_SWITCH_INTERVAL)
    try:
        return _store_batch(session, batch_id)
    finally:
        sys.setswitchinterval(interval)
        if paused:
            gc.enable()


def _store_batch(session: Session, batch_id: int) -> StoreResult:
    # FOR NO KEY UPDATE: it keeps a second store of the batch off, and lets the fragments'
    # connection add the batch to stored_fragments (its foreign key's check: FOR KEY SHARE).
    batch_row = session.scalar(
        select(SeedBatch).where(SeedBatch.id == batch_id).with_for_update(key_share=True)
        .options(defer(SeedBatch.body)).execution_options(populate_existing=True)
    )
    if batch_row is None or batch_row.state != "accepted":
        # Gone (its range was deleted) or already stored/failed: nothing to do.
        return StoreResult(batch_id, stored=False)
    range_id = batch_row.range_id
    # The body in binary (as text, a bytea comes hex-encoded: twice the bytes, and decoded here).
    with session.connection().connection.driver_connection.cursor() as cur:
        cur.execute("SELECT body FROM seed_batches WHERE id = %s", (batch_id,), binary=True)
        (body,) = cur.fetchone()
    stored = StoredBatch(body, batch_row.content_type, batch_row.content_encoding)
    group_id = session.scalar(select(SeedRange.group_id).where(SeedRange.id == range_id))
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
        _record_stored(session, batch_row, load_catalog(session, fragments, group_id, range_id, stored, host_ids,
                                                        batch_id))
        session.flush()
    return StoreResult(batch_id, stored=True)


def _record_stored(session: Session, batch_row: SeedBatch, batch: dict) -> None:
    """The batch's counts added to its range's, and the batch marked gathered."""
    range_id = batch_row.range_id
    chunks = batch["chunks"]
    lines = sum(c[2] for c in chunks)
    rejected = sum(c[3] for c in chunks)
    missing = sum(b - a + 1 for a, b in batch["missing"])
    kept = batch["rules"].get("", [0, 0, 0, 0])
    dropped = sum(v[2] for k, v in batch["rules"].items() if k != "")
    session.execute(
        text(
            "UPDATE seed_ranges SET articles = articles + :articles, missing = missing + :missing,"
            " rejected = rejected + :rejected, files = files + :files, releases = releases + :releases,"
            " dropped = dropped + :dropped WHERE id = :id"
        ),
        {"articles": lines - rejected, "missing": missing, "rejected": rejected, "files": kept[1],
         "releases": kept[0], "dropped": dropped, "id": range_id},
    )
    # The releases were brought up to date with the rows (load_catalog): nothing is left to gather.
    batch_row.state = "gathered"
    batch_row.stored_at = datetime.now(timezone.utc)
    batch_row.error = None
    batch_row.body = None  # the catalog holds it now; the raw body would only take space
    batch_row.release_keys = None


class StoredBatch:
    """An accepted body decoded for the store, table by table, so the fragments' COPY starts as
    soon as the fragments are decoded and the rest is decoded and checked while the server
    stores them.

    The fragments (nine tenths of a batch's values) are read and checked in C where it is built
    (_msgcolumns.c: integers as arrays, text as its UTF-8 bytes checked UTF-8 without NUL), for
    the API and the store alike. Without it the API decodes and checks the body whole before
    accepting it, and the store checks it again less the fragments' values: their COPY refuses a
    value of the wrong type or past its column's width as it packs it (struct, bytes.join), and
    the table's NOT NULL refuses a null. Text stays the UTF-8 bytes the body holds (`raw_text`):
    the COPY sends bytes, so each column is checked at once (UTF-8, no NUL) instead of decoded
    value by value and encoded again. Anything else than a msgpack map is decoded and checked
    whole, at once."""

    def __init__(self, body: bytes, content_type: str, content_encoding: str | None, max_decoded: int | None = None):
        """max_decoded: the API's limit (BatchTooLarge past it); the store's is never below it."""
        self._body, self._content_type, self._content_encoding = body, content_type, content_encoding
        self._cap = max_decoded or _decoded_cap()
        self._data: memoryview | None = None
        self._spans: dict = {}
        self._columns: dict[str, dict] = {}
        self._tables: dict = {}
        self._batch: dict | None = None
        self._hosts: MessageHosts | None = None
        self.raw_text = False
        media_type = (content_type or "").split(";")[0].strip().lower()
        encoding = (content_encoding or "identity").strip().lower()
        if encoding == "identity" and len(body) > self._cap:
            raise BatchTooLarge(f"body of {len(body)} bytes is over the {self._cap} byte limit")
        if media_type in MSGPACK_TYPES and encoding in (GZIP, "identity"):
            try:
                data = _gunzip(body, self._cap) if encoding == GZIP else body
                unpacker = msgpack.Unpacker(None, raw=False, max_buffer_size=len(data) + 1)
                unpacker.feed(data)
                for _ in range(unpacker.read_map_header()):
                    key = unpacker.unpack()
                    start = unpacker.tell()
                    if key in TABLES:  # where each column is: decoded one by one (see table())
                        columns = {}
                        for _ in range(unpacker.read_map_header()):
                            column = unpacker.unpack()
                            column_start = unpacker.tell()
                            unpacker.skip()
                            columns[column] = (column_start, unpacker.tell())
                        self._columns[key] = columns
                    else:
                        unpacker.skip()
                    self._spans[key] = (start, unpacker.tell())
                if unpacker.tell() == len(data) and all(type(key) is str for key in self._spans):
                    self._data = memoryview(data)
                    self.raw_text = True
            except BatchTooLarge:
                raise
            except (ValueError, TypeError, msgpack.UnpackException, *GZIP_ERRORS):
                pass  # decoded whole below, which says what is wrong
        if self._data is None:
            self._batch = decode_batch(body, content_type, content_encoding, max_decoded=self._cap)
            _text_without_nul(self._batch)
            check_batch(self._batch)

    @classmethod
    def of(cls, batch: dict) -> StoredBatch:
        """A batch decoded and checked already (check_batch included)."""
        stored = cls.__new__(cls)
        stored._body, stored._batch, stored.raw_text, stored._hosts = None, batch, False, None
        return stored

    def table(self, name: str) -> dict:
        """A table of the batch, its structure checked (columns, lengths), not its values (the
        fragments' values too, when read in C: see _read_checked)."""
        if self._batch is not None:
            return self._batch[name]
        if name not in self._tables:
            kinds = TABLES[name]
            in_c = (name == "fragments" and _msgcolumns is not None and name in self._columns
                    and set(self._columns[name]) == set(kinds))  # else refused below, as it is
            # Column by column: between two, the COPY writers' threads get their turn.
            if in_c:
                table = {column: self._read_checked(name, column, span, kinds.get(column, ""))
                         for column, span in self._columns[name].items()}
            elif name in self._columns:
                table = {column: self._unpack(name, span, raw=kinds.get(column, "").startswith("str"))
                         for column, span in self._columns[name].items()}
            else:
                table = self._unpack(name)
            if not isinstance(table, dict) or set(table) != set(kinds) or not all(
                    type(column) in (list, array) for column in table.values()) or len(set(map(len, table.values()))) != 1:
                self._whole()  # raises BatchMalformed
                raise MalformedBatch(f"malformed batch: {name} is not a table of the columns {', '.join(kinds)}")
            if name in self._columns and not in_c:
                for column, kind in kinds.items():
                    if kind.startswith("str"):
                        self._check_text(name, column, table[column], nullable=kind.endswith("?"))
            self._tables[name] = table
        return self._tables[name]

    def whole(self, int32: bool = False) -> dict:
        """The whole batch, checked as the API checked it (the fragments' values aside, see the
        class's doc); int32: check_batch's 32-bit columns too (else left to the COPY's packing)."""
        if self._batch is None:
            for name in TABLES:
                self.table(name)
            batch = {key: self._tables[key] if key in self._tables else self._unpack(key) for key in self._spans}
            # The fragments' columns as empty lists (their values are checked as they are packed),
            # the text as empty strings (checked as bytes by table()).
            shapes = {name: {column: [""] * len(values) if TABLES[name][column].startswith("str") else values
                             for column, values in batch[name].items()} for name in TABLES if name != "fragments"}
            validate_batch({**batch, **shapes, "fragments": {column: [] for column in TABLES["fragments"]}})
            check_batch(batch, int32=int32)  # else: the COPY packs those columns as int4, refusing them
            self._batch = batch
        return self._batch

    def check_fragments(self) -> None:
        """The fragments' values checked too, as the API must before it accepts a batch (the
        store leaves them to its COPY, when they are not read in C); their message-ids were
        checked by table()."""
        if self._batch is not None:  # decoded and checked whole already
            return
        fragments = self.table("fragments")
        if _msgcolumns is not None:  # read and checked in C (table())
            return
        check_table("fragments", {**fragments, "message_id": [""] * len(fragments["message_id"])},
                    TABLES["fragments"])

    def message_hosts(self) -> MessageHosts:
        """The fragments' message-ids cut as the catalog stores them (split_message_ids), once."""
        if self._hosts is None:
            self._hosts = split_message_ids(self.table("fragments")["message_id"])
        return self._hosts

    def field(self, key: str):
        """One of the batch's values outside the tables (first, last, group...), its type unchecked."""
        return self._batch[key] if self._batch is not None else self._unpack(key)

    def _check_text(self, table: str, column: str, values: list, nullable: bool) -> None:
        """A text column as bytes (msgpack strings, undecoded): each value UTF-8 without NUL, as
        the catalog's text holds it; NULLs only where the format allows them. One pass: joined
        with NUL between the values, a NUL inside one shows as one too many, and a character
        cut between two values as invalid UTF-8."""
        present = list(compress(values, map(is_not, values, repeat(None)))) if nullable else values
        try:
            joined = b"\0".join(present)
        except TypeError:
            joined = None
        bad = joined is None or joined.count(b"\0") != max(len(present) - 1, 0)
        if not bad and not joined.isascii():
            try:
                joined.decode("utf-8")
            except UnicodeDecodeError:
                bad = True
        if bad:
            self._whole()
            raise MalformedBatch(f"malformed batch: {table}.{column} must hold UTF-8 strings without NUL")

    def _read_checked(self, table: str, column: str, span: tuple[int, int], kind: str):
        """A column of a table without NULLs, read and its values checked in C (_msgcolumns.c):
        integers as an array ('i' for the catalog's 32-bit columns), text as its UTF-8 bytes."""
        start, end = span
        try:
            if kind == "int":
                return _msgcolumns.ints(self._data, start, end, 32 if column in INT32_COLUMNS.get(table, ()) else 64)
            if kind == "str":
                return _msgcolumns.texts(self._data, start, end, True)
        except ValueError as exc:
            self._whole()  # says what is wrong as the API would
            raise MalformedBatch(f"malformed batch: {table}.{column} {exc}") from None
        raise ValueError(f"{table}.{column} is not read in C")

    def _unpack(self, key: str, span: tuple[int, int] | None = None, raw: bool = False):
        if span is None and key not in self._spans:
            self._whole()
            raise MalformedBatch(f"malformed batch: no {key}")
        start, end = span or self._spans[key]
        try:
            return msgpack.unpackb(self._data[start:end], raw=raw)
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
            self._whole()
            raise MalformedBatch(f"malformed batch: undecodable {key}") from None

    def _whole(self) -> None:
        """Decode and check the body whole (raises what is wrong with it, as the API would)."""
        if self._body is None:  # given decoded and checked
            return
        check_batch(decode_batch(self._body, self._content_type, self._content_encoding, max_decoded=self._cap))


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _text_without_nul(batch: dict) -> None:
    """A decoded batch's text holds no NUL (PostgreSQL's text cannot) and encodes as UTF-8 (a
    JSON body may hold a lone surrogate); StoredBatch.table checks the undecoded text of a
    msgpack body itself."""
    for table, columns in TABLES.items():
        for column, kind in columns.items():
            if kind.startswith("str"):
                text = "".join(filter(None, batch[table][column]))
                if "\0" in text or not _encodes(text):
                    raise MalformedBatch(f"malformed batch: {table}.{column} must hold UTF-8 strings without NUL")


def _decoded_cap() -> int:
    """The API's decoded-size limit (MAX_DECODED_BYTES), never below the format's default: a
    batch the API took must never be too large for the store."""
    return max(get_settings().max_decoded_bytes, MAX_DECODED)


def _gunzip(body: bytes, cap: int) -> bytes:
    """Inflates at most cap + 1 bytes: enough to know a body is too large (a gzip bomb)."""
    inflater = gunzipper()
    data = inflater.decompress(body, cap + 1)
    if len(data) > cap or inflater.unconsumed_tail:
        raise BatchTooLarge(f"body inflates past the {cap} byte limit")
    if not inflater.eof or inflater.unused_data:
        raise ValueError("not a whole gzip body")
    return data


# Whether a batch's fragments are in (committed with them, see load_catalog).
FRAGMENTS_STORED = "SELECT FROM stored_fragments WHERE batch_id = %s"
RECORD_FRAGMENTS_STORED = "INSERT INTO stored_fragments (batch_id) VALUES (%s)"
# Fragments' columns in the table's order (no alignment padding: 8-byte columns first); the
# partition's own default gives group_id. They go in by binary COPY (the bulk of every batch).
FRAGMENT_COLUMNS = "article, file_key, part, bytes, host_id, message_local"
FRAGMENT_COPY = "COPY {table} (" + FRAGMENT_COLUMNS + ") FROM STDIN (FORMAT binary)"


class MessageHosts(NamedTuple):
    """A batch's message-ids as the catalog stores them (migration 0007)."""

    locals: list[bytes]  # each fragment's message-id up to its host
    numbers: array  # each fragment's host, as its index in names
    names: list[bytes]  # the hosts, in the order first seen


def split_message_ids(ids: list) -> MessageHosts:
    """Message-ids (str, or UTF-8 bytes: checked text) cut before their last '@': the fragment
    keeps the local part, the host ('' for an id without an '@') is stored once, in
    message_hosts. In C where it is built (_msgcolumns.split_hosts)."""
    if ids and type(ids[0]) is not bytes:  # decoded text: a JSON body, a batch built here
        ids = [value.encode() for value in ids]
    if _msgcolumns is not None:
        return MessageHosts(*_msgcolumns.split_hosts(ids))
    hosts: dict[bytes, int] = {}
    locals_, numbers = [], array("i")
    for value in ids:
        at = value.rfind(b"@")
        host = value[at:] if at >= 0 else b""
        locals_.append(value[:len(value) - len(host)])
        numbers.append(hosts.setdefault(host, len(hosts)))
    return MessageHosts(locals_, numbers, list(hosts))


# Each host's id, added where new. A host another transaction adds meanwhile is skipped by ON
# CONFLICT and not seen by this statement's snapshot: asked again (message_host_ids).
HOST_IDS = ("WITH added AS (INSERT INTO message_hosts (host) SELECT h FROM unnest(CAST(:hosts AS text[])) AS h"
            " ORDER BY h ON CONFLICT (host) DO NOTHING RETURNING host, id)"
            " SELECT host, id FROM added UNION ALL"
            " SELECT host, id FROM message_hosts WHERE host = ANY(CAST(:hosts AS text[]))")


def message_host_ids(conn: Connection, names: list[bytes]) -> array:
    """The message_hosts ids of these hosts (added where new), in their order: committed with the
    caller's short transaction (the group's partitions'), before either of the store's
    transactions needs them, so a new host never waits on another worker's store."""
    wanted = [name.decode() for name in names]
    found: dict[str, int] = {}
    for _ in range(5):
        missing = sorted(set(wanted).difference(found))
        if not missing:
            return array("i", map(found.__getitem__, wanted))
        found.update((host, id_) for host, id_ in conn.execute(text(HOST_IDS), {"hosts": missing}))
    raise RuntimeError(f"message hosts not found after adding them: {missing[:3]}")


def host_column(numbers: array, ids: array) -> array:
    """Each fragment's host id, from its host's number."""
    if _msgcolumns is not None:
        return _msgcolumns.take(numbers, ids)
    return array("i", map(ids.__getitem__, numbers))


def fragment_slices(fragments: dict, locals_: list[bytes], host_ids: array) -> Iterator[bytes]:
    """The fragments as a binary COPY payload for FRAGMENT_COPY, in slices (check_batch first:
    part and bytes must fit 32 bits), their message-ids as split_message_ids cut them and the
    hosts' ids."""
    return binary_slices([("int8", fragments["article"]), ("int8", fragments["file"]),
                          ("int4", fragments["part"]), ("int4", fragments["bytes"]),
                          ("int4", host_ids), ("utf8", locals_)], nulls=False)


FILE_COLUMNS = "key, release_key, posted_at, file_index, file_count, parts, name, subject, poster"
RELEASE_CHUNK_COLUMNS = "release_key, batch_from, range_id, bytes, first_post, last_post, files, fragments"
RELEASE_COLUMNS = ("key, name, poster, file_count, group_id, files_seen, parts_expected, parts_seen, bytes,"
                   " completion, first_post, last_post, gathered_at")

class _PendingCopy:
    """A COPY of rows the caller believes new straight into `target`, under a savepoint, sent in
    the background (the caller prepares the next tables meanwhile); finish() tells which rows went
    in. Should another worker have stored one of them meanwhile (a unique violation), the
    savepoint is rolled back and the rows go through a staging table and INSERT ... ON CONFLICT DO
    NOTHING RETURNING the key."""

    def __init__(self, cur, table: str, target: str, column_names: str, pieces: list[bytes], key: str,
                 binary: bool = False):
        """pieces: the payload, kept for the fallback."""
        self.cur, self.table, self.target, self.column_names, self.key = cur, table, target, column_names, key
        self.options = " (FORMAT binary)" if binary else ""
        self.copy = self.error = None
        self.pieces = pieces
        if not pieces or binary and sum(map(len, pieces)) == len(BINARY_HEADER) + len(BINARY_TRAILER):
            return
        cur.execute("SAVEPOINT copy_new_rows")
        try:
            self.copy = StreamedCopy(cur, f'COPY "{target}" ({column_names}) FROM STDIN{self.options}', pieces)
        except Exception as exc:
            self.error = exc

    def abort(self, exc: BaseException) -> None:
        """The caller failed before finish(): end the COPY (if still open) with that error."""
        if self.copy is not None:
            self.copy.abort(exc)

    def finish(self) -> set | None:
        """None when every row went in; else the keys of the rows that did."""
        if self.copy is None and self.error is None:
            return None
        exc = self.error
        if exc is None:
            try:
                self.copy.finish()
            except Exception as error:
                exc = error
        if exc is None:
            self.cur.execute("RELEASE SAVEPOINT copy_new_rows")
            return None
        if getattr(exc, "sqlstate", None) != "23505":  # unique_violation
            raise exc
        cur, names = self.cur, self.column_names
        cur.execute("ROLLBACK TO SAVEPOINT copy_new_rows")
        # Shaped like the target, its group_id default included (per target: a session may
        # store batches of several groups).
        stage = f"stage_{self.target}"
        cur.execute(f'CREATE TEMP TABLE IF NOT EXISTS "{stage}" (LIKE "{self.target}" INCLUDING DEFAULTS)'
                    " ON COMMIT DELETE ROWS")
        with cur.copy(f'COPY "{stage}" ({names}) FROM STDIN{self.options}') as copy:
            for piece in self.pieces:
                copy.write(piece)
        # In key order, as the COPYs go: two workers wait on each other's rows in one order.
        cur.execute(f'INSERT INTO "{self.target}" ({names}) SELECT {names} FROM "{stage}" ORDER BY {self.key}'
                    f" ON CONFLICT DO NOTHING RETURNING {self.key}")
        inserted = {key for (key,) in cur.fetchall()}
        cur.execute(f'TRUNCATE "{stage}"')
        cur.execute("RELEASE SAVEPOINT copy_new_rows")
        return inserted


def _check_keys(stored: StoredBatch, *columns: list) -> None:
    """The keys the look-up sends are 64-bit integers (before the rest of the batch is checked)."""
    try:
        for keys in columns:
            array("q", keys)
    except (TypeError, OverflowError):
        stored._whole()
        raise MalformedBatch("malformed batch: keys must be 64-bit integers") from None


def _packed(stored: StoredBatch, table: str, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The pieces, a value that the packing refuses (of the wrong type, past its column's width)
    making the batch malformed: saying what is wrong with it, as the API would."""
    try:
        yield from pieces
    except (struct.error, TypeError, AttributeError) as exc:
        stored._whole()
        raise MalformedBatch(f"malformed batch: {table} hold a value that does not fit its column ({exc})") from None


NO_JIT = "SELECT set_config('jit', 'off', true)"
# One index probe a key (a LATERAL ... LIMIT 1 each): never a scan of the group's catalog, which
# a planner may prefer for a few thousand keys (a hashed = ANY over every row of a partition,
# growing with the catalog), so the look-up grows with the batch (`flask seed bench --store
# --catalog 1000000`, docs/benchmarks.md).
PROBE_KEYS = ('SELECT k.key FROM unnest(%s::bigint[]) AS k(key) CROSS JOIN LATERAL'
              ' (SELECT FROM "{table}" t WHERE t.group_id = %s AND t.key = k.key LIMIT 1) AS hit')


def _known_keys(cur, group_id: int, file_keys: list[int], file_releases: list[int],
                release_keys: list[int]) -> tuple[set, set]:
    """Which of these files and releases the catalog has for the group already (those spanning
    batches, ranges and nodes are stored by the first batch that saw them).

    Releases first: a file is stored with its release (the same transaction), so only the files
    of known releases are looked up, a tenth of a batch's or so. Should a file be there without
    its release all the same, its COPY meets it and goes through ON CONFLICT (_PendingCopy):
    slower, never stored twice."""
    known: tuple[set, set] = (set(), set())
    if not release_keys:
        return known
    # The keys as array literals: parsed by the server in C, where a list of ints would be adapted
    # value by value here.
    cur.execute(PROBE_KEYS.format(table="releases"), (_array_literal(release_keys), group_id), binary=True)
    known[1].update(key for (key,) in cur.fetchall())
    candidates = [key for key, release in zip(file_keys, file_releases) if release in known[1]] if known[1] else []
    if candidates:
        cur.execute(PROBE_KEYS.format(table=partition_name("files", group_id)), (_array_literal(candidates), group_id),
                    binary=True)
        known[0].update(key for (key,) in cur.fetchall())
    return known


def _array_literal(integers: list[int | None]) -> str:
    """An integer array parameter as its text literal (None: NULL)."""
    if None in integers:
        return "{" + ",".join("NULL" if v is None else str(v) for v in integers) + "}"
    return "{" + ",".join(map(str, integers)) + "}"


def _without(known: set[int], keys: list[int], columns: list[tuple[str, list]]) -> list[tuple[str, list]]:
    if not known:
        return columns
    keep = [key not in known for key in keys]
    return [(kind, list(compress(values, keep))) for kind, values in columns]


def _completion(parts_seen: int, parts_expected: int) -> float:
    return min(100.0, 100.0 * parts_seen / parts_expected) if parts_expected > 0 else 0.0


NO_CHUNK = (0, 0, None, None)


class _Additions:
    """What one batch adds to each of its releases: the files and the release chunk it stored."""

    def __init__(self, tables: dict, inserted_file_keys: set | None, new_files: tuple[list, list],
                 inserted_chunks: set | None):
        """new_files: the release and parts of each file the batch means to store; inserted_*:
        None when every row went in, else the keys of those that did (through ON CONFLICT)."""
        files, chunks = tables["files"], tables["release_chunks"]
        releases, parts = new_files
        if inserted_file_keys is not None:  # count those that went in (once)
            went_in = {k: (r, p) for k, r, p in zip(files["key"], files["release"], files["parts"])
                       if k in inserted_file_keys}
            releases, parts = map(list, zip(*went_in.values())) if went_in else ([], [])
        self.files = Counter(releases)
        self.parts = dict.fromkeys(self.files, 0)
        for release, count in zip(releases, parts):
            self.parts[release] += count
        rows = zip(chunks["release"], zip(chunks["fragments"], chunks["bytes"], chunks["first_date"],
                                          chunks["last_date"]))
        self.chunk = dict(rows) if inserted_chunks is None else {
            release: row for release, row in rows if release in inserted_chunks}

    def columns(self, keys: list[int]) -> tuple:
        """(files, parts, fragments, bytes, first dates, last dates), a sequence each, for the keys."""
        if not keys:
            return ((),) * 6
        return (list(map(self.files.get, keys, repeat(0))), list(map(self.parts.get, keys, repeat(0))),
                *zip(*map(self.chunk.get, keys, repeat(NO_CHUNK))))


def _in_key_order(columns: list[tuple[str, list]]) -> list[tuple[str, list]]:
    """The rows sorted by their first column (the key). Workers storing batches that share new
    files or releases then insert them in one order, so they wait on each other, never deadlock.
    The edge sends them in that order: then they are only checked (docs/batch-format.md)."""
    keys = columns[0][1]
    if len(keys) < 2 or all(map(lt, keys, islice(keys, 1, None))):
        return columns
    order = sorted(range(len(keys)), key=keys.__getitem__)
    pick = itemgetter(*order)
    return [(kind, list(pick(values))) for kind, values in columns]


def _release_pieces(releases: dict, new: list[bool], group_id: int, additions: _Additions, text: str) -> list[bytes]:
    keys = list(compress(releases["key"], new))
    files, parts, fragments, size, first, last = additions.columns(keys)
    n = len(keys)
    return list(binary_slices(_in_key_order([
        ("int8", keys), (text, list(compress(releases["name"], new))),
        (text, list(compress(releases["poster"], new))), ("int4", list(compress(releases["file_count"], new))),
        ("int4", [group_id] * n), ("int4", files), ("int8", parts), ("int8", fragments), ("int8", size),
        ("float4", list(map(_completion, fragments, parts))),
        ("timestamp", first), ("timestamp", last), ("timestamp", [int(time.time())] * n)])))


class _OtherRows:
    """A batch's files, release chunks and releases as binary COPY payloads, less the files and
    releases the catalog has already, and what the batch adds to each release's aggregates.
    store() sends each table as soon as its rows are built, so the server stores one while the
    next is built here; the known releases are updated last."""

    def __init__(self, files: dict, releases: dict, chunks: dict, known_files: set, known_releases: set,
                 group_id: int, range_id: int, batch_from: int, raw_text: bool):
        self.tables = {"files": files, "release_chunks": chunks}
        self.releases, self.group_id = releases, group_id
        self.range_id, self.batch_from = range_id, batch_from
        # Text as the batch holds it: UTF-8 bytes (StoredBatch.raw_text), else str.
        self.text, no_name = ("utf8", b"") if raw_text else ("text", "")
        file_keys = files["key"]
        # A file's poster is its release's (stored there): NULL unless it differs.
        release_poster = dict(zip(releases["key"], releases["poster"]))
        file_columns = _in_key_order(_without(known_files, file_keys, [
            ("int8", file_keys), ("int8", files["release"]), ("timestamp", files["date"]),
            ("int4", files["index"]), ("int4", files["count"]), ("int4", files["parts"]),
            (self.text, [name or no_name for name in files["name"]]), (self.text, files["subject"]),
            (self.text, [None if poster == release_poster.get(release) else poster
                         for release, poster in zip(files["release"], files["poster"])])]))
        self.file_pieces = list(binary_slices(file_columns))
        self.new_files = (file_columns[1][1], file_columns[5][1])  # release, parts
        self.new = [key not in known_releases for key in releases["key"]]
        self.to_update: list[int] = []

    def _chunk_pieces(self) -> list[bytes]:
        chunks = self.tables["release_chunks"]
        count = len(chunks["release"])
        return list(binary_slices([
            ("int8", chunks["release"]), ("int8", [self.batch_from] * count), ("int8", [self.range_id] * count),
            ("int8", chunks["bytes"]), ("timestamp", chunks["first_date"]),
            ("timestamp", chunks["last_date"]), ("int4", chunks["files"]), ("int4", chunks["fragments"])]))

    def store(self, cur, meanwhile=None) -> None:
        """The files, the release chunks, then the new releases (their aggregates counting only
        the rows that really went in). The other tables are built, and meanwhile() runs, while
        the server stores the files."""
        group_id = self.group_id
        files = _PendingCopy(cur, "files", partition_name("files", group_id), FILE_COLUMNS, self.file_pieces,
                             "key", binary=True)
        try:
            chunk_pieces = self._chunk_pieces()
            # Should every row go in (nearly always; recounted below when some did not).
            self.additions = _Additions(self.tables, None, self.new_files, None)
            release_pieces = _release_pieces(self.releases, self.new, group_id, self.additions, self.text)
            if meanwhile is not None:
                meanwhile()
        except BaseException as exc:
            files.abort(exc)
            raise
        inserted_files = files.finish()
        inserted_chunks = _PendingCopy(cur, "release_chunks", partition_name("release_chunks", group_id),
                                       RELEASE_CHUNK_COLUMNS, chunk_pieces, "release_key", binary=True).finish()
        if inserted_files is not None or inserted_chunks is not None:
            self.additions = _Additions(self.tables, inserted_files, self.new_files, inserted_chunks)
            release_pieces = _release_pieces(self.releases, self.new, group_id, self.additions, self.text)
        inserted_releases = _PendingCopy(cur, "releases", "releases", RELEASE_COLUMNS, release_pieces, "key",
                                         binary=True).finish()
        # Releases stored before (or by a concurrent batch meanwhile) get this batch's part added.
        self.to_update = sorted(key for key, is_new in zip(self.releases["key"], self.new)
                                if not is_new or (inserted_releases is not None and key not in inserted_releases))

    def update_known_releases(self, cur) -> None:
        """Last, so that the locks on releases shared with other batches are held briefly."""
        if not self.to_update:
            return
        add = self.additions.columns(self.to_update)
        keys = _array_literal(self.to_update)
        cur.execute(LOCK_RELEASES, (keys, self.group_id))
        cur.execute(PROBES_ONLY)
        cur.execute(UPDATE_RELEASES, (keys, *map(_array_literal, add), self.group_id))
        updated = cur.rowcount
        cur.execute(PROBES_DONE)
        if updated != len(self.to_update):  # each was locked, so each is there: never silently fewer
            raise RuntimeError(f"updated {updated} of the batch's {len(self.to_update)} known releases")


# A batch's part added to the releases stored before it. Each release is locked by an index probe,
# in key order first: two batches of one release stored at once then wait on each other in one
# order, never deadlock. Then updated by a statement of its own, whose snapshot sees what a batch
# that held the lock before wrote, where a probe of that snapshot finds it (its ctid). Probes (with
# LIMIT 1: a subquery the planner cannot fold into a join), with hash and merge joins off for the
# UPDATE: the planner would rather scan the releases table, every group's, from a few thousand
# releases on, or, for a group it has no statistics of yet (a new one), walk the group's releases
# once for every release of the batch (tests/app/test_store.py shows the plans).
PROBES_ONLY = "SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)"
PROBES_DONE = "RESET enable_hashjoin; RESET enable_mergejoin"
LOCK_RELEASES = ("SELECT FROM unnest(%s::bigint[]) AS k(key) CROSS JOIN LATERAL"
                 " (SELECT FROM releases r WHERE r.group_id = %s AND r.key = k.key FOR UPDATE) AS hit")
UPDATE_RELEASES = """
    WITH target AS MATERIALIZED (
        SELECT hit.tid, d.*
          FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
                      %s::bigint[]) AS d(key, files, parts, fragments, bytes, first_post, last_post)
         CROSS JOIN LATERAL (SELECT r.ctid AS tid FROM releases r
                              WHERE r.group_id = %s AND r.key = d.key LIMIT 1) AS hit)
    UPDATE releases r
       SET files_seen = r.files_seen + d.files, parts_expected = r.parts_expected + d.parts,
           parts_seen = r.parts_seen + d.fragments, bytes = r.bytes + d.bytes,
           first_post = least(r.first_post, to_timestamp(d.first_post)),
           last_post = greatest(r.last_post, to_timestamp(d.last_post)),
           completion = CASE WHEN r.parts_expected + d.parts > 0
                             THEN least(100.0, 100.0 * (r.parts_seen + d.fragments)
                                               / (r.parts_expected + d.parts)) ELSE 0 END,
           gathered_at = now()
      FROM target d
     WHERE r.ctid = d.tid
"""


def load_catalog(session: Session, fragments_connection: Connection, group_id: int, range_id: int,
                 batch: dict | StoredBatch, host_ids: array, batch_id: int) -> dict:
    """Files, fragments, releases, release chunks and rule counts of one batch, in bulk, and the
    releases' aggregates (what gathering computes) kept up to date as rows go in. Returns the
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
    conn = session.connection().connection.driver_connection  # psycopg, for COPY
    with conn.cursor() as cur, fragments_connection.connection.driver_connection.cursor() as fragment_cur:
        # No JIT for the store's statements: PostgreSQL compiles one it prices high, and these are
        # short bulk ones (a look-up or update of a few thousand keys) where compiling costs tens
        # of ms and saves less. For both transactions, to their end.
        cur.execute(NO_JIT)
        fragment_cur.execute(NO_JIT)
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
                # fall back on (_PendingCopy's savepoint and kept payload are for the keyed tables).
                fragment_rows = fragment_slices(fragment_table, hosts.locals, host_column(hosts.numbers, host_ids))
                fragments = StreamedCopy(
                    fragment_cur, FRAGMENT_COPY.format(table=f'"{partition_name("fragments", group_id)}"'),
                    _packed(stored, "fragments", fragment_rows))
        try:
            files, releases = stored.table("files"), stored.table("releases")
            file_keys, file_releases, release_keys = files["key"], files["release"], releases["key"]
            _check_keys(stored, file_keys, file_releases, release_keys)
            known_files, known_releases = _known_keys(cur, group_id, file_keys, file_releases, release_keys)
            # While the server stores the fragments: the other tables' rows.
            others = _OtherRows(files, releases, stored.table("release_chunks"), known_files, known_releases,
                                group_id, range_id, stored.field("first"), stored.raw_text)
            # While the server stores the files: the rest of the batch, checked.
            others.store(cur, meanwhile=stored.whole)
            batch = stored.whole()  # checked meanwhile above: kept from then
            others.update_known_releases(cur)
            cur.executemany(
                "INSERT INTO rule_counts (range_id, batch_from, rule, group_id, releases, files, fragments, bytes)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(range_id, batch["first"], rule, group_id, *counts) for rule, counts in batch["rules"].items()],
            )
        except BaseException as exc:
            try:
                if fragments is not None:
                    fragments.abort(exc)
            except Exception as ended:  # the COPY's own end: the error that brought us here counts
                log.warning("fragments COPY ended with %s while failing on %s", ended, exc)
            if isinstance(exc, (struct.error, TypeError, AttributeError)):
                check_batch(stored.whole())  # says which column, when a value is past 32 bits
                raise MalformedBatch(f"malformed batch: a value does not fit its column ({exc})") from None
            raise
        if fragments is not None:
            fragments.finish()
    return batch


def _engine_of(session: Session) -> Engine:
    bind = session.get_bind()
    return getattr(bind, "engine", bind)


def gather_batch(session: Session, batch_id: int) -> int | None:
    """Gather the releases a stored batch touched and mark it gathered; None when there was
    nothing to do (not stored yet, or gathered already). Returns how many releases were updated.

    The store keeps releases up to date itself and marks its batches gathered; this is for
    batches stored by an earlier version (or put back to 'stored' by an operator), and repairs
    the releases it names by recomputing them whole."""
    row = session.scalar(
        select(SeedBatch).where(SeedBatch.id == batch_id).with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None or row.state != "stored":
        return None
    group_id = session.scalar(select(SeedRange.group_id).where(SeedRange.id == row.range_id))
    updated = gather_releases(session, group_id, row.release_keys or [])
    row.state = "gathered"
    row.release_keys = None
    return updated


def gather_releases(session: Session, group_id: int, release_keys: list[int]) -> int:
    """Recompute the aggregates of these releases from every batch that saw them, so releases
    split over batches, ranges and nodes come out whole. Returns how many were updated.

    The store keeps releases up to date itself; this repairs (a batch put back to 'stored' by an
    operator). It scans the group's files partition: no index serves files by release (nothing
    on the hot path reads them so). The rows are locked first (in key order), and the sums read
    by the next statement: its snapshot then holds every batch that added to them before (the
    store adds under the same row locks), so no addition is lost between reading and writing."""
    if not release_keys:
        return 0
    params = {"g": group_id, "keys": sorted(set(release_keys))}
    session.execute(text(
        "SELECT 1 FROM releases WHERE group_id = :g AND key = ANY(:keys) ORDER BY key FOR UPDATE"), params)
    result = session.execute(
        text(
            """
            WITH chunk AS (
                SELECT release_key, sum(fragments) AS fragments, sum(bytes) AS bytes,
                       min(first_post) AS first_post, max(last_post) AS last_post
                  FROM release_chunks WHERE group_id = :g AND release_key = ANY(:keys)
                 GROUP BY release_key),
            file AS (
                SELECT release_key, count(*) AS files, coalesce(sum(parts), 0) AS parts
                  FROM files WHERE group_id = :g AND release_key = ANY(:keys)
                 GROUP BY release_key)
            UPDATE releases r
               SET files_seen = file.files, parts_expected = file.parts, parts_seen = chunk.fragments,
                   bytes = chunk.bytes, first_post = chunk.first_post, last_post = chunk.last_post,
                   completion = CASE WHEN file.parts > 0
                                     THEN least(100.0, 100.0 * chunk.fragments / file.parts) ELSE 0 END,
                   gathered_at = now()
              FROM chunk JOIN file USING (release_key)
             WHERE r.group_id = :g AND r.key = chunk.release_key
            """
        ),
        params,
    )
    return result.rowcount


def record_failure(session: Session, batch_id: int, error: str, max_attempts: int) -> str:
    """Count a failed attempt; after max_attempts the batch is 'failed' (a poison batch, shown
    in status with its error) and no longer retried. Returns the batch's state."""
    row = session.get(SeedBatch, batch_id, with_for_update=True)
    if row is None or row.state != "accepted":
        return row.state if row else "unknown"
    row.attempts += 1
    row.error = error[:2000]
    if row.attempts >= max_attempts:
        row.state = "failed"
    return row.state


def pending_batches(session: Session, older_than_seconds: int, limit: int = 1000) -> dict[str, list[int]]:
    """Batches not stored or not gathered after a while, by state: their task was lost (Redis
    down, a worker died)."""
    rows = session.execute(text(
        "SELECT id, state FROM seed_batches WHERE state IN ('accepted', 'stored')"
        " AND coalesce(stored_at, accepted_at) < now() - make_interval(secs => :age) ORDER BY id LIMIT :limit"
    ), {"age": older_than_seconds, "limit": limit})
    found: dict[str, list[int]] = {"accepted": [], "stored": []}
    for batch_id, state in rows:
        found[state].append(batch_id)
    return found


def retry_failed(session: Session) -> list[int]:
    """Failed (poison) batches back to accepted with fresh attempts, for an operator's retry."""
    return list(session.scalars(text(
        "UPDATE seed_batches SET state = 'accepted', attempts = 0 WHERE state = 'failed' RETURNING id"
    )))
