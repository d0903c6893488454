"""What the data center checks of a batch beyond its format, at the door and again in the store:
the batch covers its span with its chunks, its rows fit the catalog's columns, its keys come
once, its tables are one batch's catalog and its counts are theirs, each within the bounds that
keep every sum the catalog makes of accepted batches in its column. The errors here are what the
API answers with.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import lt
from typing import TYPE_CHECKING, Any, Literal, NoReturn, NotRequired, TypedDict

from app.services.errors import ServiceError
from edge.digest.batch import TABLES
from edge.digest.compiled import load as load_compiled
from edge.digest.overview import MAX_ARTICLE_BYTES as OVERVIEW_MAX_ARTICLE_BYTES
from edge.digest.overview import MAX_MESSAGE_ID_BYTES, MAX_TEXT_BYTES

if TYPE_CHECKING:
    from edge.digest.batch import BatchStats, ChunkRow, MissingRun, RuleCounts
    from edge.digest.namecolumns import ReleaseNames

# Built by setup.py where a C compiler is at hand (SEED_IMPL chooses); else the columns are checked in Python.
_msgcolumns = load_compiled("app.services._msgcolumns")

# A batch's tables, as edge.digest.batch.TABLES names them (in its order).
TableName = Literal["files", "fragments", "releases", "release_chunks"]
TABLE_NAMES: tuple[TableName, ...] = ("files", "fragments", "releases", "release_chunks")
assert tuple(TABLES) == TABLE_NAMES
# A column of a batch's table: values of the kind TABLES gives it (integers; text as str, or as its
# UTF-8 bytes where the body is read undecoded: StoredBatch.raw_text; None where nullable), in a
# list as msgpack or JSON made it, or an array for integers read in C (StoredBatch's fragments).
# Which kind a column holds is known from its name at run time only.
Column = Sequence[Any]
Table = dict[str, Column]


class DecodedBatch(TypedDict):
    """A batch as the data center decodes it (edge.digest.batch.decode_batch, or
    decode.StoredBatch): edge.digest.batch.Batch's structure, its tables' columns as Column. The
    rows of chunks and missing and each rule's counts are lists, read by position."""

    version: int
    group: str
    first: int
    last: int
    chunks: list[ChunkRow]  # [from, to, lines, rejected]
    missing: list[MissingRun]  # [from, to]
    rules: dict[str, RuleCounts]  # rule name ('' for what stayed) -> [releases, files, fragments, bytes]
    stats: BatchStats
    files: Table
    fragments: Table
    releases: Table
    release_chunks: Table
    release_names: NotRequired[ReleaseNames]  # edge.digest.namecolumns, checked by validate_batch


# Columns stored as PostgreSQL integer: the digest's format allows 64 bits everywhere, the
# catalog does not, so a value past 32 bits is refused at the door rather than poison a task.
INT32_COLUMNS: dict[TableName, tuple[str, ...]] = {
    "files": ("index", "count", "parts"),
    "fragments": ("part", "bytes"),
    "releases": ("file_count",),
    "release_chunks": ("files", "fragments"),
}
INT32 = (-(2**31), 2**31 - 1)
assert array("i").itemsize == 4  # check_batch's 32-bit test
# Dates the catalog's timestamptz columns hold (unix seconds: 4713 BC to 294276 AD, a margin kept).
DATE_COLUMNS: tuple[tuple[TableName, str], ...] = (
    ("files", "date"),
    ("release_chunks", "first_date"),
    ("release_chunks", "last_date"),
)
# The catalog's keys among them, each of which comes once in a batch.
KEY_COLUMNS: tuple[tuple[TableName, str], ...] = (("files", "key"), ("releases", "key"), ("release_chunks", "release"))
DATES = (-210_000_000_000, 9_000_000_000_000)
# What one article, chunk and batch can hold, as a real server sends them and a real digest counts
# them (docs/batch-format.md, "Bounds"). Everything the store and the releases' aggregates compute
# from a batch is a sum of these, so each fits its column whatever batches the catalog keeps.
INT64_MAX = 2**63 - 1
# An article's size: the digest counts a larger :bytes as a bad number (edge.digest.overview).
MAX_ARTICLE_BYTES = OVERVIEW_MAX_ARTICLE_BYTES
# A segment counter "(p/P)" has at most 9 digits (edge.digest.gather reads no longer one).
MAX_PARTS = 999_999_999
# A chunk's lines, received and rejected (the data center's spool keeps them as 32-bit integers).
MAX_CHUNK_LINES = 2**31 - 1
# A batch's chunks (BATCH_CHUNKS of them, default 10): a body that says more is refused before its
# lists are decoded. Its missing spans are at most one more than the lines its chunks received, and
# one for each chunk (the digest makes each span as long as it can within a chunk).
MAX_CHUNKS = 10_000
# The rules a batch counts (every active rule), and the reasons it counts rejected lines by.
MAX_RULES = 1_000
MAX_REJECT_REASONS = 64
# A rule's name: printable (no control, format or bidi character), at most this many characters,
# as the operator's rules are named (app.services.rules).
MAX_RULE_NAME = 200
# The longest text a batch's columns hold, in UTF-8 bytes: what the digest keeps of an overview
# line (edge.digest.overview: MAX_TEXT_BYTES for subjects and posters, MAX_MESSAGE_ID_BYTES for
# message-ids), read as Latin-1 at worst, which doubles the bytes. So every value fits
# PostgreSQL's limits: a btree index row (message-id hosts, about 2,700 bytes) and a tsvector
# (the words of a name, 1 MB).
TEXT_LIMITS = {
    ("files", "name"): 2 * MAX_TEXT_BYTES,
    ("files", "subject"): 2 * MAX_TEXT_BYTES,
    ("files", "poster"): 2 * MAX_TEXT_BYTES,
    ("releases", "name"): 2 * MAX_TEXT_BYTES,
    ("releases", "poster"): 2 * MAX_TEXT_BYTES,
    ("fragments", "message_id"): 2 * MAX_MESSAGE_ID_BYTES,
}


class MalformedBatch(ServiceError):
    """A batch the data center refuses (400 at the door; in the store, a poison batch)."""

    status = 400
    code = "malformed_batch"


class BatchBodyTooLarge(ServiceError):
    """A body that decodes past the API's limit (413)."""

    status = 413
    code = "batch_too_large"


@dataclass(frozen=True)
class BatchHeader:
    """What the API needs of a checked batch to accept it."""

    batch_from: int
    batch_to: int
    group: str
    rules: tuple[str, ...] = ()  # the rules it counts ('' included): each must be one handed out


def check_batch(batch: DecodedBatch, int32: bool = True) -> BatchHeader:
    """What the data center needs beyond the format (edge.digest.batch.validate_batch checked that):
    the batch covers first..last with its chunks, its rows fit the catalog's columns, its tables
    are one batch's catalog and its counts are those of its tables and chunks, within the bounds
    that keep every sum the catalog makes of them in its column (int32 False: the fragments'
    values are left to the store's COPY, whose packing of them as int4 refuses those past 32 bits)."""

    def bad(message: str) -> NoReturn:
        raise MalformedBatch(f"malformed batch: {message}")

    first, last = batch["first"], batch["last"]
    chunks = batch["chunks"]
    if (
        not chunks
        or chunks[0][0] != first
        or chunks[-1][1] != last
        or any(
            a_from > a_to or a_to + 1 != b_from for (a_from, a_to, _, _), (b_from, _, _, _) in zip(chunks, chunks[1:])
        )
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
    for table, columns in INT32_COLUMNS.items():
        # The fragments' (the bulk of a batch) only when int32: else left to the COPY's packing.
        for column in columns if int32 or table != "fragments" else ():
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
    if any(releases > INT32[1] or files > INT32[1] for releases, files, _, _ in batch["rules"].values()):
        bad("rule counts of releases and files must fit 32 bits")
    if any("\0" in name or not encodes_as_utf8(name) for name in batch["rules"]):
        bad("rule names must be UTF-8 strings without NUL")
    if any(len(name) > MAX_RULE_NAME or not name.isprintable() for name in batch["rules"]):
        bad(f"rule names must be printable, of at most {MAX_RULE_NAME} characters")
    # Each of the catalog's keys comes once in a batch: the digest merges repeated rows before it
    # builds the batch.
    keys: dict[str, set[int]] = {}
    for table, column in KEY_COLUMNS:
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
    _check_counts(batch, bad, fragment_values=int32)
    return BatchHeader(batch_from=first, batch_to=last, group=batch["group"], rules=tuple(batch["rules"]))


def _check_counts(batch: DecodedBatch, bad: Callable[[str], NoReturn], fragment_values: bool) -> None:
    """The batch's counts are those of its chunks and tables, and each is within its bound
    (MAX_ARTICLE_BYTES, MAX_PARTS, MAX_CHUNK_LINES...): what the store adds to its range's counts,
    its rule counts and its releases' aggregates is then what the batch really holds, and no sum
    of it passes its column (docs/batch-format.md, "Bounds"). fragment_values: the fragments'
    values are checked too (the API's check; the store leaves them to its COPY)."""
    first, last = batch["first"], batch["last"]
    span = last - first + 1
    if span > INT64_MAX:
        bad("a batch covers fewer than 2^63 articles")
    # Every article of first..last is either kept by one line of its chunk or in a missing span:
    # a chunk keeps at most one line of each of its articles (the digest rejects a repeated one).
    accepted = received = rejected_lines = 0
    for start, end, lines, rejected in batch["chunks"]:
        if not (0 <= rejected <= lines <= MAX_CHUNK_LINES):
            bad(f"a chunk's lines and rejected lines must be counts with 0 <= rejected <= lines <= {MAX_CHUNK_LINES}")
        if lines - rejected > end - start + 1:
            bad("a chunk keeps more lines than it has articles")
        accepted += lines - rejected
        received += lines
        rejected_lines += rejected
    if len(batch["chunks"]) > MAX_CHUNKS:
        bad(f"a batch has at most {MAX_CHUNKS} chunks")
    if len(batch["missing"]) > max_missing_spans(batch["chunks"]):
        bad("missing holds more spans than its chunks' lines leave room for")
    missed, after = 0, first - 1
    for a, b in batch["missing"]:
        if a <= after:
            bad("missing spans must be in order and disjoint")
        missed += b - a + 1
        after = b
    if accepted + missed != span:
        bad("the chunks' kept lines and the missing spans must count each article of first..last once")
    stats = batch["stats"]
    reasons = stats["rejected"]
    if len(reasons) > MAX_REJECT_REASONS or any(n < 0 for n in reasons.values()):
        bad("stats.rejected must count lines by at most a few reasons")
    if any(len(reason) > MAX_RULE_NAME or not reason.isprintable() for reason in reasons):
        bad(f"stats.rejected's reasons must be printable, of at most {MAX_RULE_NAME} characters")
    if stats["lines"] != received or sum(reasons.values()) != rejected_lines:
        bad("stats must count the chunks' lines and rejected lines")
    rules = batch["rules"]
    if len(rules) > MAX_RULES:
        bad(f"a batch counts at most {MAX_RULES} rules")
    # A rule (or '' for what stayed) counts a release when it took one of its files, and a file
    # has at least one article, of at most MAX_ARTICLE_BYTES.
    for rule_releases, rule_files, rule_fragments, rule_bytes in rules.values():
        if not (rule_releases <= rule_files <= rule_fragments and rule_bytes <= rule_fragments * MAX_ARTICLE_BYTES):
            bad("each rule count must hold releases <= files <= fragments, and bytes within what its fragments hold")
    if sum(rule_fragments for _, _, rule_fragments, _ in rules.values()) != accepted:
        bad("the rules' fragments must add up to the lines the chunks kept")
    kept_releases, kept_files, kept_fragments, kept_bytes = rules[""]
    files, fragments, chunks = batch["files"], batch["fragments"], batch["release_chunks"]
    if (
        kept_releases != len(batch["releases"]["key"])
        or kept_files < len(files["key"])
        or kept_fragments != len(fragments["article"])
    ):
        bad("rules[''] must count the batch's releases, files and fragments")
    if not 0 <= stats["bad_dates"] <= kept_files:
        bad("stats.bad_dates must count some of the kept files")
    parts = files["parts"]
    if parts and not (min(parts) >= 0 and max(parts) <= MAX_PARTS):
        bad(f"files.parts must lie within 0..{MAX_PARTS}")
    # A release's row of this batch: its files (each with an article at least) and their articles.
    for files_of, fragments_of, size in zip(chunks["files"], chunks["fragments"], chunks["bytes"]):
        if not (1 <= files_of <= fragments_of and 0 <= size <= fragments_of * MAX_ARTICLE_BYTES):
            bad("each release chunk must hold 1 <= files <= fragments, and bytes within what its fragments hold")
    if (
        sum(chunks["files"]) != len(files["key"])
        or sum(chunks["fragments"]) != kept_fragments
        or sum(chunks["bytes"]) != kept_bytes
    ):
        bad("release_chunks must add up to the batch's files, fragments and rules['']")
    if fragment_values:
        for column, high in (("part", MAX_PARTS), ("bytes", MAX_ARTICLE_BYTES)):
            bounds = _bounds(fragments[column])
            if bounds and not (bounds[0] >= 0 and bounds[1] <= high):
                bad(f"fragments.{column} must lie within 0..{high}")
        if sum(fragments["bytes"]) != kept_bytes:
            bad("rules[''] must count the bytes of the batch's fragments")


def max_missing_spans(chunks: Sequence[ChunkRow]) -> int:
    """How many missing spans chunks of these lines leave room for (see MAX_CHUNKS). Read by
    position (a chunk's lines are its third item): StoredBatch asks before the chunks are checked,
    and takes an IndexError for a malformed chunk."""
    return sum(chunk[2] for chunk in chunks) + 2 * len(chunks)


def _bounds(values: Column) -> tuple[int, int] | None:
    """(min, max) of a column (None when empty): at C speed for one read as an array."""
    if _msgcolumns is not None and type(values) is array:
        bounds: tuple[int, int] | None = _msgcolumns.bounds(values)
        return bounds
    return (min(values), max(values)) if values else None


def _each_once(values: Column) -> bool:
    """No value of a column comes twice: at C speed for one read as an array in ascending order
    (the digest's articles), else by a set."""
    if _msgcolumns is not None and type(values) is array:
        if _msgcolumns.ascending(values):
            return True
    elif all(map(lt, values, islice(values, 1, None))):
        return True
    return len(set(values)) == len(values)


def _among(values: Column, keys: set[int], key_list: Column) -> bool:
    """Every value of a column is one of the keys (the set of key_list): at C speed for a column
    read as an array."""
    if _msgcolumns is not None and type(values) is array:
        try:
            among: bool | None = _msgcolumns.among(values, array("q", key_list))
        except (TypeError, OverflowError):  # not all 64-bit integers: the set says which
            among = None
        # None means the keys collide in the C check's hash table (as a sender could arrange on
        # purpose); the set then decides.
        if among is not None:
            return among
    return keys.issuperset(values)


def longer_than(values: Column, limit: int) -> bool:
    """Whether a text column's values (bytes, or str as UTF-8; no None: callers leave the NULLs
    out) hold one of more than limit bytes."""
    if not values:
        return False
    if type(values[0]) is bytes:
        return max(map(len, values)) > limit
    # A character is at most 4 bytes: only the values that long can be too long.
    return max(map(len, values)) > limit // 4 and any(
        len(v.encode("utf-8", "surrogatepass")) > limit for v in values if len(v) > limit // 4
    )


def check_text_lengths(table: str, column: str, values: Column) -> None:
    """MalformedBatch when the column (its NULLs left out) holds a value longer than TEXT_LIMITS allows."""
    limit = TEXT_LIMITS.get((table, column))
    if limit is not None and longer_than(values, limit):
        raise MalformedBatch(f"malformed batch: {table}.{column} holds a value of more than {limit} bytes")


def encodes_as_utf8(text: str) -> bool:
    """Whether a decoded string encodes as UTF-8 (a JSON body may hold a lone surrogate)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False
