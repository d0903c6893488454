"""Search over the catalog's posts, and one post in detail.

What a user finds and downloads is a **post**: the releases app.services.ingest.posts joined
(release_posts), or a release of its own. A post is named by its key, a signed 64-bit integer (the
least key of its sets), unique within its group; the public id is that key in decimal.

Words are matched against release names as words: in the name and in the words asked for,
everything that is not a letter or a digit is a space, and words are compared without case
(the 'simple' text search configuration: no stemming, no stop words). So
``walking dead s03e06`` finds ``The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE``. Every
word must be in the name; the last one may be the start of a word (``walking de`` finds it too):
it is searched as the words of the catalog that start with it (post_words) when common ones are
among them or they are few, else by GIN's prefix match (_tsquery).
Nothing in the words is syntax: quotes, ``&``, ``|``, ``!``, ``:``, ``*``, parentheses and
backslashes are spaces like any other punctuation.

A search reads the table `posts` only (app.models.catalog.Post, kept by the join of
app.services.ingest.posts): a post matches when every word is in the words of its releases'
names (the column words, under a GIN index), and its figures (size, date, completion, the
posters of its releases) are the row's. Results come newest first (the post's last article, by
the index ix_posts_newest or ix_posts_group_newest), a page at a time. The posts that match are
counted up to COUNT_AHEAD past the page: when more match, the page says so (total_exact false,
total the count so far), so a client paging on while offset + limit < total never stops early,
and a search of a word half the catalog has costs no more than its page. Without words every
post of the catalog (or of the groups asked for) is a candidate.

Figures on 1,000,000 generated posts are in docs/benchmarks.md (bench/catalog.py). Every
search runs under a statement timeout (timeout_ms).
"""

from __future__ import annotations

import math
import operator
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

import psycopg
from psycopg.errors import QueryCanceled
from psycopg.rows import RowFactory, RowMaker, namedtuple_row
from sqlalchemy import RowMapping, text
from sqlalchemy.orm import Session

from app.db import driver_connection, driver_sql
from app.models.catalog import WORD_BREAK
from app.services.errors import NotFound, ServiceError
from app.services.fragments import file_articles
from app.services.groups import validate_group_name

DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000
MAX_OFFSET = 10_000
# Matching posts are counted this far past the page asked for, and no further: counting every
# post a common word has would cost more than the page itself, and a client paging on sees more.
COUNT_AHEAD = 100
# What a search's plan counts a page read as, and the memory each of its bitmaps and sorts may
# take (SEARCH_BEGIN).
SEARCH_PAGE_COST = 0.1
SEARCH_WORK_MEM = "16MB"
# Words beyond these bounds are refused: no real query needs more, and each word costs an index probe.
MAX_WORDS_LENGTH = 500
MAX_WORDS = 32
# The last word matches as the start of a word from this length on: a one-letter prefix would
# probe every word of the index that starts with it.
MIN_PREFIX = 2
# The words the catalog has that start with the last word are searched for by name when there are
# at most this many (GIN then skips through their posts as through any word's); past it, by GIN's
# own prefix match, which reads all their posts first.
PREFIX_WORDS = 64
# They are named when those among the most common words of the posts' names (as ANALYZE counted
# them, COMMON_WORDS, read again after COMMON_WORDS_SECONDS) are in this share of the posts
# or more: GIN's prefix match costs only then, and PostgreSQL estimates a prefix better than many
# rare words named (EXPLAIN ANALYZE on bench/catalog.py's 1,000,000 posts: it walked 340,000
# posts for 28 words of 610 posts, 1.1 s, where the prefix match took 7 ms).
COMMON_SHARE = 0.01
COMMON_WORDS_SECONDS = 60.0
# And when at most this many start with it, whatever their share: most often the word itself only.
# GIN's prefix match of a word read its posts slower than the word named, and kept its index from
# skipping through them with a window's times (timed once on bench/catalog.py's 1,000,000 posts:
# `buzase`, in 6,132 posts, counting its 401 newest in a window took 6.15 ms as a prefix, 3.8 named).
FEW_WORDS = 3
MAX_AGE_DAYS = 100 * 366
MAX_BIGINT = 2**63 - 1
SMALLINT = 32767
# A search holds its connection at most this long by default (the API's requests are bounded in time).
DEFAULT_TIMEOUT_MS = 10_000

# The words asked for, read by the very functions that read the names (app.models.catalog.POST_WORDS):
# the same characters are letters and digits, the same parser cuts words, the same lower-casing
# applies. With the last word (the one at the greatest position), when it is long enough to be
# matched as the start of a word, the words of the catalog's posts that start with it
# (post_words, a range of its bytewise key; PREFIX_WORDS + 1 at most, to tell too many).
QUERY_WORDS = text(f"""
    WITH asked AS (
        SELECT lexeme, positions[array_upper(positions, 1)] AS position
          FROM unnest(to_tsvector('simple'::regconfig,
                      regexp_replace(CAST(:words AS text), CAST(:word_break AS text), ' ', 'g')))
    ), last AS (
        SELECT lexeme FROM asked ORDER BY position DESC, lexeme DESC LIMIT 1
    ), starting AS (
        SELECT l.lexeme, ARRAY(
                   SELECT DISTINCT w.word FROM post_words w
                    WHERE w.word >= l.lexeme COLLATE "C" AND w.word < (l.lexeme || chr(1114111)) COLLATE "C"
                    ORDER BY w.word LIMIT {PREFIX_WORDS + 1}) AS words
          FROM last l WHERE length(l.lexeme) >= {MIN_PREFIX}
    )
    SELECT a.lexeme, a.position, s.words AS starting
      FROM asked a LEFT JOIN starting s ON s.lexeme = a.lexeme
""")

# The same as psycopg runs it (_tsquery): through SQLAlchemy's execution it cost the API 0.3 - 0.45 ms
# more of CPU (docs/benchmarks.md, "A search's statements through psycopg").
QUERY_WORDS_SQL = driver_sql(QUERY_WORDS.text)

# What a post's summary is read from (PostSummary), its NZB's downloads with it (a probe of
# post_grabs' key a post of the page).
POST_COLUMNS = """p.key, p.group_id, p.name, p.poster, p.releases, p.files_seen AS files, p.parts_expected,
    p.parts_seen, p.bytes, p.completion, p.first_post, p.last_post, p.category, p.title, p.year, p.season,
    p.episode, p.episode_last, p.air_date, p.resolution, p.source, p.video, p.languages, p.password, p.imdb,
    p.tvdb, p.tvmaze, p.tmdb,
    coalesce((SELECT x.grabs FROM post_grabs x WHERE x.group_id = p.group_id AND x.post_key = p.key), 0) AS grabs"""
# The posts matching the filters, a page of them newest first.
PAGE = (
    """
    SELECT """
    + POST_COLUMNS
    + """
      FROM posts p
     WHERE {filters}
     ORDER BY p.last_post DESC NULLS LAST, p.group_id, p.key
     LIMIT :limit OFFSET :offset
"""
)
# The posts matching the filters, newest first, up to the count's bound.
_NEWEST_MATCHES = """SELECT p.group_id, p.key, p.last_post FROM posts p
         WHERE {filters}
         ORDER BY p.last_post DESC NULLS LAST, p.group_id, p.key
         LIMIT :count_limit"""
# SEARCH's CTE matching: those posts.
MATCHING = f"""
    matching AS MATERIALIZED (
        {_NEWEST_MATCHES}
    )"""
# The newest posts of several categories, each category's newest from ix_posts_category_newest,
# merged: for categories of few posts, where `category = ANY(...)` walks every post newest first
# and drops the others' (the newest 200 of categories 2045 and 7020, 5.5% of bench/catalog.py's
# 1,000,000 posts: 0.25 - 0.53 ms so, 6.0 - 40.5 ms by `= ANY`; EXPLAIN ANALYZE). The same posts:
# a post is in one category, so the newest of all are among the newest of each.
MATCHING_BY_CATEGORY = f"""
    matching AS MATERIALIZED (
        SELECT m.* FROM unnest(CAST(:categories AS smallint[])) AS c(category)
         CROSS JOIN LATERAL ({_NEWEST_MATCHES.format(filters="p.category = c.category")}) m
         ORDER BY m.last_post DESC NULLS LAST, m.group_id, m.key
         LIMIT :count_limit
    )"""
# The posts since :window, an hour's start: those whose times (the column times, migration 0027)
# are among :window_times, the hours from the window's start on, and those posted from :window_end
# on, past those hours (posted after the search began, or dated ahead). The words' index holds the
# times with the words, and intersects both: only the posts in the window are fetched
# (window_times).
_WINDOW = "p.last_post >= :window AND (p.times @@ CAST(:window_times AS tsquery) OR p.last_post >= :window_end)"
# The same, looked for among the posts since :window first (windowed), and among all of them only
# when fewer than the count's bound are there: that part is gated by a one-time filter, which
# PostgreSQL tests before running it. Either way the posts are those MATCHING gives: every post
# since the window is newer than any before it (NULL last: never among the newest).
MATCHING_WINDOWED = f"""
    windowed AS MATERIALIZED (
        {_NEWEST_MATCHES.format(filters="{filters} AND " + _WINDOW)}
    ), matching AS MATERIALIZED (
        SELECT * FROM windowed WHERE (SELECT count(*) FROM windowed) >= :count_limit
        UNION ALL
        ({_NEWEST_MATCHES.format(filters="{filters} AND (SELECT count(*) FROM windowed) < :count_limit")})
    )"""
# The count and the page in one statement, each post with its group's name. The posts matching
# are read once, newest first, up to the count's bound: the page is cut from them. PostgreSQL picks
# how: for words many posts have, the newest-first index walked until the bound (a search's
# count then costs little more than its page); for words few posts have, every match found by the
# words' index, then sorted (SEARCH_BEGIN's page costs make that choice right, see there); for
# words between (_window), first among the newest posts (MATCHING_WINDOWED). One row a post of the
# page, each with the count; a row without a post (key null) when the page is empty.
SEARCH = (
    """
    WITH {matching}, counted AS MATERIALIZED (
        SELECT count(*) AS total FROM matching
    ), page_keys AS (
        SELECT m.group_id, m.key FROM matching m
         ORDER BY m.last_post DESC NULLS LAST, m.group_id, m.key LIMIT :limit OFFSET :offset
    )
    SELECT counted.total, page.*, g.name AS group_name
      FROM counted
      LEFT JOIN LATERAL (
        SELECT """
    + POST_COLUMNS
    + """
          FROM page_keys k JOIN posts p ON p.group_id = k.group_id AND p.key = k.key
      ) AS page ON true
      LEFT JOIN groups g ON g.id = page.group_id
     ORDER BY page.last_post DESC NULLS LAST, page.group_id, page.key
"""
)

# A search's work runs in a savepoint of its own with these settings, and the savepoint is rolled
# back afterwards: the search wrote nothing, and rolling back gives the settings their old values.
# The savepoint, its settings, the search and the rollback go to the server in one pipeline
# (_bounded_run): one round trip. The settings (JIT is off for every connection, app.db): its statement timeout; and the
# cost of reading a page as that of a page in memory. With PostgreSQL's defaults (seq_page_cost 1,
# random_page_cost 4), a match fetched by the words' index is priced 19 times a row of the
# newest-first index walked, where it takes twice as long (EXPLAIN ANALYZE on bench/catalog.py's
# 1,000,000 posts: 3.2 against 1.6 µs, the words matched on each row walked), so a word 4,000 posts
# have walked 41,000 rows for a count of 200 (66 ms) instead of fetching its 4,000 (15 ms). At 0.1,
# 5 times: the choice follows the time from a few thousand matches up. And SEARCH_WORK_MEM for the
# words' bitmap: a last word matched as a prefix puts every post of every word starting with it in
# the bitmap, which on 10,000,000 posts outgrows PostgreSQL's default 4 MB and goes lossy, and every
# row of its pages is then read again (EXPLAIN ANALYZE of `internal bluray` on bench/catalog.py's
# 10,000,000 posts: 1,346,373 rows, 2.7 s; 0.74 s in 16 MB).
SEARCH_SETTINGS = (
    "SELECT set_config('statement_timeout', '{timeout_ms}ms', true),"
    f" set_config('seq_page_cost', '{SEARCH_PAGE_COST}', true), set_config('random_page_cost', '{SEARCH_PAGE_COST}', true),"
    f" set_config('work_mem', '{SEARCH_WORK_MEM}', true)"
)
SEARCH_SAVEPOINT = "SAVEPOINT search_posts"
SEARCH_ROLLBACK = ("ROLLBACK TO SAVEPOINT search_posts", "RELEASE SAVEPOINT search_posts")
# The same as one text each (statements without parameters may go together): for a caller that
# plans a search's statement as the search runs it (EXPLAIN).
SEARCH_BEGIN = f"{SEARCH_SAVEPOINT}; {SEARCH_SETTINGS}"
SEARCH_END = "; ".join(SEARCH_ROLLBACK)

# The group of a post key, or of a release key joined into a post: the least group id that has it
# (a key is unique within a group; crossposts share keys across groups). Probed group by group, so
# that each probe keeps to an index led by the group.
POST_GROUP = text("""
    SELECT g.id FROM groups g
     WHERE (CAST(:group_id AS integer) IS NULL OR g.id = :group_id)
       AND (EXISTS (SELECT FROM posts p WHERE p.group_id = g.id AND p.key = :key)
            OR EXISTS (SELECT FROM release_posts x WHERE x.group_id = g.id AND x.key = :key))
     ORDER BY g.id LIMIT 1
""")
POST_KEY = text("SELECT coalesce((SELECT post_key FROM release_posts WHERE group_id = :g AND key = :key), :key)")
POST_ROW = text(PAGE.format(filters="p.group_id = :g AND p.key = :key"))
# The releases of a post: its own key's, unless that release was joined into another post, and the
# releases joined into it (ix_release_posts_post).
POST_RELEASES = text("""
    WITH members AS (
        SELECT CAST(:key AS bigint) AS key
         WHERE NOT EXISTS (SELECT FROM release_posts x WHERE x.group_id = :g AND x.key = :key)
        UNION ALL
        SELECT x.key FROM release_posts x WHERE x.group_id = :g AND x.post_key = :key
    )
    SELECT r.key, r.name, r.poster, r.file_count, r.files_seen, r.parts_expected, r.parts_seen, r.bytes,
           r.completion, r.first_post, r.last_post, r.metadata_only
      FROM members m JOIN releases r ON r.group_id = :g AND r.key = m.key
     ORDER BY r.first_post NULLS LAST, r.key
""")
# A post's files in posting order, each with what the catalog holds of its articles (by the
# index of files by release, and the packs' index of their files).
POST_FILES = text(f"""
    SELECT f.key, f.release_key, f.name, f.subject, coalesce(f.poster, r.poster) AS poster, f.posted_at,
           f.file_index, f.file_count, f.parts, s.seen, s.bytes
      FROM files f
      JOIN releases r ON r.group_id = f.group_id AND r.key = f.release_key
     CROSS JOIN LATERAL (SELECT count(*) AS seen, coalesce(sum(x.bytes), 0) AS bytes
                           FROM ({file_articles(":g", "f.key")}) x) s
     WHERE f.group_id = :g AND f.release_key = ANY(:releases)
     ORDER BY f.posted_at NULLS LAST, f.file_index NULLS LAST, f.name, f.key
""")


POST_INSPECTION = text("""
    SELECT state, reason, inner_name, password, flags, files, nfo, imdb, tvdb, tvmaze, tmdb, dropped_by
      FROM post_inspections WHERE group_id = :g AND post_key = :key
""")


class SearchTimeout(ServiceError):
    """A search that ran longer than its time bound."""

    status = 503
    code = "search_timeout"


class SearchError(ServiceError, ValueError):
    """A search the service refuses (a limit, offset, size or age out of bounds, too many words);
    a ValueError, and a ServiceError for the CLI and the API."""

    code = "bad_search"


@dataclass(slots=True)
class PostSummary:
    """A post as a search finds it: its figures summed over all its releases. name and poster are
    those of its release with the most files; completion is a percentage (0 to 100). category and
    the fields after it are what its name says (app.services.postnames; None where it does not
    tell).

    Made a page at a time, so made cheaply: with slots and without frozen (whose __init__ sets each
    field through object.__setattr__), and by position (_page_rows). A page of 100 took 0.74 ms
    with frozen fields by name, 0.04 ms so (one-off timing on this machine, docs/benchmarks.md)."""

    key: int
    group_id: int
    group: str
    name: str
    poster: str
    releases: int
    files: int
    parts_expected: int
    parts_seen: int
    bytes: int
    completion: float
    first_post: datetime | None
    last_post: datetime | None
    category: int = 8010
    title: str | None = None
    year: int | None = None
    season: int | None = None
    episode: int | None = None
    episode_last: int | None = None
    air_date: date | None = None
    resolution: int | None = None
    source: str | None = None
    video: str | None = None
    languages: str | None = None
    password: int | None = None  # newznab's, from an inspection: 0 none, 1 passworded, 2 an inner archive
    imdb: int | None = None
    tvdb: int | None = None
    tvmaze: int | None = None
    tmdb: int | None = None
    grabs: int = 0  # its NZB's downloads (app.services.grabs)


# The ids of other databases a post's inspection may have found (posts' columns of those names).
ID_COLUMNS = ("imdb", "tvdb", "tvmaze", "tmdb")


@dataclass(frozen=True)
class SearchPage:
    """One page of a search: `total` posts match (when total_exact; else at least that many, the
    count having stopped COUNT_AHEAD past the page), `items` are those from `offset` on, newest
    first."""

    total: int
    limit: int
    offset: int
    items: list[PostSummary] = field(default_factory=list)
    total_exact: bool = True


@dataclass(frozen=True)
class ReleaseInfo:
    key: int
    name: str
    poster: str
    file_count: int | None
    files_seen: int
    parts_expected: int
    parts_seen: int
    bytes: int
    completion: float
    first_post: datetime | None
    last_post: datetime | None
    metadata_only: bool


@dataclass(frozen=True)
class FileInfo:
    """A file of a post: parts_expected is the count its subject announces (None when it has
    none), parts_seen the articles the catalog holds of it, bytes theirs."""

    key: int
    release_key: int
    name: str
    subject: str
    poster: str
    posted_at: datetime | None
    file_index: int | None
    file_count: int | None
    parts_expected: int | None
    parts_seen: int
    bytes: int


@dataclass(frozen=True)
class InspectionInfo:
    """What an inspection of the post found (app.services.inspections), as far as it went."""

    state: str
    reason: str
    inner_name: str | None
    password: int | None
    flags: list[str]
    files: list[dict[str, Any]]  # name, size, source: the files its par2 set lists and its archive holds
    nfo: str | None
    imdb: int | None
    tvdb: int | None
    tvmaze: int | None
    tmdb: int | None
    dropped_by: str | None


@dataclass(frozen=True)
class PostDetails:
    post: PostSummary
    releases: list[ReleaseInfo]
    files: list[FileInfo]
    inspection: InspectionInfo | None = None


def search_posts(
    session: Session,
    words: str | Sequence[str] | None,
    *,
    group: str | Sequence[str] | None = None,
    poster: str | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    posted_after: datetime | None = None,
    posted_before: datetime | None = None,
    max_age_days: float | None = None,
    min_completion: float | None = None,
    categories: Iterable[int] | None = None,
    season: int | None = None,
    episode: int | None = None,
    air_date: date | None = None,
    year: int | None = None,
    ids: dict[str, int] | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
) -> SearchPage:
    """The posts matching every word (see the module's doc) and every filter, newest first.

    categories: newznab category ids, a post of any of them (a parent id, 5000, takes its
    subcategories). season, episode, air_date and year: what the post's name says (a season
    pack has its season and no episode, so a search of a season finds it and every episode of
    it; an episode finds the posts whose episodes span it). ids: {"imdb": 133093, ...}, what a
    post's inspection found (ID_COLUMNS), any one given, and the posts of the same title and
    year as one that has them.
    group: a group name, or several (a post of any of them); an unknown one is NotFound.
    poster: a part of the poster of any of the post's releases, without case. min_size and
    max_size: the post's bytes. posted_after, posted_before and max_age_days: the post's last
    article. min_completion: a percentage. No words (or words of punctuation only) and no filter
    give the newest posts. Bounds out of range raise SearchError (a ValueError); a search that runs
    longer than timeout_ms (None: no bound) raises SearchTimeout, leaving the session usable."""
    limit = _bounded_int("limit", limit, 1, MAX_LIMIT)
    if timeout_ms is not None:
        timeout_ms = _bounded_int("timeout_ms", timeout_ms, 1, 3_600_000)
    offset = _bounded_int("offset", offset, 0, MAX_OFFSET)
    count_limit = offset + limit + COUNT_AHEAD
    params: dict[str, object] = {"limit": limit, "offset": offset, "count_limit": count_limit}
    filters = []

    query, shares, prefixed = _tsquery(session, words)
    if query is not None:
        filters.append("p.words @@ CAST(:query AS tsquery)")
        params["query"] = query
    group_ids = _group_ids(session, group)
    if group_ids is not None:
        # One group by equality: its posts come newest first from ix_posts_group_newest.
        filters.append("p.group_id = ANY(:group_ids)" if len(group_ids) > 1 else "p.group_id = :group_id")
        params["group_ids"], params["group_id"] = group_ids, group_ids[0]
    if poster is not None and (poster := _clean(poster).strip()):
        if len(poster) > MAX_WORDS_LENGTH:
            raise SearchError(f"the poster is longer than {MAX_WORDS_LENGTH} characters")
        params["poster"] = poster.lower()
        filters.append("strpos(lower(p.posters), :poster) > 0")
    category_sets = _category_sets(categories) if categories is not None else None
    narrowed: float | None = 1.0  # the share of the posts in the categories asked for
    narrow = False  # whether they hold fewer than WINDOW_NARROWED of the posts
    if category_sets is not None:
        narrowed = _category_share(_statistics(session).categories, *category_sets)
        narrow = narrowed is None or narrowed < WINDOW_NARROWED
        filters.append(_category_filter(*category_sets, params, narrow=narrow))
    for column, value, high in (("season", season, SMALLINT), ("year", year, SMALLINT)):
        if value is not None:
            params[column] = _bounded_int(column, value, 0, high)
            filters.append(f"p.{column} = :{column}")
    if episode is not None:
        params["episode"] = _bounded_int("episode", episode, 0, SMALLINT)
        filters.append("p.episode <= :episode AND p.episode_last >= :episode")
    if ids:
        filters.append(_ids_filter(session, ids, params))
    if air_date is not None:
        if not isinstance(air_date, date) or isinstance(air_date, datetime):
            raise SearchError(f"air_date must be a date, not {air_date!r}")
        params["air_date"] = air_date
        filters.append("p.air_date = :air_date")
    if min_size is not None:
        params["min_size"] = _bounded_int("min_size", min_size, 0, MAX_BIGINT)
        filters.append("p.bytes >= :min_size")
    if max_size is not None:
        params["max_size"] = _bounded_int("max_size", max_size, 0, MAX_BIGINT)
        filters.append("p.bytes <= :max_size")
    if min_completion is not None:
        params["min_completion"] = _bounded_number("min_completion", min_completion, 0, 100)
        filters.append("p.completion >= :min_completion")
    if max_age_days is not None:
        params["max_age"] = _bounded_number("max_age_days", max_age_days, 0, MAX_AGE_DAYS)
        filters.append("p.last_post >= now() - :max_age * interval '1 day'")
    if posted_after is not None:
        params["after"] = _moment("posted_after", posted_after)
        filters.append("p.last_post >= :after")
    if posted_before is not None:
        params["before"] = _moment("posted_before", posted_before)
        filters.append("p.last_post <= :before")

    where = " AND ".join(filters) or "true"
    matching = MATCHING.format(filters=where)
    # Several narrow categories alone, without words or other filters (Sonarr's RSS sync sends
    # cat=5030,5040): each one's newest posts, merged. With words, the same was not faster.
    several = category_sets is not None and not category_sets[0] and len(category_sets[1]) > 1
    if query is None and len(filters) == 1 and narrow and several:
        matching = MATCHING_BY_CATEGORY
    # Words alone, or words and categories (what Radarr's searches send), are windowed.
    if query is not None and len(filters) == 1 + (category_sets is not None):
        window = _window(session, shares, prefixed, count_limit, narrowed)
        times = window_times(window, datetime.now(UTC)) if window is not None else None
        if times is not None:
            params["window"], params["window_times"], params["window_end"] = times
            matching = MATCHING_WINDOWED.format(filters=where)
    rows = _bounded_run(session, SEARCH.format(matching=matching), params, timeout_ms, row_factory=_page_rows)
    total: int = rows[0][0]
    items = [post for _, post in rows if post is not None]
    return SearchPage(total=total, limit=limit, offset=offset, items=items, total_exact=total < count_limit)


# The columns of SEARCH a PostSummary's fields are read from, where the names differ.
SUMMARY_COLUMNS = {"group": "group_name"}


def _page_rows(cursor: psycopg.Cursor[Any]) -> RowMaker[tuple[int, PostSummary | None]]:
    """A psycopg row factory for SEARCH's rows: (the count, the post, None on the row of an empty
    page), each post made from its columns by position, found by name once a statement."""
    names = [column.name for column in cursor.description or ()]
    total, key = names.index("total"), names.index("key")
    columns = operator.itemgetter(*(names.index(SUMMARY_COLUMNS.get(f.name, f.name)) for f in fields(PostSummary)))

    def row(values: Sequence[Any]) -> tuple[int, PostSummary | None]:
        return values[total], PostSummary(*columns(values)) if values[key] is not None else None

    return row


def _category_sets(categories: Iterable[int]) -> tuple[list[int], list[int]]:
    """The parents (multiples of 1000, each taking its subcategories, as newznab clients expect)
    and the other categories asked for, each once."""
    wanted = sorted({_bounded_int("category", c, 0, 9999) for c in categories})
    parents = [c for c in wanted if c % 1000 == 0]
    return parents, [c for c in wanted if c % 1000 and c // 1000 * 1000 not in parents]


def _category_filter(parents: list[int], exact: list[int], params: dict[str, object], *, narrow: bool) -> str:
    """The filter of posts in any of these categories (_category_sets); none matches nothing.

    One narrow category alone (fewer posts than WINDOW_NARROWED's share) is tested by equality, as
    one group is: its posts then come newest first from ix_posts_category_newest, which PostgreSQL
    walks for words many of them have, where with `= ANY` it walked every post newest first
    (EXPLAIN ANALYZE on bench/catalog.py's 1,000,000 posts, category 2045, 5% of them: `720p` 113 ms
    so, 16 by equality; `2160p` 95 and 1.4). A category of many posts is windowed instead
    (_window), and by equality PostgreSQL walked it for words of a few hundred posts (84.6 ms
    against 13.5 for the slowest of 200 searches in category 2040, 39%, /tmp/ps/catwin.py)."""
    if narrow and exact and not parents and len(exact) == 1:
        params["category"] = exact[0]
        return "p.category = CAST(:category AS smallint)"
    tests = [f"p.category BETWEEN {p} AND {p + 999}" for p in parents]
    if exact:
        params["categories"] = exact
        tests.append("p.category = ANY(CAST(:categories AS smallint[]))")
    return "(" + " OR ".join(tests) + ")" if tests else "false"


def _bounded_run(
    session: Session,
    statement: str,
    params: dict[str, object],
    timeout_ms: int | None,
    *,
    row_factory: RowFactory[Any],
) -> list[Any]:
    """The statement's rows (a text() statement's SQL) as row_factory makes them, in a savepoint of
    its own with SEARCH_SETTINGS. The savepoint is rolled back either way, so the caller's transaction goes on
    after a search that timed out, with its settings as they were.

    The savepoint, the settings, the statement and the rollback go in one psycopg pipeline, and
    the rows come from psycopg itself: with SQLAlchemy's execution and result
    layers, and a round trip each, the same search cost both the API and PostgreSQL more CPU
    (docs/benchmarks.md, "A search's statements through psycopg")."""
    with driver_connection(session) as connection:
        try:
            with connection.pipeline():
                connection.execute(SEARCH_SAVEPOINT)
                connection.execute(SEARCH_SETTINGS.format(timeout_ms=int(timeout_ms or 0)))
                cursor = connection.cursor(row_factory=row_factory)
                cursor.execute(driver_sql(statement), params)
                for step in SEARCH_ROLLBACK:
                    connection.execute(step)
            return cursor.fetchall()
        except psycopg.Error as exc:
            if not (connection.broken or connection.closed):  # a connection lost has no savepoint
                connection.execute(SEARCH_END)
            if isinstance(exc, QueryCanceled):
                bound = f"longer than {timeout_ms:,} ms" if timeout_ms is not None else "too long"
                raise SearchTimeout(f"the search ran {bound}: give more words or filters") from None
            raise


def find_post(session: Session, post_key: int, group_id: int | None = None) -> PostSummary:
    """A post's summary by its key (in its group, or in the least group that has it), without its
    files: a few index probes. The key of a release joined into a post gives that post. NotFound
    when no post or release has the key."""
    key = _bounded_int("post key", post_key, -(2**63), MAX_BIGINT, error=NotFound)
    if group_id is not None:
        group_id = _bounded_int("group id", group_id, -(2**31), 2**31 - 1, error=NotFound)
    found = session.execute(POST_GROUP, {"key": key, "group_id": group_id}).scalar()
    if found is None:
        raise NotFound(
            f"no post {key}" + (f" in group {group_id}" if group_id is not None else ""), code="unknown_post"
        )
    key = session.execute(POST_KEY, {"g": found, "key": key}).scalar_one()
    row = session.execute(POST_ROW, {"g": found, "key": key, "limit": 1, "offset": 0}).mappings().first()
    if row is None:  # a release key joined into a post whose releases are all gone
        raise NotFound(f"no post {post_key}", code="unknown_post")
    return _summary({**row, "group_name": _group_names(session, {found})[found]})


def post_details(session: Session, post_key: int, group_id: int | None = None) -> PostDetails:
    """A post (find_post) with its releases and its files."""
    post = find_post(session, post_key, group_id)
    params = {"g": post.group_id, "key": post.key}
    releases = [ReleaseInfo(**row) for row in session.execute(POST_RELEASES, params).mappings()]
    files = [
        FileInfo(
            key=row.key,
            release_key=row.release_key,
            name=row.name,
            subject=row.subject,
            poster=row.poster,
            posted_at=row.posted_at,
            file_index=row.file_index,
            file_count=row.file_count,
            parts_expected=row.parts,
            parts_seen=row.seen,
            bytes=row.bytes,
        )
        for row in session.execute(POST_FILES, {"g": post.group_id, "releases": [r.key for r in releases]})
    ]
    row = session.execute(POST_INSPECTION, params).first()
    inspection = None
    if row is not None:
        inspection = InspectionInfo(
            state=row.state,
            reason=row.reason,
            inner_name=row.inner_name,
            password=row.password,
            flags=row.flags.split(",") if row.flags else [],
            files=row.files or [],
            nfo=zlib.decompress(row.nfo).decode("utf-8") if row.nfo else None,
            imdb=row.imdb,
            tvdb=row.tvdb,
            tvmaze=row.tvmaze,
            tmdb=row.tmdb,
            dropped_by=row.dropped_by,
        )
    return PostDetails(post=post, releases=releases, files=files, inspection=inspection)


def _group_names(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(session.execute(text("SELECT id, name FROM groups WHERE id = ANY(:ids)"), {"ids": sorted(ids)}).all())


def _summary(row: RowMapping | Mapping[str, Any]) -> PostSummary:
    """A post from a row of PAGE's columns by name (the one post of find_post; pages are made by
    position, _page_rows, from the same columns)."""
    return PostSummary(*(row[SUMMARY_COLUMNS.get(f.name, f.name)] for f in fields(PostSummary)))


def _tsquery(session: Session, words: str | Sequence[str] | None) -> tuple[str | None, list[float | None], bool]:
    """The words as a tsquery's text: every word, the last one also as the start of a word (the
    words of the catalog that start with it, or a prefix match when there are more than
    PREFIX_WORDS); None when the words hold no letter or digit. The words are cut by the server
    (QUERY_WORDS), so they are exactly the words of the names; each is quoted, so nothing in them is
    tsquery syntax. With it, the share of the posts each of its words is in by PostgreSQL's
    statistics (the last one's: of the words starting with it), None for a word not among their
    common words (a few posts have it); and whether the last word is GIN's prefix match."""
    if words is None:
        return None, [], False
    joined = _clean(words if isinstance(words, str) else " ".join(str(w) for w in words))
    if len(joined) > MAX_WORDS_LENGTH:
        raise SearchError(f"the words are longer than {MAX_WORDS_LENGTH} characters")
    if not joined.strip():
        return None, [], False
    with driver_connection(session) as connection:  # psycopg's own execution: a search's every call
        cursor = connection.cursor(row_factory=namedtuple_row)
        lexemes: list[Any] = cursor.execute(QUERY_WORDS_SQL, {"words": joined, "word_break": WORD_BREAK}).fetchall()
    if not lexemes:
        return None, [], False
    if len(lexemes) > MAX_WORDS:
        raise SearchError(f"more than {MAX_WORDS} different words")
    ordered = sorted(lexemes, key=lambda row: (row.position, row.lexeme))
    terms = [_quoted(row.lexeme) for row in ordered]
    common = _statistics(session).words
    shares: list[float | None] = [common.get(row.lexeme) for row in ordered]
    last = ordered[-1]
    prefixed = False
    if last.starting is not None:  # long enough to be the start of a word
        starting = sum(common.get(word, 0.0) for word in last.starting)
        if len(last.starting) <= PREFIX_WORDS and (starting >= COMMON_SHARE or 0 < len(last.starting) <= FEW_WORDS):
            # Named, when a common word is among them (GIN's prefix match would read all their
            # posts), or when they are few (GIN's prefix match costs more than their words).
            named = " | ".join(map(_quoted, last.starting))
            terms[-1] = named if len(last.starting) == 1 else f"({named})"
            shares[-1] = starting or None
        else:
            # Many rare words (their posts are few, and PostgreSQL's estimate of a prefix is better
            # than of many words), or too many to name (and then too many to tell their share).
            terms[-1] += ":*"
            shares[-1] = starting if len(last.starting) <= PREFIX_WORDS and starting > 0 else None
            prefixed = True
    return " & ".join(terms), shares, prefixed


# The words most common in the posts' names and the share of the posts each is in, as ANALYZE last
# counted them: those of the statistics object posts_word_shares (migration 0028: the 10,000
# commonest), or, before an ANALYZE has filled it, the column's own (pg_stats of posts.words).
COMMON_WORDS = text("""
    WITH posts AS (
        SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.oid = CAST('posts' AS regclass)
    ), counted AS (
        SELECT 1 AS source, CAST(CAST(e.most_common_elems AS text) AS text[]) AS words,
               e.most_common_elem_freqs AS shares
          FROM pg_stats_ext_exprs e JOIN posts ON e.statistics_schemaname = posts.nspname
         WHERE e.statistics_name = 'posts_word_shares' AND e.most_common_elems IS NOT NULL
        UNION ALL
        SELECT 2, CAST(CAST(t.most_common_elems AS text) AS text[]), t.most_common_elem_freqs
          FROM pg_stats t JOIN posts ON t.schemaname = posts.nspname
         WHERE t.tablename = 'posts' AND t.attname = 'words'
         ORDER BY source LIMIT 1
    )
    SELECT f.word, f.share
      FROM counted, unnest(counted.words, counted.shares) AS f(word, share)
     WHERE f.word IS NOT NULL
""")
# The posts' count and the bounds of the histogram of their last articles (oldest first, each
# bucket about as many posts), by the same statistics.
# And the share of the posts in each of their commonest categories (a category is one of some
# fifty, so most often all of them).
NEWEST = text("""
    SELECT c.reltuples AS posts, CAST(CAST(t.histogram_bounds AS text) AS timestamptz[]) AS bounds,
           CAST(CAST(k.most_common_vals AS text) AS smallint[]) AS categories,
           k.most_common_freqs AS category_shares
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_stats t ON t.schemaname = n.nspname AND t.tablename = 'posts' AND t.attname = 'last_post'
      LEFT JOIN pg_stats k ON k.schemaname = n.nspname AND k.tablename = 'posts' AND k.attname = 'category'
     WHERE c.oid = CAST('posts' AS regclass)
""")


@dataclass(frozen=True)
class _Statistics:
    words: dict[str, float]  # COMMON_WORDS
    posts: float  # NEWEST
    bounds: list[datetime]
    categories: dict[int, float]


_statistics_read: tuple[float, _Statistics] | None = None


def _statistics(session: Session) -> _Statistics:
    """COMMON_WORDS and NEWEST, read again once COMMON_WORDS_SECONDS old (each process; what they
    decide is how a search runs, never what it finds)."""
    global _statistics_read
    now = time.monotonic()
    if _statistics_read is None or now - _statistics_read[0] >= COMMON_WORDS_SECONDS:
        words = {word: float(share) for word, share in session.execute(COMMON_WORDS)}
        newest = session.execute(NEWEST).one_or_none()
        posts, bounds = (float(newest.posts), list(newest.bounds or [])) if newest is not None else (0.0, [])
        categories: dict[int, float] = {}
        if newest is not None and newest.categories:
            categories = {int(c): float(f) for c, f in zip(newest.categories, newest.category_shares, strict=True)}
        _statistics_read = (now, _Statistics(words, posts, bounds, categories))
    return _statistics_read[1]


def forget_common_words() -> None:
    """The next search reads the statistics again (after an ANALYZE that should count at once)."""
    global _statistics_read
    _statistics_read = None


# A search of words has its page looked for among the newest posts first (MATCHING_WINDOWED), in a
# window WINDOW_MARGIN times as large as their share of the posts (by the statistics, each word's
# multiplied) says holds the count's bound, when they are in between: in at most WINDOW_SHARE of
# the posts (commoner words are found by a short walk of the newest-first index), in at least
# WINDOW_MATCHES times the count's bound (fewer are fetched whole by the words' index at little
# cost), and a last word matched by GIN's prefix match in at most WINDOW_WORD_POSTS posts (the
# prefix match reads every post of its words into a bitmap before the times narrow them). Between
# them the walk reads ten posts and more for each one it keeps, and fetching every match costs as
# much, where the words' index intersects the words with the window's hours (the posts' times,
# window_times) and only the posts in both are fetched. EXPLAIN ANALYZE on bench/catalog.py's
# 1,000,000 posts: `bizesiki`, in 4,293 posts, 28.9 ms with the window a range of the
# newest-first index (4,180 pages fetched), 2.8 ms in its days (434; the times' first form, days,
# 470 pages with hours); `ddp5`, in 2.5% of the posts, 15.6 ms walked (9,351 posts read), 1.6 ms
# in its days; `2160p multi`, 1,769 posts, 9.2 ms fetched whole. Words in more than 10% of the posts are walked in 2,000 posts or fewer
# (3 ms), little more than a window costs.
WINDOW_SHARE = 0.1
WINDOW_MATCHES = 5
# With categories, each post of the window that has the words is fetched before the categories
# narrow them: 1 / their share as many as the page needs. So windows only for categories in a
# quarter of the posts or more (timed once on bench/catalog.py's 1,000,000 posts, 200 searches of
# its words, in process: in category 2040, 38.6% of them, p95 8.7 ms against 17.6 without windows,
# the slowest 12.1 against 66.4; in 2045, 5%, words of a few percent took 43 - 84 ms in windows of
# a third of the posts, at most 31 without).
WINDOW_NARROWED = 0.25
WINDOW_WORD_POSTS = 25_000
WINDOW_MARGIN = 2.0


def _window(
    session: Session, shares: list[float | None], prefixed: bool, count_limit: int, narrowed: float | None
) -> datetime | None:
    """The last article's time from which a search of words in these shares of the posts (the last
    one matched by GIN's prefix match when prefixed), among the share `narrowed` of the posts (its
    categories'), looks first (None: it looks among all at once). The words are in between by
    their own share: commoner ones have too many posts for the words' index to intersect with a
    window, whatever narrows them after."""
    if not shares or any(share is None for share in shares) or narrowed is None or narrowed < WINDOW_NARROWED:
        return None
    known = cast(list[float], shares)
    words = math.prod(known)
    share = words * narrowed
    statistics = _statistics(session)
    buckets = len(statistics.bounds) - 1
    posts = statistics.posts
    if (
        buckets < 2
        or not WINDOW_MATCHES * count_limit <= share * posts
        or words > WINDOW_SHARE
        or (prefixed and known[-1] * posts > WINDOW_WORD_POSTS)
    ):
        return None
    newest = WINDOW_MARGIN * count_limit / (share * posts)  # the window's share of the posts
    start = buckets * (1 - newest)  # where it starts among the buckets, taken as even within each
    first = math.floor(start)
    if first <= 0:
        return None
    return statistics.bounds[first] + (statistics.bounds[first + 1] - statistics.bounds[first]) * (start - first)


def _category_share(shares: dict[int, float], parents: list[int], exact: list[int]) -> float | None:
    """The share of the posts in these categories (_category_sets) by the statistics; None when
    none of them is among the statistics' commonest (their posts are few)."""
    share = sum(f for c, f in shares.items() if c // 1000 * 1000 in parents or c in exact)
    return share or None


# The hours a post's times hold (migration 0027's post_times): its last article's hour, day and 16
# days since 1970 in UTC, longest first. A window is asked for as the fewest of them, each one
# starting where the one before ends; at most WINDOW_TIME_WORDS (two years back take 47).
TIME_WORD_HOURS = (384, 24, 1)
WINDOW_TIME_WORDS = 64
# A window's start moves down to the start of its 16 days, or of its day, when that lengthens it
# by at most this share: its words are then all of the longest kind. GIN matches each post against
# every one of them, so that a year's window took 38 words from a start within a day, and 3.8 ms to
# count a word's 401 posts in it, against 5 words and 2.4 ms from the start of its 16 days (420
# posts; timed once on bench/catalog.py's 1,000,000 posts).
WINDOW_GROWTH = 0.25
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def time_words(moment: datetime) -> list[str]:
    """The words post_times gives a post whose last article is at this moment (time zone aware)."""
    hour = (moment - EPOCH) // HOUR
    return [f"{hours}h{hour // hours}" for hours in TIME_WORD_HOURS]


def window_times(window: datetime, now: datetime) -> tuple[datetime, str, datetime] | None:
    """The window from the start of the hour it starts in, or of its 16 days or its day when that
    lengthens it by at most WINDOW_GROWTH: that start, the hours from it to the hour after now as
    post_times' words (a tsquery, any of them), and the end of those hours. None when that takes
    more than WINDOW_TIME_WORDS words (the search looks among all posts at once)."""
    hour, last = (window - EPOCH) // HOUR, (now - EPOCH) // HOUR + 1
    for hours in TIME_WORD_HOURS:
        if hour % hours <= WINDOW_GROWTH * (last - hour):
            hour -= hour % hours
            break
    start = EPOCH + hour * HOUR
    words: list[str] = []
    while hour <= last and len(words) <= WINDOW_TIME_WORDS:
        hours = next(h for h in TIME_WORD_HOURS if hour % h == 0)
        words.append(f"'{hours}h{hour // hours}'")
        hour += hours
    if not words or len(words) > WINDOW_TIME_WORDS:
        return None
    return start, " | ".join(words), EPOCH + hour * HOUR


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


# At most this many (title, year) of the posts an id names widen a search by it.
MAX_ID_TITLES = 10


def _ids_filter(session: Session, ids: dict[str, int], params: dict[str, object]) -> str:
    """The posts that have any of the ids given (a client sends every id it knows of a show), and
    those of the same title and year (as their names parse) as one that has them: an NFO names one
    post of a film or a show, and a client that searches by its id must find the others too (it
    searches by name only when an id finds nothing)."""
    having = []
    for column, value in ids.items():
        if column not in ID_COLUMNS:
            raise SearchError(f"no such id: {column}")
        params[column] = _bounded_int(column, value, 1, 2**31 - 1)
        having.append(f"p.{column} = :{column}")
    matched = " OR ".join(having)
    titles = session.execute(
        text(
            f"SELECT DISTINCT p.title, p.year FROM posts p WHERE ({matched}) AND p.title <> ''"
            f" ORDER BY 1, 2 LIMIT {MAX_ID_TITLES}"
        ),
        params,
    ).all()
    alternatives = [f"({matched})"]
    params["word_break"] = WORD_BREAK
    for index, (title, year) in enumerate(titles):
        params[f"id_title{index}"], params[f"id_year{index}"] = title, year
        # The title's words first (the words index finds the candidates), then the title itself.
        alternatives.append(
            f"(p.words @@ plainto_tsquery('simple'::regconfig, regexp_replace(CAST(:id_title{index} AS text),"
            f" CAST(:word_break AS text), ' ', 'g')) AND p.title = :id_title{index}"
            f" AND p.year IS NOT DISTINCT FROM CAST(:id_year{index} AS smallint))"
        )
    return "(" + " OR ".join(alternatives) + ")"


def _group_ids(session: Session, group: str | Sequence[str] | None) -> list[int] | None:
    if group is None:
        return None
    names = [group] if isinstance(group, str) else list(group)
    try:
        names = [validate_group_name(_clean(name)) for name in names if name and name.strip()]
    except ServiceError as exc:
        raise SearchError(exc.message) from None
    if not names:
        return None
    rows: dict[str, int] = dict(
        session.execute(text("SELECT name, id FROM groups WHERE name = ANY(:names)"), {"names": names}).all()
    )
    unknown = sorted(set(names) - set(rows))
    if unknown:
        raise NotFound(f"no such group: {', '.join(unknown)}", code="unknown_group")
    return sorted(rows.values())


def _clean(value: str) -> str:
    """Text PostgreSQL takes: no NUL, valid UTF-8 (a command line's undecodable bytes become '?')."""
    return str(value).replace("\0", " ").encode("utf-8", "replace").decode("utf-8")


def _bounded_int(what: str, value: int | str, low: int, high: int, error: type[ServiceError] = SearchError) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).strip())
        except ValueError:
            raise error(f"{what} must be a whole number, not {value!r}") from None
    if not low <= value <= high:
        raise error(f"{what} must be between {low:,} and {high:,}, not {value:,}")
    return value


def _bounded_number(what: str, value: float | str, low: float, high: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SearchError(f"{what} must be a number, not {value!r}") from None
    if not low <= number <= high:  # NaN is refused here too
        raise SearchError(f"{what} must be between {low:g} and {high:g}, not {value!r}")
    return number


def _moment(what: str, value: datetime) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise SearchError(f"{what} must be a datetime with its time zone, not {value!r}")
    return value
