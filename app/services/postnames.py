"""What a post keeps of its name: the fields edge.digest.names reads from it and its category,
as the columns of `posts` that the newznab functions filter on and show (docs/catalog.md).

The join (app.services.ingest.posts) computes them for every post it writes, from the post's
name, its group and, where the name is a hash, its files' names; refill() computes them afresh
for every post (migration 0018, and `flask seed names refresh` after the parser changes).
Values are bounded to what the columns hold: numbers out of a smallint's range are left out
(NULL), texts are cut to MAX_TEXT characters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, Row, text
from sqlalchemy.orm import Session

from app.db import array_literal

if TYPE_CHECKING:
    from app.services.ingest.checks import DecodedBatch
from edge.digest import names
from edge.digest.namecolumns import COLUMNS, VERSION, PostName, columns_of, rows_of

# Files' names read for a post whose own name is a hash: the first few say as much as all.
MAX_FILE_NAMES = 20
# The columns as an unnest() of arrays, one a column, bound as :n_<column> (arrays_of).
_TYPES = {
    "category": "smallint",
    "year": "smallint",
    "season": "smallint",
    "episode": "smallint",
    "episode_last": "smallint",
    "resolution": "smallint",
    "air_date": "date",
    "title": "text",
    "source": "text",
    "video": "text",
    "languages": "text",
}


def unnest_sql(extra: tuple[tuple[str, str], ...] = ()) -> str:
    """The columns (and extra ones: (name, type)) as an unnest() of arrays bound as :n_<column>
    (arrays_of), its rows named n(key, columns...)."""
    columns = [*COLUMNS, *(name for name, _ in extra)]
    types = {**_TYPES, **dict(extra)}
    return (
        "unnest(CAST(:n_keys AS bigint[]), "
        + ", ".join(f"CAST(:n_{c} AS {types[c]}[])" for c in columns)
        + ") AS n(key, "
        + ", ".join(columns)
        + ")"
    )


UNNEST = unnest_sql()


def is_hashed(name: str, group: str) -> bool:
    """Whether the name says nothing but a hash (then its files' names are read)."""
    return _parsed(name, group).hashed


def post_name(name: str, group: str, file_names: Iterable[str] = ()) -> PostName:
    """The columns for a post of this name in this group (file_names: its files', read where the
    name is a hash)."""
    parsed = _parsed(name, group)
    if parsed.hashed and file_names:
        parsed = names.parse_post(name, tuple(file_names)[:MAX_FILE_NAMES], group)
        return columns_of(parsed, group)
    return _named(name, group)


def posts_named(session: Session, group_id: int, group: str, named: Mapping[int, str]) -> dict[int, PostName]:
    """The columns of these posts (post key -> its name), each name parsed once: a batch's posts
    can outnumber the parse cache, and a name parsed to see whether it is a hash, then parsed
    again for its columns, would have left it by then. Posts named by a hash are read by their
    files' names."""
    parsed = {post: _parsed(name, group) for post, name in named.items()}
    files = file_names(session, group_id, [post for post, found in parsed.items() if found.hashed])
    return {
        post: (
            columns_of(names.parse_post(named[post], tuple(files[post])[:MAX_FILE_NAMES], group), group)
            if found.hashed and files.get(post)
            else columns_of(found, group)
        )
        for post, found in parsed.items()
    }


def read_by_node(batch: DecodedBatch) -> dict[str, PostName]:
    """What the node that digested this batch read of its releases' names (release_names, checked
    with the batch), by name, where its reading is this code's (namecolumns.VERSION): else
    nothing, and the join reads the names itself. Names the node read no columns of (a hash) are
    left out."""
    found = batch.get("release_names")
    if found is None or found["version"] != VERSION:
        return {}
    return {
        name.decode() if isinstance(name, bytes) else name: row
        for name, row in zip(batch["releases"]["name"], rows_of(found))
        if row is not None
    }


@lru_cache(maxsize=65536)
def _parsed(name: str, group: str) -> names.ParsedName:
    return names.parse(name, group)


@lru_cache(maxsize=65536)
def _named(name: str, group: str) -> PostName:
    # A post's row is written again with every batch that adds to it: its name comes back often.
    return columns_of(_parsed(name, group), group)


def arrays_of(keys: list[int], named: list[PostName]) -> dict[str, list[int] | list[int | date | str | None]]:
    """The parameters of UNNEST for these posts' keys and columns."""
    params: dict[str, list[int] | list[int | date | str | None]] = {"n_keys": keys}
    # The rows turned into columns at once (zip, in C), rather than a column at a time; lists, as
    # psycopg adapts a list as an array (refill binds them as they are).
    columns = list(map(list, zip(*named))) if named else [[] for _ in COLUMNS]
    for column, values in zip(COLUMNS, columns):
        params[f"n_{column}"] = values
    return params


# The names of a group's posts' files, for posts whose name is a hash: the files of the releases
# joined into the post and of its own release.
POST_FILE_NAMES = text("""
    SELECT m.post_key, f.name
      FROM (SELECT key AS post_key, key FROM unnest(CAST(:keys AS bigint[])) AS t(key)
             WHERE NOT EXISTS (SELECT FROM release_posts x WHERE x.group_id = :g AND x.key = t.key)
            UNION ALL
            SELECT x.post_key, x.key FROM release_posts x WHERE x.group_id = :g AND x.post_key = ANY(CAST(:keys AS bigint[]))) m
      JOIN LATERAL (SELECT name, file_index FROM files
                     WHERE group_id = :g AND release_key = m.key ORDER BY file_index NULLS LAST, name
                     LIMIT :most) f ON true
     ORDER BY m.post_key, f.file_index NULLS LAST, f.name
""")


def file_names(session: Session, group_id: int, post_keys: list[int]) -> dict[int, list[str]]:
    """The files' names of these posts of the group (as far as MAX_FILE_NAMES a release)."""
    found: dict[int, list[str]] = {}
    if post_keys:
        rows = session.execute(
            POST_FILE_NAMES, {"g": group_id, "keys": array_literal(post_keys), "most": MAX_FILE_NAMES}
        )
        for post_key, name in rows:
            found.setdefault(post_key, []).append(name)
    return found


REFILL_PAGE = text("""
    SELECT p.group_id, p.key, p.name, g.name AS group_name
      FROM posts p JOIN groups g ON g.id = p.group_id
     WHERE (p.group_id, p.key) > (:g, :key)
     ORDER BY p.group_id, p.key
     LIMIT :limit
""")
REFILL = text(f"""
    UPDATE posts p SET {", ".join(f"{c} = n.{c}" for c in COLUMNS)}
      FROM {UNNEST}
     WHERE p.group_id = :g AND p.key = n.key
       AND ({", ".join(f"p.{c}" for c in COLUMNS)}) IS DISTINCT FROM ({", ".join(f"n.{c}" for c in COLUMNS)})
""")


def refill(session: Session, page: int = 5000, progress: Callable[[int], None] | None = None) -> int:
    """Compute every post's columns afresh from its name (a page of posts at a time, each page
    in the caller's transaction); returns how many posts changed. progress is told the posts
    read so far after each page."""
    changed = read = 0
    after = (-(2**31), -(2**63))
    while True:
        rows = session.execute(REFILL_PAGE, {"g": after[0], "key": after[1], "limit": page}).all()
        if not rows:
            return changed
        by_group: dict[int, list[Row[Any]]] = {}
        for row in rows:
            by_group.setdefault(row.group_id, []).append(row)
        for group_id, posts in by_group.items():
            group = posts[0].group_name
            by_key = posts_named(session, group_id, group, {p.key: p.name for p in posts})
            keys = [p.key for p in posts]
            # An UPDATE's result is a CursorResult, which Session.execute's annotation does not say.
            result = cast(
                "CursorResult[Any]",
                session.execute(REFILL, {"g": group_id, **arrays_of(keys, [by_key[key] for key in keys])}),
            )
            changed += result.rowcount
        read += len(rows)
        if progress is not None:
            progress(read)
        after = (rows[-1].group_id, rows[-1].key)
