"""What a post's row keeps of a release's name: the columns of `posts` that the newznab functions
filter on and show (docs/catalog.md), read from the name by edge.digest.names and bounded to what
the columns hold.

The node reads them for every release of a batch it sends (`release_names`, docs/batch-format.md):
the parse of the names was a third of the data center's workers' CPU, and a node digesting its
range has the names at hand. VERSION names the reading: the data center takes a batch's columns
only when the batch says its own VERSION, reads the names itself otherwise, and reads a share of
the others again to compare (app.services.ingest.posts). A name that is a hash gets no columns
from the node: its post's come from its files' names, in the data center.
"""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from collections.abc import Sequence
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from edge.digest import categories, names
from edge.digest.categories import category_of

MAX_TEXT = 200
SMALLINT = 32767
# Of every category id a name can give (docs/api.md's table).
CATEGORY_IDS = frozenset((*categories.PARENTS, *categories.SUBCATEGORIES))


class PostName(NamedTuple):
    """The columns of `posts` a name gives (in the table's order of them)."""

    category: int
    year: int | None = None
    season: int | None = None
    episode: int | None = None
    episode_last: int | None = None
    resolution: int | None = None
    air_date: date | None = None
    title: str | None = None
    source: str | None = None
    video: str | None = None
    languages: str | None = None


COLUMNS = PostName._fields
# How each column goes in a batch (release_names): integers, the air date as its ISO text, texts.
INT_COLUMNS = ("category", "year", "season", "episode", "episode_last", "resolution")
TEXT_COLUMNS = ("air_date", "title", "source", "video", "languages")
assert set(INT_COLUMNS) | set(TEXT_COLUMNS) == set(COLUMNS)


def _version() -> str:
    """The reading's version: a hash of the code that reads names (this module, names and
    categories) and of what it leans on that can differ between two processes (Python's version,
    its Unicode tables, and the latest year a name can say: next year, as of the process' start)."""
    digest = hashlib.blake2b(digest_size=8)
    for module in (names, categories, sys.modules[__name__]):
        source = module.__file__
        if source is None:  # pragma: no cover - a module loaded without a file
            raise RuntimeError(f"{module.__name__} has no source file to version")
        digest.update(Path(source).read_bytes())
    digest.update(
        f"{sys.version_info[0]}.{sys.version_info[1]} {unicodedata.unidata_version} {names.MAX_YEAR}".encode()
    )
    return digest.hexdigest()


VERSION = _version()


def columns_of(parsed: names.ParsedName, group: str) -> PostName:
    """The columns a parsed name gives a post of this group."""
    episodes = parsed.episodes or parsed.absolute or ()
    air_date = date.fromisoformat(parsed.air_date) if parsed.air_date else None
    resolution = int(parsed.resolution[:-1]) if parsed.resolution else None
    return PostName(
        category=category_of(parsed, group).id,
        year=_small(parsed.year),
        season=_small(parsed.season),
        episode=_small(min(episodes)) if episodes else None,
        episode_last=_small(max(episodes)) if episodes else None,
        resolution=resolution,
        air_date=air_date,
        title=_text(parsed.title),
        source=parsed.source,
        video=parsed.codec,
        languages=_text(",".join(parsed.languages)) if parsed.languages else None,
    )


def _small(number: int | None) -> int | None:
    return number if number is not None and 0 <= number <= SMALLINT else None


def _text(value: str | None) -> str | None:
    if not value:
        return None
    return value.replace("\0", "")[:MAX_TEXT] or None


@lru_cache(maxsize=65536)
def read(name: str, group: str) -> PostName | None:
    """The columns of a post of this name in this group, or None where the name is a hash (its
    files' names say more, and the data center reads those). A range's batches bring the same
    names back: a release spans batches."""
    parsed = names.parse(name, group)
    return None if parsed.hashed else columns_of(parsed, group)


# A batch's release_names: "version" a str, every other key a column (a list, one value a release).
ReleaseNames = dict[str, Any]


def release_names(names_: Sequence[str], group: str) -> ReleaseNames:
    """A batch's `release_names` for its releases' names (in their order): VERSION, and the
    columns of each name as column lists (null where the name is a hash)."""
    rows = [read(name, group) for name in names_]
    table: ReleaseNames = {"version": VERSION}
    for index, column in enumerate(COLUMNS):
        values: list[Any] = [None if row is None else row[index] for row in rows]
        if column == "air_date":
            values = [None if value is None else value.isoformat() for value in values]
        table[column] = values
    return table


class ReleaseNamesError(ValueError):
    """A batch's release_names that are not what the format says (docs/batch-format.md)."""


def _texts_fit(texts: list[str]) -> bool:
    """Whether each text fits a column of names: 1 to MAX_TEXT characters, no NUL, UTF-8 (a JSON
    body can hold a lone surrogate)."""
    if any(len(text) > MAX_TEXT or not text for text in texts):
        return False
    joined = "\0".join(texts)
    try:
        joined.encode()
    except UnicodeEncodeError:
        return False
    return joined.count("\0") == max(len(texts) - 1, 0)


def check(value: object, releases: int) -> None:
    """A batch's release_names (for its `releases` rows) checked against the format and the
    columns' bounds; ReleaseNamesError says what is wrong."""
    if not isinstance(value, dict) or set(value) != {"version", *COLUMNS}:
        raise ReleaseNamesError(f"release_names must be a map of version, {', '.join(COLUMNS)}")
    if not isinstance(value["version"], str) or not 0 < len(value["version"]) <= 64:
        raise ReleaseNamesError("release_names.version must be a string of 1 to 64 characters")
    for column in COLUMNS:
        values = value[column]
        if type(values) is not list or len(values) != releases:
            raise ReleaseNamesError(f"release_names.{column} must be a list of one value a release")
    nulls = [category is None for category in value["category"]]
    for column in COLUMNS:
        values = value[column]
        present = [v for v in values if v is not None]
        if column != "category" and any(v is not None and null for v, null in zip(values, nulls)):
            raise ReleaseNamesError(f"release_names.{column} must be null where category is")
        kind = int if column in INT_COLUMNS else str
        if list(map(type, present)).count(kind) != len(present):
            raise ReleaseNamesError(f"release_names.{column} must hold {'integers' if kind is int else 'strings'}")
        if column == "category" and not CATEGORY_IDS.issuperset(present):
            raise ReleaseNamesError("release_names.category holds an id that is not a category")
        if column != "category" and kind is int and present and (min(present) < 0 or max(present) > SMALLINT):
            raise ReleaseNamesError(f"release_names.{column} holds a number past 0 .. {SMALLINT}")
        if kind is str and column != "air_date" and not _texts_fit(present):
            raise ReleaseNamesError(
                f"release_names.{column} must hold UTF-8 texts of 1 to {MAX_TEXT} characters without NUL"
            )
    try:
        _air_dates(value["air_date"])
    except ValueError:
        raise ReleaseNamesError("release_names.air_date must hold dates as YYYY-MM-DD") from None


def rows_of(value: ReleaseNames) -> list[PostName | None]:
    """The rows of release_names that check() took: each release's columns, None where the node
    read none."""
    columns = [value[column] for column in COLUMNS]
    columns[COLUMNS.index("air_date")] = _air_dates(value["air_date"])
    return [None if row[0] is None else PostName(*row) for row in zip(*columns)]


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _air_dates(texts: list[str | None]) -> list[date | None]:
    """The dates of YYYY-MM-DD texts (date.fromisoformat alone takes 20240101 and 2024-W01-1 too)."""
    if not all(text is None or _ISO_DATE.fullmatch(text) for text in texts):
        raise ValueError("not YYYY-MM-DD")
    return [None if text is None else date.fromisoformat(text) for text in texts]
