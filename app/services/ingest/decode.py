"""A batch's body decoded and checked: whole by the API before it accepts the batch
(check_body), table by table by the store (StoredBatch), so the store's COPYs start early.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping
from itertools import compress, repeat
from operator import is_not
from typing import Any, TypedDict, cast

import msgpack

from app.config import get_settings
from app.services.ingest.checks import (
    INT32_COLUMNS,
    MAX_CHUNKS,
    MAX_REJECT_REASONS,
    MAX_RULE_NAME,
    MAX_RULES,
    TABLE_NAMES,
    BatchBodyTooLarge,
    BatchHeader,
    Column,
    DecodedBatch,
    MalformedBatch,
    Table,
    TableName,
    check_batch,
    check_text_lengths,
    encodes_as_utf8,
    max_missing_spans,
)
from app.services.ingest.hosts import MessageHosts, split_message_ids
from edge.digest.batch import (
    BATCH_KEYS,
    GZIP,
    JSON_TYPE,
    MAX_DECODED,
    MSGPACK_TYPES,
    TABLES,
    BatchError,
    BatchTooLarge,
    check_table,
    decode_batch,
    validate_batch,
)
from edge.digest import namecolumns
from edge.digest.compiled import load as load_compiled
from edge.digest.deflate import ERRORS as GZIP_ERRORS
from edge.digest.deflate import gunzipper

# Built by setup.py where a C compiler is at hand (SEED_IMPL chooses); else the fragments are read by msgpack.
_msgcolumns = load_compiled("app.services._msgcolumns")
# What a body can fail to be read by parts with: then it is decoded whole, which says what is wrong.
_UNREADABLE: tuple[type[Exception], ...] = (ValueError, TypeError, msgpack.UnpackException, *GZIP_ERRORS)


def check_body(body: bytes, content_type: str, content_encoding: str, max_decoded: int) -> BatchHeader:
    """Decode and check a posted body whole, as the store will read it (413 too large, 400
    malformed): the format, the fragments' values included, and check_batch."""
    try:
        stored = StoredBatch(body, content_type, content_encoding, max_decoded=max_decoded)
        stored.check_fragments()
        batch = stored.decoded(int32=True)  # check_batch included
        return BatchHeader(
            batch_from=batch["first"], batch_to=batch["last"], group=batch["group"], rules=tuple(batch["rules"])
        )
    except BatchTooLarge as exc:
        raise BatchBodyTooLarge(str(exc)) from None
    except BatchError as exc:
        raise MalformedBatch(str(exc)) from None


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

    _body: bytes | None  # None: given decoded and checked (of())

    def __init__(self, body: bytes, content_type: str, content_encoding: str | None, max_decoded: int | None = None):
        """max_decoded: the API's limit (BatchTooLarge past it); the store's is never below it."""
        self._body, self._content_type, self._content_encoding = body, content_type, content_encoding
        self._cap = max_decoded or _decoded_cap()
        # The body read by parts (a msgpack map), else None and the batch decoded whole (_batch).
        self._data: memoryview | None = None
        self._spans: dict[str, tuple[int, int]] = {}  # where each of its values is
        self._columns: dict[str, dict[str, tuple[int, int]]] = {}  # and each column of its tables
        self._tables: dict[str, Table] = {}
        self._batch: DecodedBatch | None = None
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
                        columns: dict[str, tuple[int, int]] = {}
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
            except _UNREADABLE:
                pass  # decoded whole below, which says what is wrong
        if self._data is not None:
            self._refuse_lists_past_the_span(self._data)
        else:
            if media_type == JSON_TYPE and encoding in (GZIP, "identity"):
                body, content_encoding = self._refuse_json_past_its_arrays(body, encoding), "identity"
            # validate_batch (in decode_batch) checked it has DecodedBatch's structure.
            self._batch = cast(
                "DecodedBatch", decode_batch(body, content_type, content_encoding, max_decoded=self._cap)
            )
            _text_without_nul(self._batch)
            check_batch(self._batch)

    def _refuse_json_past_its_arrays(self, body: bytes, encoding: str) -> bytes:
        """A JSON body, inflated, when it has no more arrays than a batch of the data center's size
        can (json.loads makes every one before anything can be checked: five million missing spans
        in 130 KB of gzip would take 600 MB). Each '[' counts, those in strings too: a batch's
        arrays are its columns, chunks, rules and missing spans (at most one a line and chunk),
        and its files' subjects hold a few brackets each (a file has one subject, and a line at most one file)."""
        try:
            data = _gunzip(body, self._cap) if encoding == GZIP else body
        except BatchTooLarge:
            raise
        except GZIP_ERRORS as exc:
            raise MalformedBatch(f"malformed batch: corrupt gzip body: {exc}") from None
        except ValueError as exc:
            raise MalformedBatch(f"malformed batch: {exc}") from None
        settings = get_settings()
        most = 4 * settings.chunk_size * settings.batch_chunks + 100_000
        if data.count(b"[") > most:
            raise MalformedBatch(f"malformed batch: a JSON body holds at most {most} arrays ('[', in strings too)")
        return data

    def _refuse_lists_past_the_span(self, data: memoryview) -> None:
        """Before a list of the body is decoded: none is longer than the batch's span allows. A
        batch's chunks and missing spans are in order and disjoint, each of at least one article,
        and each row of its tables is an article of it or belongs to one (a file to its fragments,
        a release to its files), so none has more items than first..last has articles; nor does
        it count more rules than MAX_RULES. A body that says more is refused here, from the lists'
        headers, before it costs the Python objects of its items."""
        head: dict[str, object] = {}
        for key in ("version", "group", "first", "last"):
            try:
                head[key] = msgpack.unpackb(data[slice(*self._spans[key])])
            except (KeyError, ValueError, TypeError, msgpack.UnpackException):
                pass
        first, last = head.get("first"), head.get("last")
        if type(first) is not int or type(last) is not int or first > last:
            validate_batch(head)  # says what is wrong with them, as the whole check would
            raise MalformedBatch("malformed batch: first and last must be integers, first <= last")
        span = last - first + 1
        lists: list[tuple[str, tuple[int, int]]] = [
            (key, self._spans[key]) for key in ("chunks", "missing") if key in self._spans
        ]
        lists += [
            (f"{table}.{column}", where)
            for table, columns in self._columns.items()
            for column, where in columns.items()
        ]
        for name, (start, _) in lists:
            if _header_length(data, start, msgpack.Unpacker.read_array_header) > span:
                raise MalformedBatch(f"malformed batch: {name} holds more items than first..last has articles")
        if (
            "rules" in self._spans
            and _header_length(data, self._spans["rules"][0], msgpack.Unpacker.read_map_header) > MAX_RULES
        ):
            raise MalformedBatch(f"malformed batch: a batch counts at most {MAX_RULES} rules")
        # The chunks (a few), then the missing spans they leave room for (a span can be as long as
        # the batch, so first..last bounds their count by nothing).
        if "chunks" in self._spans and "missing" in self._spans:
            if _header_length(data, self._spans["chunks"][0], msgpack.Unpacker.read_array_header) > MAX_CHUNKS:
                raise MalformedBatch(f"malformed batch: a batch has at most {MAX_CHUNKS} chunks")
            try:
                room = max_missing_spans(self._unpack("chunks"))
            except (TypeError, IndexError, KeyError):
                raise MalformedBatch("malformed batch: chunks must be [first, last, lines, rejected] lists") from None
            if _header_length(data, self._spans["missing"][0], msgpack.Unpacker.read_array_header) > room:
                raise MalformedBatch("malformed batch: missing holds more spans than its chunks' lines leave room for")

    @classmethod
    def of(cls, batch: DecodedBatch) -> StoredBatch:
        """A batch decoded and checked already (check_batch included)."""
        stored = cls.__new__(cls)
        stored._body, stored._batch, stored.raw_text, stored._hosts = None, batch, False, None
        return stored

    def table(self, name: TableName) -> Table:
        """A table of the batch, its structure checked (columns, lengths), not its values (the
        fragments' values too, when read in C: see _read_checked)."""
        if self._batch is not None:
            return self._batch[name]
        if name not in self._tables:
            kinds = TABLES[name]
            in_c = (
                name == "fragments"
                and _msgcolumns is not None
                and name in self._columns
                and set(self._columns[name]) == set(kinds)
            )  # else refused below, as it is
            # Column by column: between two, the COPY writers' threads get their turn.
            table: object  # checked below
            if in_c:
                table = {
                    column: self._read_checked(name, column, span, kinds.get(column, ""))
                    for column, span in self._columns[name].items()
                }
            elif name in self._columns:
                table = {
                    column: self._unpack(name, span, raw=kinds.get(column, "").startswith("str"))
                    for column, span in self._columns[name].items()
                }
            else:
                table = self._unpack(name)
            if (
                not isinstance(table, dict)
                or set(table) != set(kinds)
                or not all(type(column) in (list, array) for column in table.values())
                or len(set(map(len, table.values()))) != 1
            ):
                self.raise_if_malformed()
                raise MalformedBatch(f"malformed batch: {name} is not a table of the columns {', '.join(kinds)}")
            if name in self._columns and not in_c:
                for column, kind in kinds.items():
                    if kind.startswith("str"):
                        self._check_text(name, column, table[column], nullable=kind.endswith("?"))
            self._tables[name] = table
        return self._tables[name]

    def decoded(self, int32: bool = False) -> DecodedBatch:
        """The whole batch, checked as the API checked it (the fragments' values aside, see the
        class's doc); int32: check_batch's 32-bit columns too (else left to the COPY's packing)."""
        if self._batch is None:
            for name in TABLE_NAMES:
                self.table(name)
            # Keys the format does not know are left undecoded (validate_batch ignores them), and
            # release_names is decoded within what the releases' count allows.
            batch: dict[str, Any] = {
                key: self._tables[key] if key in self._tables else self._unpack(key, limits=self._limits(key))
                for key in self._spans
                if key in BATCH_KEYS
            }
            # The fragments' columns as empty lists (their values are checked as they are packed),
            # the text as empty strings (checked as bytes by table()).
            shapes = {
                name: {
                    column: [""] * len(values) if TABLES[name][column].startswith("str") else values
                    for column, values in batch[name].items()
                }
                for name in TABLES
                if name != "fragments"
            }
            validate_batch({**batch, **shapes, "fragments": {column: [] for column in TABLES["fragments"]}})
            # Its structure is DecodedBatch's: validate_batch checked it, its tables' by table().
            checked = cast("DecodedBatch", batch)
            check_batch(checked, int32=int32)  # else: the COPY packs those columns as int4, refusing them
            self._batch = checked
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
        check_table("fragments", {**fragments, "message_id": [""] * len(fragments["message_id"])}, TABLES["fragments"])

    def message_hosts(self) -> MessageHosts:
        """The fragments' message-ids cut as the catalog stores them (split_message_ids), once."""
        if self._hosts is None:
            self._hosts = split_message_ids(self.table("fragments")["message_id"])
        return self._hosts

    def field(self, key: str) -> Any:
        """One of the batch's values outside the tables (first, last, group...), its type unchecked."""
        if self._batch is not None:
            batch: Mapping[str, Any] = self._batch
            return batch[key]
        return self._unpack(key)

    def _check_text(self, table: str, column: str, values: Column, nullable: bool) -> None:
        """A text column as bytes (msgpack strings, undecoded): each value UTF-8 without NUL, as
        the catalog's text holds it; NULLs only where the format allows them. One pass: joined
        with NUL between the values, a NUL inside one shows as one too many, and a character
        cut between two values as invalid UTF-8."""
        present = list(compress(values, map(is_not, values, repeat(None)))) if nullable else values
        try:
            joined = b"\0".join(present)
        except TypeError:
            bad = True
        else:
            bad = joined.count(b"\0") != max(len(present) - 1, 0)
            if not bad and not joined.isascii():
                try:
                    joined.decode("utf-8")
                except UnicodeDecodeError:
                    bad = True
        if bad:
            self.raise_if_malformed()
            raise MalformedBatch(f"malformed batch: {table}.{column} must hold UTF-8 strings without NUL")
        check_text_lengths(table, column, present)

    def _read_checked(
        self, table: TableName, column: str, span: tuple[int, int], kind: str
    ) -> array[int] | list[bytes]:
        """A column of a table without NULLs, read and its values checked in C (_msgcolumns.c):
        integers as an array ('i' for the catalog's 32-bit columns), text as its UTF-8 bytes."""
        start, end = span
        data = self._data
        assert _msgcolumns is not None and data is not None  # table() reads in C the body read by parts
        try:
            if kind == "int":
                ints: array[int] = _msgcolumns.ints(
                    data, start, end, 32 if column in INT32_COLUMNS.get(table, ()) else 64
                )
                return ints
            if kind == "str":
                values: list[bytes] = _msgcolumns.texts(data, start, end, True)
                check_text_lengths(table, column, values)
                return values
        except ValueError as exc:
            self.raise_if_malformed()  # says what is wrong as the API would
            raise MalformedBatch(f"malformed batch: {table}.{column} {exc}") from None
        raise ValueError(f"{table}.{column} is not read in C")

    def _limits(self, key: str) -> _Limits:
        """What msgpack may decode of the value of this key outside the tables (see _LIMITS)."""
        if key == "release_names":  # a column a release, and the version
            return {
                "max_map_len": len(namecolumns.COLUMNS) + 1,
                "max_array_len": len(self.table("releases")["key"]),
                "max_str_len": 4 * namecolumns.MAX_TEXT,
                "max_bin_len": 0,
            }
        return _LIMITS.get(key, {})

    def _unpack(
        self, key: str, span: tuple[int, int] | None = None, raw: bool = False, limits: _Limits | None = None
    ) -> Any:
        """A value of the body read by parts (msgpack's, its type unchecked), within limits (else
        _LIMITS's for the key)."""
        data = self._data
        assert data is not None  # read by parts only when not decoded whole (see __init__)
        if span is None and key not in self._spans:
            self.raise_if_malformed()
            raise MalformedBatch(f"malformed batch: no {key}")
        start, end = span or self._spans[key]
        try:
            return msgpack.unpackb(data[start:end], raw=raw, **(_LIMITS.get(key, {}) if limits is None else limits))
        except ValueError as exc:
            if "exceeds max_" in str(exc):  # past a bound of _LIMITS: said at once, never decoded whole
                raise MalformedBatch(f"malformed batch: {key} holds more than a batch can ({exc})") from None
            self.raise_if_malformed()
            raise MalformedBatch(f"malformed batch: undecodable {key}") from None
        except (TypeError, msgpack.UnpackException, RecursionError):
            self.raise_if_malformed()
            raise MalformedBatch(f"malformed batch: undecodable {key}") from None

    def raise_if_malformed(self) -> None:
        """Decode and check the body whole, raising what is wrong with it as the API would. A
        caller that found something wrong raises its own error when this finds nothing."""
        if self._body is None:  # given decoded and checked
            return
        batch = decode_batch(self._body, self._content_type, self._content_encoding, max_decoded=self._cap)
        check_batch(cast("DecodedBatch", batch))  # validate_batch (in decode_batch) checked its structure


# What the small maps of a batch may hold, checked by msgpack as it decodes them: a map of a few
# million keys is refused before it costs their objects (the rest is bounded by _refuse_lists...).
class _Limits(TypedDict, total=False):
    max_map_len: int
    max_array_len: int
    max_str_len: int
    max_bin_len: int


_LIMITS: dict[str, _Limits] = {
    "stats": {"max_map_len": MAX_REJECT_REASONS, "max_array_len": 0, "max_str_len": MAX_RULE_NAME},
    "rules": {"max_map_len": MAX_RULES, "max_array_len": 4, "max_str_len": 4 * MAX_RULE_NAME},
    "chunks": {"max_array_len": MAX_CHUNKS},
}


def _text_without_nul(batch: DecodedBatch) -> None:
    """A decoded batch's text holds no NUL (PostgreSQL's text cannot) and encodes as UTF-8 (a
    JSON body may hold a lone surrogate); StoredBatch.table checks the undecoded text of a
    msgpack body itself."""
    for table in TABLE_NAMES:
        for column, kind in TABLES[table].items():
            if kind.startswith("str"):
                text = "".join(filter(None, batch[table][column]))
                if "\0" in text or not encodes_as_utf8(text):
                    raise MalformedBatch(f"malformed batch: {table}.{column} must hold UTF-8 strings without NUL")
                check_text_lengths(table, column, [v for v in batch[table][column] if v is not None])


def _header_length(data: memoryview, start: int, read_header: Callable[[msgpack.Unpacker], int]) -> int:
    """The item count of the msgpack array or map at start (read_header says which), read from its
    header alone; 0 when it is none (the checks that follow say what is wrong with it)."""
    unpacker = msgpack.Unpacker()
    unpacker.feed(data[start : start + 5])  # a header is at most 5 bytes
    try:
        return read_header(unpacker)
    except (ValueError, msgpack.UnpackException):
        return 0


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
