"""Posts: the releases of one post joined, whatever batches, ranges and nodes saw them.

The digest gathers a release from the files of one poster, one release name and one file count,
under a key every node computes the same, so a release split over batches, ranges and nodes is
one row. Real posts break that in ways no single file shows: posting tools (ngPost, Nyuu) give
files, or parts of a post, posters of their own, and a post's .nfo or .sfv comes with a counter
of its own ([01/01] beside [i/36]), at the time or later, from someone else. The releases such a
post leaves share their name; this joins them into one post.

Releases of a group are of one post when the hashes of their folded names are equal
(``releases.name_hash``, catalog.name_hash: no case, spaces or punctuation; none for a name too
short to tell posts apart), and
- both are sets (not companions) counting the same files (or none), their posters write from
  one mail domain (ngPost's "KIUzWM340zX@mile.com" then "Myfranco@mile.com"), they were posted
  within JOIN_GAP of each other and the post they make spans at most MAX_POST_SPAN; or
- one is a companion: one metadata file (.nfo, .sfv, .nzb, .jpg...) counting one file or none;
  it joins the post of the nearest set of its name posted within COMPANION_GAP of it.
Different names never join: two posts of one poster at one time stay two; nor do two series of
one name counting different files ([i/3] and [i/4] are two posts), nor posters without a mail
domain, nor a name posted again days later. A post whose every file has a poster of its own,
from mail domains of their own, is left as that many releases: nothing but the name and the time
would join them, and those join different posts of one name too.

A name's posts are worked out afresh from its releases each time one of them comes (never from
the posts made before), so they depend only on what the catalog holds: the last join of a name
runs after the last store of it (a batch is joined after its store commits, and the joins of a
group run one at a time, under an advisory lock), so any order of batches, and any cut, gives
the same posts. A post's key is the least key of its sets (a companion alone is a post of its
own); release_posts holds the releases whose post key is not their own key, and only the join
writes it: the store never waits on the join, nor the join on the store.

The join runs after the store, in a transaction of its own (join_batch): the batch waits in
'stored' with its release keys until then, and the requeue sweep sends it again should the task
be lost.

The join also keeps the table `posts` (what search reads): each post that has a release of the
batch, or gained or lost one, is summed again from its releases (REFRESH), and a post left with
no release is deleted. Since the last join of a group runs after its last store, the rows end
equal to the sums of what the catalog holds. A post's row also keeps what its name says
(app.services.postnames: its category, title, season, episodes...), written with the sums in the
same statement: what the node that digested the batch read of the name (release_names, where its
reading is this code's), else read here in Python from the name the row gets (names_of).
"""

from __future__ import annotations

from collections import defaultdict
import random
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from operator import itemgetter
from typing import NamedTuple

from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app import metrics
from app.collector import collector_paused
from app.db import array_literal, is_transient
from app.models import SeedBatch, SeedRange
from app.models.batches import BatchState
from app.services import inspections, postnames
from app.services.ingest import groupstats
from edge.digest import namecolumns

JOIN_GAP = timedelta(hours=1)
MAX_POST_SPAN = timedelta(days=1)
COMPANION_GAP = timedelta(days=45)
# pg_advisory_xact_lock(JOIN_LOCK, group_id): one join of a group at a time.
JOIN_LOCK = 0x706F7374  # "post"

# These releases and every release of the group sharing a name with one of them (with the group's
# name: a post's name is parsed with its group as a hint). Two reads, each by an index: the batch's
# releases by key, then the group's releases of their names' hashes; a release without a hash is
# only its own namesake. (One read with `key = ANY(...) OR name_hash IN (...)` scanned every
# release of the group for each join: 294 - 347 ms for 3,700 keys on a catalog of 1,000,000
# releases, where these take 51 - 54 ms; docs/benchmarks.md.)
_NAMESAKE_COLUMNS = """
    r.key, r.name_hash, r.file_count, r.first_post, r.last_post,
    r.metadata_only AND r.files_seen = 1 AND coalesce(r.file_count, 0) <= 1 AS companion,
    lower(substring(r.poster from '@([^>[:space:]]+)')) AS domain, r.name, r.files_seen,
    (SELECT name FROM groups WHERE id = :g) AS group_name
"""
NAMESAKES = text(f"""
    WITH batch AS MATERIALIZED (
        SELECT key, name_hash FROM releases WHERE group_id = :g AND key = ANY(CAST(:keys AS bigint[])))
    SELECT {_NAMESAKE_COLUMNS}
      FROM releases r
     WHERE r.group_id = :g AND r.key IN (SELECT key FROM batch WHERE name_hash IS NULL)
    UNION ALL
    SELECT {_NAMESAKE_COLUMNS}
      FROM releases r
     WHERE r.group_id = :g AND r.name_hash IN (SELECT name_hash FROM batch WHERE name_hash IS NOT NULL)
""")
CURRENT = text("SELECT key, post_key FROM release_posts WHERE group_id = :g AND key = ANY(CAST(:keys AS bigint[]))")
# Releases pinned to the post of an anchor release by an inspection (app.services.inspections),
# among these or anchored at one of these, with the anchor's post now.
PINS = text("""
    SELECT j.release_key, j.anchor, coalesce(x.post_key, j.anchor) AS anchor_post
      FROM inspection_joins j
      LEFT JOIN release_posts x ON x.group_id = j.group_id AND x.key = j.anchor
     WHERE j.group_id = :g AND (j.release_key = ANY(CAST(:keys AS bigint[])) OR j.anchor = ANY(CAST(:keys AS bigint[])))
""")
FORGET = text("DELETE FROM release_posts WHERE group_id = :g AND key = ANY(CAST(:keys AS bigint[]))")
JOIN = text("""
    INSERT INTO release_posts (group_id, key, post_key)
    SELECT :g, k, p FROM unnest(CAST(:keys AS bigint[]), CAST(:posts AS bigint[])) AS t(k, p)
    ON CONFLICT (group_id, key) DO UPDATE SET post_key = EXCLUDED.post_key
""")


# A post's row from its releases: the columns written, and what an upsert of the row does when it
# is there already (a row that comes out the same is left alone: no new row version, no index
# entries). The columns its name gives (namecolumns.COLUMNS) come from Python, as postnames.UNNEST.
SUMMED = (
    "name, poster, names, posters, releases, files_seen, parts_expected, parts_seen, bytes, completion,"
    " first_post, last_post"
).split(", ")
# What an inspection of the post found (app.services.inspections), kept on its row for search.
INSPECTED = ("password", "imdb", "tvdb", "tvmaze", "tmdb")
WRITTEN = [*SUMMED, *namecolumns.COLUMNS, *INSPECTED]
POST_COLUMNS = "group_id, key, " + ", ".join(WRITTEN)
UPSERT = f"""
    ON CONFLICT (group_id, key) DO UPDATE
       SET {", ".join(f"{c} = EXCLUDED.{c}" for c in WRITTEN)}
     WHERE ({", ".join(f"p.{c}" for c in WRITTEN)})
           IS DISTINCT FROM
           ({", ".join(f"EXCLUDED.{c}" for c in WRITTEN)})
"""
NAMED_COLUMNS = ", ".join(f"n.{c}" for c in (*namecolumns.COLUMNS, *INSPECTED))
# With the name an inspection of the post told (n.inner_name, NULL for none): the post's name,
# and one more of its names (the posted ones stay searchable).
NAMED = postnames.unnest_sql(
    extra=(
        ("inner_name", "text"),
        ("password", "smallint"),
        ("imdb", "integer"),
        ("tvdb", "integer"),
        ("tvmaze", "integer"),
        ("tmdb", "integer"),
    )
)
# Posts of one release each (most are): the release's row as it is.
REFRESH_LONE = text(f"""
    INSERT INTO posts AS p ({POST_COLUMNS})
    SELECT :g, r.key, coalesce(n.inner_name, r.name), r.poster, r.name || coalesce(E'\\n' || n.inner_name, ''),
           r.poster, 1, r.files_seen, r.parts_expected, r.parts_seen, r.bytes,
           CASE WHEN r.parts_expected > 0 THEN least(100.0, 100.0 * r.parts_seen / r.parts_expected) ELSE 0 END,
           r.first_post, r.last_post, {NAMED_COLUMNS}
      FROM {NAMED}
      JOIN releases r ON r.group_id = :g AND r.key = n.key
    {UPSERT}
""")
# Posts of several releases, given as (post key, release key) pairs: summed over their releases.
REFRESH_SEVERAL = text(f"""
    INSERT INTO posts AS p ({POST_COLUMNS})
    SELECT s.group_id, s.key, coalesce(n.inner_name, s.name), s.poster,
           s.names || coalesce(E'\\n' || n.inner_name, ''), s.posters, s.releases, s.files_seen,
           s.parts_expected, s.parts_seen, s.bytes, s.completion, s.first_post, s.last_post, {NAMED_COLUMNS} FROM (
    SELECT :g AS group_id, m.post_key AS key,
           (array_agg(r.name ORDER BY r.files_seen DESC, r.key))[1] AS name,
           (array_agg(r.poster ORDER BY r.files_seen DESC, r.key))[1] AS poster,
           string_agg(DISTINCT r.name, E'\\n') AS names,
           string_agg(DISTINCT r.poster, E'\\n') AS posters,
           count(*) AS releases,
           least(sum(r.files_seen), 2147483647) AS files_seen,
           least(sum(r.parts_expected), 9223372036854775807) AS parts_expected,
           least(sum(r.parts_seen), 9223372036854775807) AS parts_seen,
           least(sum(r.bytes), 9223372036854775807) AS bytes,
           CASE WHEN sum(r.parts_expected) > 0
                THEN least(100.0, 100.0 * sum(r.parts_seen) / sum(r.parts_expected)) ELSE 0 END AS completion,
           min(r.first_post) AS first_post, max(r.last_post) AS last_post
      FROM unnest(CAST(:posts AS bigint[]), CAST(:keys AS bigint[])) AS m(post_key, key)
      JOIN releases r ON r.group_id = :g AND r.key = m.key
     GROUP BY m.post_key) s
      JOIN {NAMED} ON n.key = s.key
    {UPSERT}
""")
FORGET_POSTS = text("DELETE FROM posts WHERE group_id = :g AND key = ANY(CAST(:keys AS bigint[]))")


class Namesake(NamedTuple):
    key: int
    name_hash: int
    file_count: int | None
    first_post: datetime | None
    last_post: datetime | None
    companion: bool
    domain: str | None


def join_batch(
    session: Session, batch_id: int, read_names: Mapping[str, namecolumns.PostName] | None = None
) -> int | None:
    """Join the releases of a stored batch into their posts and mark it joined; None when there
    was nothing to do (not stored yet, or joined already). Returns how many releases changed
    post. read_names: what the node read of the batch's names (StoreResult.names), by name."""
    stored = locked_stored_batch(session, batch_id)
    if stored is None:
        return None
    row, group_id = stored
    left_out: list[str] = []
    changed = join_posts(session, group_id, row.release_keys or [], left_out, read_names)
    mark_joined(row, left_out)
    return changed


def locked_stored_batch(session: Session, batch_id: int) -> tuple[SeedBatch, int] | None:
    """The batch (locked) and its group when it is 'stored', else None: what joining and
    release repair start from."""
    row = session.scalar(
        select(SeedBatch).where(SeedBatch.id == batch_id).with_for_update().execution_options(populate_existing=True)
    )
    if row is None or row.state != BatchState.STORED:
        return None
    group_id = session.execute(select(SeedRange.group_id).where(SeedRange.id == row.range_id)).scalar_one()
    return row, group_id


def mark_joined(row: SeedBatch, left_out: list[str] | None = None) -> None:
    """Done; the posts left out of search (join_posts) stay said in its error."""
    row.state = BatchState.JOINED
    row.release_keys = None
    row.error = f"left out of search: {'; '.join(left_out)}"[:2000] if left_out else None


def join_posts(
    session: Session,
    group_id: int,
    release_keys: list[int],
    left_out: list[str] | None = None,
    read_names: Mapping[str, namecolumns.PostName] | None = None,
) -> int:
    """Work out afresh the posts of the names of these releases (see the module's doc), write the
    ones that changed and bring their rows of `posts` up to date; returns how many releases
    changed post. A post whose row PostgreSQL refuses for good (a value past one of its limits)
    is left out of `posts`, and said in left_out, rather than hold back the others.

    The cyclic garbage collector is paused meanwhile (app.collector): the join makes some tens of
    thousands of short-lived tuples and lists (the names' tokens, the rows), none in a cycle."""
    if not release_keys:
        return 0
    with collector_paused():
        return _join_posts(session, group_id, release_keys, left_out, read_names)


def _join_posts(
    session: Session,
    group_id: int,
    release_keys: list[int],
    left_out: list[str] | None,
    read_names: Mapping[str, namecolumns.PostName] | None,
) -> int:
    session.execute(text("SELECT pg_advisory_xact_lock(:lock, :g)"), {"lock": JOIN_LOCK, "g": group_id})
    # The planner told what the group holds before the join's statements are planned on it (under
    # the group's lock: a join of the group waiting for this one then finds it told).
    groupstats.keep_up(session, group_id)
    batch_keys = sorted(set(release_keys))
    rows = session.execute(NAMESAKES, {"g": group_id, "keys": array_literal(batch_keys)}).all()
    by_name: dict[int, list[Namesake]] = defaultdict(list)
    for row in rows:
        if row.name_hash is not None:
            by_name[row.name_hash].append(Namesake(*row[:7]))
    wanted: dict[int, int] = {}
    for namesakes in by_name.values():
        wanted.update(posts_of(namesakes))
    # Releases an inspection joined into the post of the par2 set listing their files stay there
    # (app.services.inspections.join_by_par2): in the post of their anchor release.
    pins = {
        release: (anchor, anchor_post)
        for release, anchor, anchor_post in session.execute(
            PINS, {"g": group_id, "keys": array_literal(sorted(set(wanted) | set(batch_keys)))}
        )
    }
    moved = {release: _pinned_post(release, pins, wanted) for release in pins}
    wanted.update(moved)
    pinned = set(moved.values())
    keys = sorted(wanted)
    current: dict[int, int] = (
        dict(session.execute(CURRENT, {"g": group_id, "keys": array_literal(keys)}).all()) if keys else {}
    )
    forget = [key for key in keys if wanted[key] == key and key in current]
    join = [key for key in keys if wanted[key] != key and current.get(key) != wanted[key]]
    if forget:
        session.execute(FORGET, {"g": group_id, "keys": array_literal(forget)})
    if join:
        session.execute(
            JOIN, {"g": group_id, "keys": array_literal(join), "posts": array_literal([wanted[key] for key in join])}
        )
    # The posts to sum again: those of the batch's releases (a release without a name to join is
    # a post of its own), and for a release that changed post, its post before and after. Every
    # release of such a post shares its name, so it is among the namesakes: `wanted` has them all.
    refresh = {wanted.get(key, key) for key in batch_keys}
    for key in (*forget, *join):
        refresh.update((current.get(key, key), wanted[key]))
    members: dict[int, list[int]] = defaultdict(list)
    for key, post in wanted.items():
        members[post].append(key)
    for key in batch_keys:
        if key not in wanted:
            members[key].append(key)
    refreshed = {post: members.get(post, []) for post in sorted(refresh)}
    releases = {row.key: (row.name, row.files_seen) for row in rows}
    if pinned & refresh:
        # A post holding releases of other names: its members as they are now, whatever names.
        held = sorted(pinned & refresh)
        for post in held:
            refreshed[post] = []
        for post, key in session.execute(POSTS_MEMBERS, {"g": group_id, "keys": array_literal(held)}):
            refreshed[post].append(key)
        unknown = sorted({key for keys in refreshed.values() for key in keys} - set(releases))
        if unknown:
            releases.update(
                (row.key, (row.name, row.files_seen))
                for row in session.execute(RELEASE_NAMES, {"g": group_id, "keys": array_literal(unknown)})
            )
    group = rows[0].group_name if rows else ""
    named = names_of(session, group_id, group, refreshed, releases, read_names)
    failed = refresh_posts_isolated(session, group_id, refreshed, named)
    inspections.queue(session, group_id, [post for post, keys in refreshed.items() if keys])
    if failed:
        metrics.posts_left_out(session, group_id, len(failed))
        if left_out is not None:
            left_out.extend(failed)
    return len(forget) + len(join)


def _pinned_post(release: int, pins: Mapping[int, tuple[int, int]], wanted: Mapping[int, int]) -> int:
    """The post of a pinned release: that of its anchor, or of the anchor's own anchor when the
    anchor is pinned too (a par2 set joined into another's post after it anchored this one), up
    the chain to a release that is not pinned, whatever order the pins were read in."""
    anchor, post = pins[release]
    seen = {release}
    while anchor in pins and anchor not in seen:
        seen.add(anchor)
        anchor, post = pins[anchor]
    return wanted.get(anchor, post)


class Inspected(NamedTuple):
    """What an inspection of a post found that its row keeps."""

    inner_name: str | None = None
    dropped_by: str | None = None
    password: int | None = None
    imdb: int | None = None
    tvdb: int | None = None
    tvmaze: int | None = None
    tmdb: int | None = None


NOT_INSPECTED = Inspected()


class Named(NamedTuple):
    """What a post's row gets of its name (the columns its name gives) and of its inspection."""

    name: namecolumns.PostName
    inspected: Inspected = NOT_INSPECTED


# What inspections found of these posts.
INSPECTIONS = text(
    "SELECT post_key, inner_name, dropped_by, password, imdb, tvdb, tvmaze, tmdb FROM post_inspections"
    " WHERE group_id = :g AND post_key = ANY(CAST(:keys AS bigint[])) AND state = 'done'"
)


# The share of the names a node read that the join reads again, to compare: a node whose reading
# differs from this code's though it says the same version (a defect: namecolumns.VERSION covers
# what is known to differ between processes) is counted (metrics.post_names) and overruled. Nodes
# are trusted with what they read of names as with the names themselves (their tokens are the
# operators'); the share read again tells a node that reads otherwise, not a node that lies.
VERIFY_SHARE = 1 / 32


def names_of(
    session: Session,
    group_id: int,
    group: str,
    posts: dict[int, list[int]],
    releases: dict[int, tuple[str, int]],
    read_names: Mapping[str, namecolumns.PostName] | None = None,
) -> dict[int, Named]:
    """What the names of these posts (post key -> its releases' keys) give (postnames): a post's
    name is the one an inspection told of it, else that of its release with the most files (the
    least key of those), as REFRESH_SEVERAL picks it; releases holds each release's (name, files
    seen). A name the node read (read_names) is not read again but for VERIFY_SHARE of them; the
    others are read here, and those named by a hash by their files' names (postnames.posts_named)."""
    chosen: dict[int, str] = {}
    for post, keys in posts.items():
        known = [key for key in keys if key in releases]
        if known:
            chosen[post] = releases[min(known, key=lambda k: (-releases[k][1], k))][0]
    inspected = (
        {
            row.post_key: Inspected(*row[1:])
            for row in session.execute(INSPECTIONS, {"g": group_id, "keys": array_literal(sorted(chosen))})
        }
        if chosen
        else {}
    )
    chosen.update((post, found.inner_name) for post, found in inspected.items() if found.inner_name)
    read_names = read_names or {}
    by_node: dict[int, namecolumns.PostName] = {}
    checked: dict[int, namecolumns.PostName] = {}
    for post, name in chosen.items():
        found = read_names.get(name)
        if found is not None:
            (checked if random.random() < VERIFY_SHARE else by_node)[post] = found
    here = postnames.posts_named(session, group_id, group, {p: n for p, n in chosen.items() if p not in by_node})
    disagreed = sum(here[post] != found for post, found in checked.items())
    if read_names:
        metrics.post_names(session, group, by_node=len(by_node) + len(checked) - disagreed, disagreed=disagreed)
    return {post: Named(columns, inspected.get(post, NOT_INSPECTED)) for post, columns in {**by_node, **here}.items()}


def refresh_posts_isolated(
    session: Session, group_id: int, posts: dict[int, list[int]], named: dict[int, Named]
) -> list[str]:
    """refresh_posts, all at once; when PostgreSQL refuses it with an error that would come again,
    post by post, each under a savepoint, leaving out those it refuses. Returns what was left out
    ("post KEY: error")."""
    try:
        with session.begin_nested():
            refresh_posts(session, group_id, posts, named)
        return []
    except DBAPIError as exc:
        if is_transient(exc):
            raise
    failed = []
    for post, keys in posts.items():
        try:
            with session.begin_nested():
                refresh_posts(session, group_id, {post: keys}, named)
        except DBAPIError as exc:
            if is_transient(exc):
                raise
            failed.append(f"post {post}: {type(exc.orig).__name__}: {str(exc.orig).splitlines()[0][:200]}")
    return failed


def refresh_posts(session: Session, group_id: int, posts: dict[int, list[int]], named: dict[int, Named]) -> None:
    """Sum these posts of the group (post key -> the keys of its releases) afresh from their
    releases into `posts`, with what their names give (named, by post key: names_of); a post of
    no release loses its row."""
    # A post a rule dropped for what its inspection found has no row, as one of no release.
    dropped = {post for post, found in named.items() if found.inspected.dropped_by}
    lone = [post for post, keys in posts.items() if keys == [post] and post in named and post not in dropped]
    several_posts = [
        post for post, keys in posts.items() if keys and keys != [post] and post in named and post not in dropped
    ]
    several = [(post, key) for post in several_posts for key in posts[post]]
    gone = [post for post, keys in posts.items() if not keys or post in dropped]
    if lone:
        session.execute(REFRESH_LONE, {"g": group_id, **_named_arrays(lone, named)})
    if several:
        session.execute(
            REFRESH_SEVERAL,
            {
                "g": group_id,
                "posts": array_literal([p for p, _ in several]),
                "keys": array_literal([k for _, k in several]),
                **_named_arrays(several_posts, named),
            },
        )
    if gone:
        session.execute(FORGET_POSTS, {"g": group_id, "keys": array_literal(gone)})


def _named_arrays(posts: list[int], named: dict[int, Named]) -> dict[str, str]:
    """The parameters of NAMED for these posts, as array literals (app.db.array_literal)."""
    rows = [named[p] for p in posts]
    # Most posts are not inspected: their findings' columns are NULLs alone, written at once.
    inspected = [row.inspected for row in rows if row.inspected is not NOT_INSPECTED]
    arrays: dict[str, Sequence[int | date | str | None]] = dict(postnames.arrays_of(posts, [row.name for row in rows]))
    if inspected:
        columns = list(zip(*(row.inspected for row in rows)))
        arrays.update((f"n_{field}", columns[Inspected._fields.index(field)]) for field in INSPECTED_FIELDS)
        return {name: array_literal(values) for name, values in arrays.items()}
    literals = {name: array_literal(values) for name, values in arrays.items()}
    nulls = "{" + ",".join(["NULL"] * len(rows)) + "}"
    literals.update((f"n_{field}", nulls) for field in INSPECTED_FIELDS)
    return literals


INSPECTED_FIELDS = ("inner_name", *INSPECTED)


def refresh_posts_of(session: Session, group_id: int, group: str, post_keys: list[int]) -> None:
    """Sum these posts' rows afresh (after inspections of them told their names, or joined
    releases into them), as a join of their releases would; the caller holds the join's lock of
    the group (JOIN_LOCK)."""
    posts: dict[int, list[int]] = {key: [] for key in post_keys}
    for post, key in session.execute(POSTS_MEMBERS, {"g": group_id, "keys": post_keys}):
        posts[post].append(key)
    members = [key for keys in posts.values() for key in keys]
    rows = session.execute(RELEASE_NAMES, {"g": group_id, "keys": members}).all() if members else []
    named = names_of(session, group_id, group, posts, {row.key: (row.name, row.files_seen) for row in rows})
    refresh_posts(session, group_id, posts, named)


# The releases of posts: each one's own key's, unless joined into another post, and those joined into it.
POSTS_MEMBERS = text("""
    SELECT p.key, p.key FROM unnest(CAST(:keys AS bigint[])) AS p(key)
     WHERE NOT EXISTS (SELECT FROM release_posts x WHERE x.group_id = :g AND x.key = p.key)
       AND EXISTS (SELECT FROM releases r WHERE r.group_id = :g AND r.key = p.key)
    UNION ALL
    SELECT x.post_key, x.key FROM release_posts x WHERE x.group_id = :g AND x.post_key = ANY(CAST(:keys AS bigint[]))
""")
RELEASE_NAMES = text(
    "SELECT key, name, files_seen FROM releases WHERE group_id = :g AND key = ANY(CAST(:keys AS bigint[]))"
)


def posts_of(namesakes: list[Namesake]) -> dict[int, int]:
    """Each release of one name -> its post's key, from the releases alone (see the module's doc).
    Sets are swept in the order they were posted within each (file count, mail domain), so a
    name posted thousands of times costs a sort, not a comparison of every pair."""
    post: dict[int, int] = {r.key: r.key for r in namesakes}
    sets = [r for r in namesakes if not r.companion]
    # The sets posted with dates, by (file count, mail domain): (first post, key, last post, set).
    runs: dict[tuple[int | None, str], list[tuple[datetime, int, datetime, Namesake]]] = defaultdict(list)
    for r in sets:
        if r.domain is not None and r.first_post is not None and r.last_post is not None:
            runs[(r.file_count, r.domain)].append((r.first_post, r.key, r.last_post, r))
    for run in runs.values():
        run.sort(key=itemgetter(0, 1))  # by first post, then key
        first, _, last, head = run[0]
        members = [head]
        for r_first, _, r_last, r in run[1:]:
            if r_first <= last + JOIN_GAP and max(last, r_last) - first <= MAX_POST_SPAN:
                members.append(r)
                last = max(last, r_last)
                continue
            _one_post(members, post)
            members, first, last = [r], r_first, r_last
        _one_post(members, post)
    for companion in namesakes:
        if companion.companion:
            near = [
                (gap, post[r.key]) for r in sets if (gap := _apart(companion, r)) is not None and gap <= COMPANION_GAP
            ]
            if near:
                post[companion.key] = min(near)[1]
    return post


def _one_post(members: list[Namesake], post: dict[int, int]) -> None:
    key = min(r.key for r in members)
    for r in members:
        post[r.key] = key


def _apart(a: Namesake, b: Namesake) -> timedelta | None:
    """The time between two releases' postings (zero when they overlap); None without dates."""
    if a.first_post is None or a.last_post is None or b.first_post is None or b.last_post is None:
        return None
    return max(b.first_post - a.last_post, a.first_post - b.last_post, timedelta(0))
