"""Search over the catalog's posts, and one post in detail.

What a user finds and downloads is a **post**: the releases app.services.ingest.posts joined
(release_posts), or a release of its own. A post is named by its key, a signed 64-bit integer (the
least key of its sets), unique within its group; the public id is that key in decimal.

Words are matched against release names as words: in the name and in the words asked for,
everything that is not a letter or a digit is a space, and words are compared without case
(the 'simple' text search configuration: no stemming, no stop words). So
``walking dead s03e06`` finds ``The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE``. Every
word must be in the name; the last one may be the start of a word (``walking de`` finds it too).
Nothing in the words is syntax: quotes, ``&``, ``|``, ``!``, ``:``, ``*``, parentheses and
backslashes are spaces like any other punctuation.

A search finds the matching releases by the GIN index of migration 0012 (NAME_WORDS repeats its
expression exactly, so that the planner uses it) and maps them to their posts. A post of one
release (most are) is that release's row as it is; a post of several is then summed over all its
releases, whichever of them matched (the view ``posts`` sums every post of the catalog first,
which no search can afford). Filters on what a post sums (size, date, completion, poster) apply
to the post, and results come newest first (the post's last article), a page at a time, with
the exact count of the posts that match. Without words every post of the catalog (or of the
groups asked for) is a candidate.

Cost: the work grows with the releases the words match (and without words, with the catalog),
since the newest posts are known only once every candidate post is summed. On 1,000,000
generated releases (this machine): words matching tens of releases, 5 to 40 ms; 17,000, 90 ms;
250,000, 1.3 s; no words, 2.8 s. Every search runs under a statement timeout (timeout_ms).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from psycopg.errors import QueryCanceled
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.services.errors import NotFound, ServiceError
from app.services.groups import validate_group_name

DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000
MAX_OFFSET = 10_000
# Words beyond these bounds are refused: no real query needs more, and each word costs an index probe.
MAX_WORDS_LENGTH = 500
MAX_WORDS = 32
# The last word matches as the start of a word from this length on: a one-letter prefix would
# probe every word of the index that starts with it.
MIN_PREFIX = 2
MAX_AGE_DAYS = 100 * 366
MAX_BIGINT = 2**63 - 1
# A search holds its connection at most this long by default (the API's requests are bounded in time).
DEFAULT_TIMEOUT_MS = 10_000

# A release name as words (see the module's doc): the expression of the index
# ix_releases_name_words (migration 0012; app.models.catalog.Release). The colons are escaped for
# SQLAlchemy's text(), which would read ':alnum' as a parameter.
NAME_WORDS = r"to_tsvector('simple'::regconfig, regexp_replace({name}, '[^[\:alnum\:]]+', ' ', 'g'))"

# The words asked for, read by the very functions that read the names: the same characters are
# letters and digits, the same parser cuts words, the same lower-casing applies.
QUERY_WORDS = text(f"SELECT lexeme, positions FROM unnest({NAME_WORDS.format(name='CAST(:words AS text)')})")

# A post's figures, summed over its releases as the view `posts` (migration 0011) sums them.
POST_FIGURES = """
           (array_agg(r.name ORDER BY r.files_seen DESC, r.key))[1] AS name,
           (array_agg(r.poster ORDER BY r.files_seen DESC, r.key))[1] AS poster,
           count(*) AS releases,
           least(sum(r.files_seen), 2147483647)::int AS files,
           least(sum(r.parts_expected), 9223372036854775807)::bigint AS parts_expected,
           least(sum(r.parts_seen), 9223372036854775807)::bigint AS parts_seen,
           least(sum(r.bytes), 9223372036854775807)::bigint AS bytes,
           CASE WHEN sum(r.parts_expected) > 0
                THEN least(100.0, 100.0 * sum(r.parts_seen) / sum(r.parts_expected))::real ELSE 0 END AS completion,
           min(r.first_post) AS first_post,
           max(r.last_post) AS last_post"""

# The releases of the candidate posts of several releases (g, key): the post's own release unless
# it was joined into another post, and the releases joined into it (ix_release_posts_post).
MEMBERS = """
    members AS (
        SELECT c.group_id, c.key AS post_key, c.key
          FROM candidates c
         WHERE NOT EXISTS (SELECT FROM release_posts x WHERE x.group_id = c.group_id AND x.key = c.key)
        UNION ALL
        SELECT c.group_id, c.key, x.key
          FROM candidates c JOIN release_posts x ON x.group_id = c.group_id AND x.post_key = c.key
    )"""

# matched: the releases found, each with its post's key and whether that post has other releases
# (it was joined into a post, or others were joined into it).
SEARCH = """
WITH matched AS (
    SELECT r.group_id, coalesce(p.post_key, r.key) AS post_key, r.name, r.poster, r.files_seen, r.parts_expected,
           r.parts_seen, r.bytes, r.first_post, r.last_post,
           p.key IS NOT NULL OR EXISTS (SELECT FROM release_posts x WHERE x.group_id = r.group_id
                                                                      AND x.post_key = r.key) AS several
      FROM releases r
      LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key
     WHERE {release_filters}
),
candidates AS (SELECT DISTINCT group_id, post_key AS key FROM matched WHERE several),
{members},
found AS (
    SELECT group_id, post_key AS key, name, poster, 1::bigint AS releases, files_seen AS files, parts_expected,
           parts_seen, bytes,
           CASE WHEN parts_expected > 0 THEN least(100.0, 100.0 * parts_seen / parts_expected)::real ELSE 0 END
               AS completion,
           first_post, last_post{lone_poster_match}
      FROM matched WHERE NOT several
    UNION ALL
    SELECT m.group_id, m.post_key, {figures}{poster_match}
      FROM members m JOIN releases r ON r.group_id = m.group_id AND r.key = m.key
     GROUP BY m.group_id, m.post_key
),
kept AS (SELECT * FROM found WHERE {post_filters})
SELECT total.n AS total, page.*
  FROM (SELECT count(*) AS n FROM kept) total
  LEFT JOIN LATERAL (
        SELECT k.key, k.group_id, g.name AS group_name, k.name, k.poster, k.releases, k.files, k.parts_expected,
               k.parts_seen, k.bytes, k.completion, k.first_post, k.last_post
          FROM kept k JOIN groups g ON g.id = k.group_id
         ORDER BY k.last_post DESC NULLS LAST, k.group_id, k.key
         LIMIT :limit OFFSET :offset) page ON true
"""

# The settings a search runs with (the old values first, for SETTINGS_BACK); '0ms' is no timeout.
SETTINGS_OFF = text("SELECT current_setting('jit'), current_setting('statement_timeout'),"
                    " set_config('jit', 'off', true), set_config('statement_timeout', :timeout, true)")
SETTINGS_BACK = text("SELECT set_config('jit', :jit, true), set_config('statement_timeout', :timeout, true)")

# The group of a post key, or of a release key joined into a post: the least group id that has it
# (a key is unique within a group; crossposts share keys across groups). Probed group by group, so
# that each probe keeps to an index led by the group.
POST_GROUP = text("""
    SELECT g.id FROM groups g
     WHERE (CAST(:group_id AS integer) IS NULL OR g.id = :group_id)
       AND (EXISTS (SELECT FROM releases r WHERE r.group_id = g.id AND r.key = :key)
            OR EXISTS (SELECT FROM release_posts x WHERE x.group_id = g.id AND x.post_key = :key))
     ORDER BY g.id LIMIT 1
""")
POST_KEY = text("SELECT coalesce((SELECT post_key FROM release_posts WHERE group_id = :g AND key = :key), :key)")
POST_RELEASES = text(f"""
    WITH candidates AS (SELECT CAST(:g AS integer) AS group_id, CAST(:key AS bigint) AS key),
    {MEMBERS}
    SELECT r.key, r.name, r.poster, r.file_count, r.files_seen, r.parts_expected, r.parts_seen, r.bytes,
           r.completion, r.first_post, r.last_post, r.metadata_only
      FROM members m JOIN releases r ON r.group_id = m.group_id AND r.key = m.key
     ORDER BY r.first_post NULLS LAST, r.key
""")
POST_SUMMED = text(f"""
    WITH candidates AS (SELECT CAST(:g AS integer) AS group_id, CAST(:key AS bigint) AS key),
    {MEMBERS}
    SELECT {POST_FIGURES.strip()}
      FROM members m JOIN releases r ON r.group_id = m.group_id AND r.key = m.key
""")
# A post's files in posting order, each with what the catalog holds of its articles. The
# fragments have no index (docs/store.md): the group's partition is read once for all the files.
POST_FILES = text("""
    SELECT f.key, f.release_key, f.name, f.subject, coalesce(f.poster, r.poster) AS poster, f.posted_at,
           f.file_index, f.file_count, f.parts, coalesce(s.seen, 0) AS seen, coalesce(s.bytes, 0) AS bytes
      FROM files f
      JOIN releases r ON r.group_id = f.group_id AND r.key = f.release_key
      LEFT JOIN (SELECT file_key, count(*) AS seen, sum(bytes) AS bytes FROM fragments
                  WHERE group_id = :g AND file_key = ANY(
                        SELECT key FROM files WHERE group_id = :g AND release_key = ANY(:releases))
                  GROUP BY file_key) s ON s.file_key = f.key
     WHERE f.group_id = :g AND f.release_key = ANY(:releases)
     ORDER BY f.posted_at NULLS LAST, f.file_index NULLS LAST, f.name, f.key
""")


class SearchTimeout(ServiceError):
    """A search that ran longer than its time bound."""

    status = 503
    code = "search_timeout"


class SearchError(ServiceError, ValueError):
    """A search the service refuses (a limit, offset, size or age out of bounds, too many words);
    a ValueError, and a ServiceError for the CLI and the API."""

    code = "bad_search"


@dataclass(frozen=True)
class PostSummary:
    """A post as a search finds it: its figures summed over all its releases. name and poster are
    those of its release with the most files; completion is a percentage (0 to 100)."""

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


@dataclass(frozen=True)
class SearchPage:
    """One page of a search: `total` posts match, `items` are those from `offset` on, newest first."""

    total: int
    limit: int
    offset: int
    items: list[PostSummary] = field(default_factory=list)


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
class PostDetails:
    post: PostSummary
    releases: list[ReleaseInfo]
    files: list[FileInfo]


def search_posts(session: Session, words: str | Sequence[str] | None, *, group: str | Sequence[str] | None = None,
                 poster: str | None = None, min_size: int | None = None, max_size: int | None = None,
                 posted_after: datetime | None = None, posted_before: datetime | None = None,
                 max_age_days: float | None = None, min_completion: float | None = None,
                 limit: int = DEFAULT_LIMIT, offset: int = 0, timeout_ms: int | None = DEFAULT_TIMEOUT_MS) -> SearchPage:
    """The posts matching every word (see the module's doc) and every filter, newest first.

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
    params: dict = {"limit": limit, "offset": offset}
    release_filters, post_filters = [], []

    query = _tsquery(session, words)
    if query is not None:
        release_filters.append(f"{NAME_WORDS.format(name='r.name')} @@ CAST(:query AS tsquery)")
        params["query"] = query
    group_ids = _group_ids(session, group)
    if group_ids is not None:
        release_filters.append("r.group_id = ANY(:group_ids)")
        params["group_ids"] = group_ids

    poster_match = lone_poster_match = ""
    if poster is not None and (poster := _clean(poster).strip()):
        if len(poster) > MAX_WORDS_LENGTH:
            raise SearchError(f"the poster is longer than {MAX_WORDS_LENGTH} characters")
        params["poster"] = poster.lower()
        if query is None:
            # A post has a release of the poster exactly when one of its releases is one.
            release_filters.append("strpos(lower(r.poster), :poster) > 0")
        else:
            poster_match = ", bool_or(strpos(lower(r.poster), :poster) > 0) AS poster_match"
            lone_poster_match = ", strpos(lower(poster), :poster) > 0 AS poster_match"
            post_filters.append("poster_match")
    if min_size is not None:
        params["min_size"] = _bounded_int("min_size", min_size, 0, MAX_BIGINT)
        post_filters.append("bytes >= :min_size")
    if max_size is not None:
        params["max_size"] = _bounded_int("max_size", max_size, 0, MAX_BIGINT)
        post_filters.append("bytes <= :max_size")
    if min_completion is not None:
        params["min_completion"] = _bounded_number("min_completion", min_completion, 0, 100)
        post_filters.append("completion >= :min_completion")
    if max_age_days is not None:
        params["max_age"] = _bounded_number("max_age_days", max_age_days, 0, MAX_AGE_DAYS)
        post_filters.append("last_post >= now() - :max_age * interval '1 day'")
        if query is None:  # the post's last article is this recent exactly when one of its releases' is
            release_filters.append("r.last_post >= now() - :max_age * interval '1 day'")
    if posted_after is not None:
        params["after"] = _moment("posted_after", posted_after)
        post_filters.append("last_post >= :after")
        if query is None:
            release_filters.append("r.last_post >= :after")
    if posted_before is not None:
        params["before"] = _moment("posted_before", posted_before)
        post_filters.append("last_post <= :before")

    sql = SEARCH.format(release_filters=" AND ".join(release_filters) or "true", members=MEMBERS.strip(),
                        figures=POST_FIGURES.strip(), poster_match=poster_match, lone_poster_match=lone_poster_match,
                        post_filters=" AND ".join(post_filters) or "true")
    rows = _bounded_run(session, text(sql), params, timeout_ms)
    total = rows[0]["total"] if rows else 0
    items = [_summary(row) for row in rows if row["key"] is not None]
    return SearchPage(total=total, limit=limit, offset=offset, items=items)


def _bounded_run(session: Session, statement, params: dict, timeout_ms: int | None) -> list:
    """The search's rows, in a savepoint of its own with a statement timeout and without JIT: the
    planner's costs for a search that finds many releases are high enough to JIT-compile it, which
    takes longer (hundreds of ms) than most searches run. A search that times out rolls back to
    the savepoint, so the caller's transaction goes on; the settings come back either way."""
    try:
        with session.begin_nested():
            jit, timeout, _, _ = session.execute(SETTINGS_OFF, {"timeout": f"{timeout_ms or 0}ms"}).one()
            rows = session.execute(statement, params).mappings().all()
            session.execute(SETTINGS_BACK, {"jit": jit, "timeout": timeout})
    except OperationalError as exc:
        if isinstance(exc.orig, QueryCanceled):
            bound = f"longer than {timeout_ms:,} ms" if timeout_ms is not None else "too long"
            raise SearchTimeout(f"the search ran {bound}: give more words or filters") from None
        raise
    return rows


def find_post(session: Session, post_key: int, group_id: int | None = None) -> PostSummary:
    """A post's summary by its key (in its group, or in the least group that has it), without its
    files: a few index probes. The key of a release joined into a post gives that post. NotFound
    when no post or release has the key."""
    key = _bounded_int("post key", post_key, -(2**63), MAX_BIGINT, error=NotFound)
    if group_id is not None:
        group_id = _bounded_int("group id", group_id, -(2**31), 2**31 - 1, error=NotFound)
    found = session.execute(POST_GROUP, {"key": key, "group_id": group_id}).scalar()
    if found is None:
        raise NotFound(f"no post {key}" + (f" in group {group_id}" if group_id is not None else ""),
                       code="unknown_post")
    key = session.execute(POST_KEY, {"g": found, "key": key}).scalar_one()
    summed = session.execute(POST_SUMMED, {"g": found, "key": key}).mappings().one()
    if not summed["releases"]:  # a release key joined into a post whose releases are all gone
        raise NotFound(f"no post {post_key}", code="unknown_post")
    group = session.execute(text("SELECT name FROM groups WHERE id = :g"), {"g": found}).scalar_one()
    return _summary({**summed, "key": key, "group_id": found, "group_name": group})


def post_details(session: Session, post_key: int, group_id: int | None = None) -> PostDetails:
    """A post (find_post) with its releases and its files. Its files' articles are counted from
    the fragments, which have no index: this reads the group's fragments partition."""
    post = find_post(session, post_key, group_id)
    params = {"g": post.group_id, "key": post.key}
    releases = [ReleaseInfo(**row) for row in session.execute(POST_RELEASES, params).mappings()]
    files = [
        FileInfo(key=row.key, release_key=row.release_key, name=row.name, subject=row.subject, poster=row.poster,
                 posted_at=row.posted_at, file_index=row.file_index, file_count=row.file_count,
                 parts_expected=row.parts, parts_seen=row.seen, bytes=row.bytes)
        for row in session.execute(POST_FILES, {"g": post.group_id, "releases": [r.key for r in releases]})
    ]
    return PostDetails(post=post, releases=releases, files=files)


def _summary(row) -> PostSummary:
    return PostSummary(key=row["key"], group_id=row["group_id"], group=row["group_name"], name=row["name"],
                       poster=row["poster"], releases=row["releases"], files=row["files"],
                       parts_expected=row["parts_expected"], parts_seen=row["parts_seen"], bytes=row["bytes"],
                       completion=float(row["completion"]), first_post=row["first_post"], last_post=row["last_post"])


def _tsquery(session: Session, words: str | Sequence[str] | None) -> str | None:
    """The words as a tsquery's text: every word, the last one also as a prefix; None when the
    words hold no letter or digit. The words are cut by the server (QUERY_WORDS), so they are
    exactly the words of the names; each is quoted, so nothing in them is tsquery syntax."""
    if words is None:
        return None
    joined = _clean(words if isinstance(words, str) else " ".join(str(w) for w in words))
    if len(joined) > MAX_WORDS_LENGTH:
        raise SearchError(f"the words are longer than {MAX_WORDS_LENGTH} characters")
    if not joined.strip():
        return None
    lexemes = session.execute(QUERY_WORDS, {"words": joined}).all()
    if not lexemes:
        return None
    if len(lexemes) > MAX_WORDS:
        raise SearchError(f"more than {MAX_WORDS} different words")
    ordered = sorted(lexemes, key=lambda row: (max(row.positions), row.lexeme))
    terms = ["'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme, _ in ordered]
    if len(ordered[-1].lexeme) >= MIN_PREFIX:
        terms[-1] += ":*"
    return " & ".join(terms)


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
    rows = dict(session.execute(text("SELECT name, id FROM groups WHERE name = ANY(:names)"), {"names": names}).all())
    unknown = sorted(set(names) - set(rows))
    if unknown:
        raise NotFound(f"no such group: {', '.join(unknown)}", code="unknown_group")
    return sorted(rows.values())


def _clean(value: str) -> str:
    """Text PostgreSQL takes: no NUL, valid UTF-8 (a command line's undecodable bytes become '?')."""
    return str(value).replace("\0", " ").encode("utf-8", "replace").decode("utf-8")


def _bounded_int(what: str, value, low: int, high: int, error: type[ServiceError] = SearchError) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).strip())
        except ValueError:
            raise error(f"{what} must be a whole number, not {value!r}") from None
    if not low <= value <= high:
        raise error(f"{what} must be between {low:,} and {high:,}, not {value:,}")
    return value


def _bounded_number(what: str, value, low: float, high: float) -> float:
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
