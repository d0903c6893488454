"""The batch codec: msgpack or JSON, each optionally gzip, both directions.

The batch itself is the plain dict of docs/batch-format.md (built by edge.digest.gather), typed as
:class:`Batch` (TypedDicts: at run time still plain dicts, as msgpack and JSON write them). Decoding is
for the data center: it refuses a body whose decoded size passes the cap without inflating more
than the cap (a gzip bomb), and checks the structure, so the API can answer 413 for
:class:`BatchTooLarge` and 400 for :class:`BatchFormatError`.
"""

from __future__ import annotations

import builtins
import json
import threading
from array import array
from dataclasses import dataclass
from itertools import compress, repeat
from operator import is_not
from typing import TYPE_CHECKING, Any, NoReturn, NotRequired, TypedDict, cast

import msgpack

from edge.digest import namecolumns
from edge.digest.deflate import ERRORS as GZIP_ERRORS
from edge.digest.deflate import gunzipper, gzip

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

MSGPACK_TYPE = "application/msgpack"
JSON_TYPE = "application/json"
MSGPACK_TYPES = (MSGPACK_TYPE, "application/x-msgpack", "application/vnd.msgpack")
GZIP = "gzip"
MAX_DECODED = 256 * 1024 * 1024
# Fast beats small here: with zlib, level 1 costs a sixth of level 6's time for a few percent
# more bytes, and ISA-L's level 1 is faster again (edge/digest/deflate.py, bench/digest.py).
GZIP_LEVEL = 1
FORMAT_VERSION = 1
INT64 = (-(2**63), 2**63 - 1)
_NONE = type(None)


class BatchError(ValueError):
    """A batch body that cannot be accepted."""


class BatchTooLarge(BatchError):
    """The body, decoded, is larger than allowed (HTTP 413)."""


class BatchFormatError(BatchError):
    """The body is not a batch of the documented format (docs/batch-format.md; HTTP 400). The data
    center answers it as its own app.services.ingest.checks.MalformedBatch."""


# The batch as Gatherer.build() makes it (docs/batch-format.md, "The dict"). The rows of chunks and
# missing and each rule's counts are lists read by position, as msgpack and JSON write them (arrays):
ChunkRow = list[int]  # [from, to, lines, rejected]
MissingRun = list[int]  # [from, to]
RuleCounts = list[int]  # [releases, files, fragments, bytes]


class BatchStats(TypedDict):
    """A batch's "stats": lines received, lines rejected by reason, kept files with an unreadable Date."""

    lines: int
    rejected: dict[str, int]
    bad_dates: int


# The column tables (TABLES below says the same, for the checks): one list per column, row i the
# i-th item of each.
class FilesTable(TypedDict):
    key: list[int]
    release: list[int]
    name: list[str | None]
    subject: list[str]
    poster: list[str]
    date: list[int | None]
    index: list[int | None]
    count: list[int | None]
    parts: list[int]


class FragmentsTable(TypedDict):
    file: list[int]
    part: list[int]
    article: list[int]
    bytes: list[int]
    message_id: list[builtins.bytes]  # UTF-8, until encoding writes them as strings (a decoded batch has str)


class ReleasesTable(TypedDict):
    key: list[int]
    name: list[str]
    poster: list[str]
    file_count: list[int | None]


class ReleaseChunksTable(TypedDict):
    release: list[int]
    files: list[int]
    fragments: list[int]
    bytes: list[int]
    first_date: list[int | None]
    last_date: list[int | None]


class BatchTables(TypedDict):
    files: FilesTable
    fragments: FragmentsTable
    releases: ReleasesTable
    release_chunks: ReleaseChunksTable


class Batch(BatchTables):
    """One batch, as built (edge.digest.gather.Gatherer.build) and encoded (encode_batch). A decoded
    batch (decode_batch) is the same structure with every text a str; the data center reads it as
    the dict msgpack made."""

    version: int
    group: str
    first: int
    last: int
    chunks: list[ChunkRow]
    missing: list[MissingRun]
    rules: dict[str, RuleCounts]  # rule name ('' for what stayed) -> its counts
    stats: BatchStats
    # What each release's name gives its post (edge.digest.namecolumns), in the releases' order.
    release_names: NotRequired[namecolumns.ReleaseNames]


def encode_batch(batch: Batch, fmt: str = "msgpack", gzip: bool = True) -> tuple[bytes, str, str | None]:
    """(body, Content-Type, Content-Encoding or None).

    Text may be given as str or as UTF-8 bytes (the gatherer leaves message-ids as bytes): both
    are written as strings, and decode as str.
    """
    if fmt == "msgpack":
        return _msgpack(batch, gzip), MSGPACK_TYPE, GZIP if gzip else None
    if fmt == "json":
        body = json.dumps(
            batch, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_bytes_as_text
        ).encode("utf-8")
        content_type = JSON_TYPE
    else:
        raise ValueError(f"unknown batch format {fmt!r}: msgpack or json")
    return (_gzip(body) if gzip else body), content_type, GZIP if gzip else None


@dataclass(frozen=True)
class EncodedBatch:
    """A batch as posted: its body, and what the node says of it (and counts) once it is taken."""

    body: bytes
    content_type: str
    encoding: str | None
    group: str
    first: int
    last: int
    missing: int  # how many articles the batch lists as missing
    stats: BatchStats  # the batch's "stats", which the node reports

    @classmethod
    def of(cls, batch: Batch, fmt: str = "msgpack") -> EncodedBatch:
        body, content_type, encoding = encode_batch(batch, fmt)
        return cls(
            body,
            content_type,
            encoding,
            batch["group"],
            batch["first"],
            batch["last"],
            sum(b - a + 1 for a, b in batch["missing"]),
            batch["stats"],
        )

    @property
    def lines(self) -> int:
        return self.stats["lines"]


def _gzip(data: ReadableBuffer) -> bytes:
    return gzip(data, GZIP_LEVEL)


# One msgpack packer kept for the process, its buffer with it: a batch packs to some 13 MB, and a
# new buffer of that size costs its page faults again every time (an eighth of the encoding). A
# thread that finds it taken packs the usual way; a buffer grown past _PACKER_KEPT_MAX is let go,
# so at most twice that stays (about 16 MB for the usual batch).
_packer: msgpack.Packer | None = None
_packer_lock = threading.Lock()
_PACKER_KEPT_MAX = 32 * 1024 * 1024


def clear_packer() -> None:
    """Lets the kept packer's buffer go: the next batch is packed as in a new process."""
    global _packer
    with _packer_lock:
        _packer = None


def _msgpack(batch: Batch, gzip: bool) -> bytes:
    """msgpack (bytes packed as msgpack str, like str: no bin type), maybe gzip."""
    global _packer
    if not _packer_lock.acquire(blocking=False):
        body = msgpack.packb(batch, use_bin_type=False)
        return _gzip(body) if gzip else body
    try:
        if _packer is None:
            _packer = msgpack.Packer(use_bin_type=False, autoreset=False)
        packer = _packer
        packer.reset()  # also after a pack that failed part way
        packer.pack(batch)
        with packer.getbuffer() as packed:
            body = _gzip(packed) if gzip else bytes(packed)
            if len(packed) > _PACKER_KEPT_MAX:
                _packer = None
        return body
    finally:
        _packer_lock.release()


def _bytes_as_text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    raise TypeError(f"{type(value).__name__} is not a batch value")


def decode_batch(
    body: bytes, content_type: str, content_encoding: str | None = None, max_decoded: int = MAX_DECODED
) -> dict[str, Any]:
    """The batch of a request body; raises BatchTooLarge or BatchFormatError. It has the structure
    of :class:`Batch` (validate_batch), as the dict msgpack or JSON made of it."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == GZIP:
        data = _gunzip(body, max_decoded)
    elif encoding == "identity":
        if len(body) > max_decoded:
            raise BatchTooLarge(f"body of {len(body)} bytes is over the {max_decoded} byte limit")
        data = body
    else:
        raise BatchFormatError(f"unsupported Content-Encoding {content_encoding!r}: gzip or none")
    try:
        if media_type in MSGPACK_TYPES:
            batch = msgpack.unpackb(data, raw=False)
        elif media_type == JSON_TYPE:
            batch = json.loads(data, parse_constant=_reject_constant)
        else:
            raise BatchFormatError(f"unsupported Content-Type {content_type!r}: {MSGPACK_TYPE} or {JSON_TYPE}")
    except BatchError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        raise BatchFormatError(f"undecodable {media_type} body: {exc}") from exc
    return validate_batch(batch)


def _gunzip(body: bytes, max_decoded: int) -> bytes:
    """Inflates at most max_decoded + 1 bytes: enough to know a body is too large."""
    inflater = gunzipper()
    try:
        data = inflater.decompress(body, max_decoded + 1)
    except GZIP_ERRORS as exc:
        raise BatchFormatError(f"corrupt gzip body: {exc}") from exc
    if len(data) > max_decoded or inflater.unconsumed_tail:
        raise BatchTooLarge(f"body inflates past the {max_decoded} byte limit")
    if not inflater.eof:
        raise BatchFormatError("truncated gzip body")
    if inflater.unused_data:
        raise BatchFormatError("data after the gzip stream")
    return data


def _reject_constant(name: str) -> NoReturn:
    raise BatchFormatError(f"{name} is not a number a batch can hold")


# The column tables, each as name -> (column -> kind). The kinds are "int" (64-bit), "int?" (an int
# or null), "str" and "str?" (a str or null).
TABLES = {
    "files": {
        "key": "int",
        "release": "int",
        "name": "str?",
        "subject": "str",
        "poster": "str",
        "date": "int?",
        "index": "int?",
        "count": "int?",
        "parts": "int",
    },
    "fragments": {"file": "int", "part": "int", "article": "int", "bytes": "int", "message_id": "str"},
    "releases": {"key": "int", "name": "str", "poster": "str", "file_count": "int?"},
    "release_chunks": {
        "release": "int",
        "files": "int",
        "fragments": "int",
        "bytes": "int",
        "first_date": "int?",
        "last_date": "int?",
    },
}


# The keys of a batch (Batch's): a decoder may leave any other undecoded.
BATCH_KEYS = frozenset(Batch.__annotations__)


def validate_batch(batch: object) -> dict[str, Any]:
    """The batch if it has the documented structure and value types, else BatchFormatError."""
    if not isinstance(batch, dict):
        raise BatchFormatError("a batch is a map")
    # Exactly the int 1: Python's equality would take true and 1.0 for it.
    if type(batch.get("version")) is not int or batch["version"] != FORMAT_VERSION:
        raise BatchFormatError(f"unsupported batch version {batch.get('version')!r}")
    if not isinstance(batch.get("group"), str) or not batch["group"]:
        raise BatchFormatError("group must be a non-empty string")
    _check_ints("first/last", [batch.get("first"), batch.get("last")])
    if batch["first"] > batch["last"]:
        raise BatchFormatError("first is after last")
    for name, width in (("chunks", 4), ("missing", 2)):
        rows = batch.get(name)
        if not isinstance(rows, list) or not all(isinstance(row, list) and len(row) == width for row in rows):
            raise BatchFormatError(f"{name} must be a list of [{width} integers]")
        _check_ints(name, [value for row in rows for value in row])
    for table, columns in TABLES.items():
        check_table(table, batch.get(table), columns)
    rules = batch.get("rules")
    if not isinstance(rules, dict) or "" not in rules:
        raise BatchFormatError("rules must be a map with the '' (kept) entry")
    for name, counts in rules.items():
        if not isinstance(name, str) or not isinstance(counts, list) or len(counts) != 4:
            raise BatchFormatError("each rule count is [releases, files, fragments, bytes]")
        _check_ints("rules", counts)
    stats = batch.get("stats")
    if not isinstance(stats, dict) or not isinstance(stats.get("rejected"), dict):
        raise BatchFormatError("stats must be a map with a rejected map")
    _check_ints("stats", [stats.get("lines"), stats.get("bad_dates"), *stats["rejected"].values()])
    if "release_names" in batch:
        try:
            namecolumns.check(batch["release_names"], len(batch["releases"]["key"]))
        except namecolumns.ReleaseNamesError as exc:
            raise BatchFormatError(str(exc)) from None
    return batch


def check_table(table: str, value: object, columns: dict[str, str]) -> None:
    """One column table of a batch: its columns, their lengths and their values' kinds (TABLES)."""
    if not isinstance(value, dict) or set(value) != set(columns):
        raise BatchFormatError(f"{table} must be a map of the columns {', '.join(columns)}")
    lengths = {len(column) if isinstance(column, list) else -1 for column in value.values()}
    if len(lengths) != 1 or -1 in lengths:
        raise BatchFormatError(f"{table} columns must be lists of one length")
    for name, kind in columns.items():
        column = value[name]
        # Batches hold some 200,000 fragments, checked by the API and again by the worker, so each
        # value is looked at (a cache miss each time) as few times as can be, in C. Types are
        # exact: a bool is not an int here.
        wanted = int if kind.startswith("int") else str
        types = list(map(type, column))
        if types.count(wanted) != len(types):
            if not kind.endswith("?") or types.count(wanted) + types.count(_NONE) != len(types):
                raise BatchFormatError(f"{table}.{name} must hold {'integers' if wanted is int else 'strings'}")
            if wanted is int:
                column = list(compress(column, map(is_not, column, repeat(None))))
        if wanted is int:
            _check_int64(f"{table}.{name}", column)


def _check_ints(where: str, values: list[object]) -> None:
    if list(map(type, values)).count(int) != len(values):
        raise BatchFormatError(f"{where} must hold integers")
    _check_int64(where, cast("list[int]", values))  # each value's type is exactly int (just checked)


def _check_int64(where: str, values: list[int]) -> None:
    try:
        array("q", values)  # checks in one pass, at C speed, that every int fits in 64 signed bits
    except OverflowError:
        raise BatchFormatError(f"{where} holds an integer outside 64 bits") from None
