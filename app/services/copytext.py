"""COPY ... FROM STDIN payloads built column by column at C speed (map/join), not row by row.

PostgreSQL's text format: columns separated by tabs, rows by newlines, NULL as \\N, and
backslash, tab, newline and carriage return escaped inside values.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _ints(column: Sequence[int | None]) -> list[str] | map:
    if None in column:
        return ["\\N" if v is None else str(v) for v in column]
    return map(str, column)


def _texts(column: Sequence[str | None]) -> Sequence[str]:
    if None in column:
        column = ["\\N" if v is None else v.translate(_ESCAPES) for v in column]
        return column
    joined = "".join(column)
    if "\\" in joined or "\t" in joined or "\n" in joined or "\r" in joined:
        return [v.translate(_ESCAPES) for v in column]
    return column


@lru_cache(maxsize=4096)
def _day(days: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(days * 86400))


def _epoch(seconds: int | None) -> str:
    """Unix seconds as a timestamptz literal in UTC (the day part cached: dates cluster)."""
    if seconds is None:
        return "\\N"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{_day(days)} {hours:02d}:{rest // 60:02d}:{rest % 60:02d}+00"


_RENDER = {"int": _ints, "text": _texts, "epoch": lambda values: map(_epoch, values)}


def copy_payload(columns: Sequence[tuple[str, Sequence]]) -> bytes:
    """The rows of equal-length columns, each given as (kind, values): kind 'int', 'text', or
    'epoch' (unix seconds for a timestamptz column)."""
    if not columns or not len(columns[0][1]):
        return b""
    rendered = [_RENDER[kind](values) for kind, values in columns]
    return ("\n".join(map("\t".join, zip(*rendered))) + "\n").encode("utf-8")


def copy_columns(cur, statement: str, columns: Sequence[tuple[str, Sequence]]) -> None:
    """Run `COPY ... FROM STDIN` (text format) with the given columns as its rows."""
    payload = copy_payload(columns)
    with cur.copy(statement) as copy:
        if payload:
            copy.write(payload)
