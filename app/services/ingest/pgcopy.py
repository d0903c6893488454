"""PostgreSQL COPY for the store: payloads built column by column at C speed, not row by row, and
the COPYs that send them.

The store sends PostgreSQL's binary format (below), in slices of rows, so the server parses and
stores one slice while the next one is being built (client and server work side by side instead
of one after the other), from a background thread (StreamedCopy); a COPY into a keyed table falls
back to INSERT ... ON CONFLICT should another worker have stored one of its rows (PendingCopy). The
text format (columns separated by tabs, rows by newlines, NULL as \\N, backslash, tab, newline and
carriage return escaped) is kept for the store benchmark's plain-COPY baseline.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from itertools import repeat, starmap
from typing import TYPE_CHECKING, Any, cast

from edge.digest.compiled import load as load_compiled

if TYPE_CHECKING:
    from psycopg import Copy, Cursor
    from psycopg.rows import TupleRow

    # The store's cursors: psycopg's, with its default rows (tuples).
    PgCursor = Cursor[TupleRow]

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})

# Rows per slice sent to the server: large enough that per-write overhead is nil, small enough
# that the server starts working early.
SLICE_ROWS = 20_000

# A column to COPY: (kind, values), its values of the type its kind says (see copy_payload and
# binary_slices), None for NULL.
CopyColumn = tuple[str, Sequence[Any]]


def _ints(column: Sequence[int | None]) -> list[str] | map[str]:
    if None in column:
        return ["\\N" if v is None else str(v) for v in column]
    return map(str, column)


def _texts(column: Sequence[str | None]) -> Sequence[str]:
    if None in column:
        return ["\\N" if v is None else v.translate(_ESCAPES) for v in column]
    texts = cast("Sequence[str]", column)  # no None in it: just looked
    joined = "".join(texts)
    if "\\" in joined or "\t" in joined or "\n" in joined or "\r" in joined:
        return [v.translate(_ESCAPES) for v in texts]
    return texts


_RENDER: dict[str, Callable[[Sequence[Any]], Iterable[str]]] = {"int": _ints, "text": _texts}


def copy_payload(columns: Sequence[CopyColumn]) -> bytes:
    """The rows of equal-length columns in COPY's text format, each given as (kind, values):
    kind 'int' or 'text'."""
    if not columns or not len(columns[0][1]):
        return b""
    rendered = [_RENDER[kind](values) for kind, values in columns]
    return ("\n".join(map("\t".join, zip(*rendered))) + "\n").encode("utf-8")


# A payload up to this size goes to the server as it is written, without a thread: the socket
# takes it at once, and the server stores it while the caller goes on all the same (a thread a
# COPY cost the store about a millisecond a batch of 4,000 articles, in its start and join).
INLINE_PAYLOAD = 128 * 1024


class StreamedCopy:
    """A COPY whose payload pieces are handed over at once and sent by a background thread
    (psycopg's QueuedLibpqWriter), or, with queued=False, written at once (a payload the socket
    takes whole: INLINE_PAYLOAD), so the caller can do other work while the server stores them;
    finish() waits for the server's answer and raises its error, if any."""

    def __init__(self, cur: PgCursor, statement: str, pieces: Iterable[bytes], queued: bool = True):
        from psycopg.copy import QueuedLibpqWriter

        self._context: AbstractContextManager[Copy] = (
            cur.copy(statement, writer=QueuedLibpqWriter(cur)) if queued else cur.copy(statement)
        )
        self._open = True
        copy = self._context.__enter__()
        try:
            for piece in pieces:  # each sent as soon as it is made
                copy.write(piece)
        except BaseException as exc:
            self.abort(exc)
            raise

    def finish(self) -> None:
        self._open = False
        self._context.__exit__(None, None, None)

    def abort(self, exc: BaseException) -> None:
        """End the COPY with an error (the server stores none of it); a no-op once finished."""
        if self._open:
            self._open = False
            self._context.__exit__(type(exc), exc, exc.__traceback__)


# -- binary COPY -------------------------------------------------------------------------------
# PostgreSQL's binary COPY format: a header, then per row an int16 field count and per field an
# int32 length (-1: NULL) and the value (int8/int4/float4 big-endian, timestamptz as int8
# microseconds since 2000-01-01 UTC, text as UTF-8 bytes), then an int16 -1. Cheaper than text on
# both sides: no number or date formatting here, no parsing there.

BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
BINARY_TRAILER = b"\xff\xff"
_FIXED = {"int8": ("q", 8), "int4": ("i", 4), "float4": ("f", 4), "timestamp": ("q", 8)}
_NULL = struct.pack("!i", -1)
_PG_EPOCH = 946_684_800  # 2000-01-01 in unix seconds
_pack_length = struct.Struct("!i").pack


def _interleave(pieces: list[Sequence[bytes]]) -> bytes:
    """The pieces' items row by row: pieces[0][0], pieces[1][0], ..., pieces[0][1], ..."""
    if len(pieces) == 1:
        return b"".join(pieces[0])
    step = len(pieces)
    rows = [b""] * (step * len(pieces[0]))
    for i, piece in enumerate(pieces):
        rows[i::step] = piece
    return b"".join(rows)


# Built by setup.py where a C compiler is at hand (SEED_IMPL chooses): the same bytes as
# _pack_rows_python, which serves where it is not built.
_copyrows = load_compiled("app.services._copyrows")
_pack_rows_c = _copyrows.pack_rows if _copyrows is not None else None


def _pack_rows(columns: Sequence[CopyColumn], scan: bool, counts: bool = True) -> bytes:
    """Equal-length columns as binary COPY rows, without a header; with `counts` False without
    each row's field count either (array_value's elements). The C version (_copyrows.c) runs
    where it is loaded; it takes a quarter of the time because it makes no Python object for each
    value. Otherwise the rows are packed in Python."""
    if _pack_rows_c is not None:
        packed: bytes = _pack_rows_c([kind for kind, _ in columns], [values for _, values in columns], scan, counts)
        return packed
    return _pack_rows_python(columns, scan, counts)


def _pack_rows_python(columns: Sequence[CopyColumn], scan: bool, counts: bool = True) -> bytes:
    """Equal-length columns as binary COPY rows, without a header (nor, with `counts` False, each
    row's field count). With `scan` False the columns hold no NULL, so none is looked for (a None
    is refused as a value of the wrong type is). Runs of columns without NULLs are packed
    together, with one struct call for each row that also packs the next text column's length; a
    column with NULLs (looked for when `scan`) is packed value by value."""
    if len({len(values) for _, values in columns}) != 1:  # zip below would drop rows silently
        raise ValueError("columns of different lengths")
    pieces: list[Sequence[bytes]] = []
    # The struct format of a run of columns without NULLs, and its values: a field count or a
    # length, then the column's values, for each column of the run.
    fmt = "!h" if counts else "!"
    args: list[Iterable[int | float]] = [repeat(len(columns), len(columns[0][1]))] if counts else []

    def flush() -> None:
        nonlocal fmt, args
        if len(fmt) > 1:
            pieces.append(list(starmap(struct.Struct(fmt).pack, zip(*args))))
        fmt, args = "!", []

    for kind, values in columns:
        nullable = scan and None in values
        if kind == "timestamp":
            values = (
                [None if v is None else (v - _PG_EPOCH) * 1_000_000 for v in values]
                if nullable
                else [(v - _PG_EPOCH) * 1_000_000 for v in values]
            )
        if kind in _FIXED:
            code, size = _FIXED[kind]
            if not nullable:
                fmt += "i" + code
                args += [repeat(size), values]
                continue
            flush()
            pack = struct.Struct("!i" + code).pack
            pieces.append([_NULL if v is None else pack(size, v) for v in values])
        elif kind in ("text", "utf8"):
            if kind == "utf8":  # as they are: joining them below refuses anything but bytes
                encoded = values
            else:  # str.encode refuses anything but str (None included)
                encoded = (
                    [None if v is None else str.encode(v) for v in values]
                    if nullable
                    else list(map(str.encode, values))
                )
            if not nullable:
                fmt += "i"
                args.append(map(len, encoded))
                flush()
                pieces.append(encoded)
                continue
            flush()
            pieces.append([_NULL if b is None else _pack_length(len(b)) + b for b in encoded])
        else:
            raise ValueError(f"no binary COPY kind {kind!r}")
    flush()
    return _interleave(pieces)


def binary_slices(columns: Sequence[CopyColumn], rows: int = SLICE_ROWS, nulls: bool = True) -> Iterator[bytes]:
    """The rows of equal-length columns as a binary COPY payload (`COPY ... (FORMAT binary)`), in
    slices of `rows` rows: their concatenation is the whole payload, header and trailer included.
    Kinds: 'int8', 'int4', 'float4', 'timestamp' (unix seconds, for a timestamptz column), 'text'
    (str) and 'utf8' (text given as UTF-8 bytes, which the caller checked); None is NULL. A value
    out of its column's range raises struct.error, one of the wrong type TypeError. nulls False
    when the columns must hold no NULL: packed without looking for one (faster), a None refused."""
    count = len(columns[0][1]) if columns else 0
    yield BINARY_HEADER
    for start in range(0, count, rows):
        if count <= rows:
            yield _pack_rows(columns, scan=nulls)
        else:
            yield _pack_rows([(kind, values[start : start + rows]) for kind, values in columns], scan=nulls)
    yield BINARY_TRAILER


def binary_payload(columns: Sequence[CopyColumn]) -> bytes:
    return b"".join(binary_slices(columns))


# The element types of array_value's kinds (PostgreSQL's type oids: int8, int4, text).
ARRAY_ELEMENT_OIDS = {"int8": 20, "int4": 23, "utf8": 25, "text": 25}
_array_header = struct.Struct("!iiiii").pack


def array_value(kind: str, values: Sequence[Any]) -> bytes:
    """One-dimensional array of `values` as a binary COPY field's value (without its length word):
    a header (dimensions, no NULLs, the element type, the length, lower bound 1), then each
    element as a field is packed (its length, its value). Kinds: int8, int4, text and utf8; no
    NULLs. A value out of its kind's range raises struct.error, one of the wrong type TypeError."""
    oid = ARRAY_ELEMENT_OIDS.get(kind)
    if oid is None:
        raise ValueError(f"no binary array kind {kind!r}")
    if not len(values):
        return struct.pack("!iii", 0, 0, oid)
    return _array_header(1, 0, oid, len(values), 1) + _pack_rows([(kind, values)], scan=False, counts=False)


class PendingCopy:
    """A COPY of rows the caller believes new straight into `target`, under a savepoint, sent in
    the background (the caller prepares the next tables meanwhile); finish() tells which rows went
    in. Should another worker have stored one of them meanwhile (a unique violation), the
    savepoint is rolled back and the rows go through a staging table and INSERT ... ON CONFLICT DO
    NOTHING RETURNING the key."""

    def __init__(
        self,
        cur: PgCursor,
        table: str,
        target: str,
        column_names: str,
        pieces: list[bytes],
        key: str,
        binary: bool = False,
    ):
        """pieces: the payload, kept for the fallback."""
        self.cur, self.table, self.target, self.column_names, self.key = cur, table, target, column_names, key
        self.options = " (FORMAT binary)" if binary else ""
        # The COPY under way; else why it could not start (never both).
        self.copy: StreamedCopy | None = None
        self.error: Exception | None = None
        self.pieces = pieces
        if not pieces or binary and sum(map(len, pieces)) == len(BINARY_HEADER) + len(BINARY_TRAILER):
            return
        cur.execute("SAVEPOINT copy_new_rows")
        try:
            self.copy = StreamedCopy(
                cur,
                f'COPY "{target}" ({column_names}) FROM STDIN{self.options}',
                pieces,
                queued=sum(map(len, pieces)) > INLINE_PAYLOAD,
            )
        except Exception as exc:
            self.error = exc

    def abort(self, exc: BaseException) -> None:
        """The caller failed before finish(): end the COPY (if still open) with that error."""
        if self.copy is not None:
            self.copy.abort(exc)

    def finish(self) -> set[int] | None:
        """None when every row went in; else the keys of the rows that did."""
        exc = self.error
        if exc is None:
            if self.copy is None:  # nothing to send
                return None
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
        cur.execute(
            f'CREATE TEMP TABLE IF NOT EXISTS "{stage}" (LIKE "{self.target}" INCLUDING DEFAULTS) ON COMMIT DELETE ROWS'
        )
        with cur.copy(f'COPY "{stage}" ({names}) FROM STDIN{self.options}') as copy:
            for piece in self.pieces:
                copy.write(piece)
        # In key order, as the COPYs go: two workers wait on each other's rows in one order.
        cur.execute(
            f'INSERT INTO "{self.target}" ({names}) SELECT {names} FROM "{stage}" ORDER BY {self.key}'
            f" ON CONFLICT DO NOTHING RETURNING {self.key}"
        )
        inserted = {key for (key,) in cur.fetchall()}
        cur.execute(f'TRUNCATE "{stage}"')
        cur.execute("RELEASE SAVEPOINT copy_new_rows")
        return inserted
