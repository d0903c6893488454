"""Search over the catalog's posts (app.services.search) and `flask seed releases search|show`,
on a catalog made by the real digest and store: the real posts of tests/data/nzb/ in one group,
and in another a generated series of known sizes, dates, posters and completion, a release the
executable rule drops, a name full of punctuation, and a real post crossposted."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.db import driver_sql, session_scope
from app.services import leases
from app.services import search as search_service
from app.services.errors import NotFound, ServiceError
from app.services.ingest import posts, store
from app.services.search import (
    COUNT_AHEAD,
    SEARCH_BEGIN,
    SEARCH_END,
    MAX_LIMIT,
    MAX_OFFSET,
    PREFIX_WORDS,
    SearchError,
    SearchTimeout,
    find_post,
    TIME_WORD_HOURS,
    WINDOW_GROWTH,
    forget_common_words,
    post_details,
    search_posts,
    time_words,
    window_times,
)
from edge.digest.gather import Gatherer
from simnews.generator import Article
from simnews.nzbpost import load_nzb, post_articles
from simnews.scripted import overview_lines
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import raw
from tests.fixtures.postgres import _truncate_all
from tests.fixtures.queries import posts_from_releases, query

NZB = Path(__file__).resolve().parents[1] / "data" / "nzb"
REAL = "alt.binaries.teevee"
MADE = "alt.binaries.test.search"
WALKING_DEAD = "The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE"
ECONOMIST = "The_Economist_USA_-_April_19_2025"
PUNCTUATED = "Rock'n'Roll.&.Blues.(Live).2025"
NOW = datetime.now(timezone.utc).replace(microsecond=0)


@dataclass(frozen=True)
class Made:
    """A generated post: `files` rar files of `parts` articles of `size` bytes each, posted
    `days_ago`; `missing` articles of its second file never reach the catalog."""

    name: str
    poster: str
    days_ago: float
    files: int = 3
    parts: int = 4
    size: int = 1000
    missing: int = 0
    extension: str = "rar"

    @property
    def bytes(self) -> int:
        return (self.files * self.parts - self.missing) * self.size

    @property
    def completion(self) -> float:
        return 100.0 * (self.files * self.parts - self.missing) / (self.files * self.parts)


ALICE, BOB, CAROL = "Alice <alice@example.net>", "bob@example.org (Bob)", "Carol <carol@example.com>"
SERIES = [
    Made(
        f"Generated.Show.S01E{i + 1:02d}.720p.WEB.x264-GRP",
        ALICE if i % 2 == 0 else BOB,
        12 - i + 0.25,
        size=1000 * (i + 1),
        missing=3 if i == 4 else 0,
    )
    for i in range(12)
]
OTHERS = [Made(PUNCTUATED, CAROL, 30, files=2, parts=1)]
DROPPED = Made("Dropped.Setup.Tool.2025", CAROL, 2, files=1, parts=2, extension="exe")


def made_lines(first: int, made: list[Made]) -> list[bytes]:
    lines = []
    for post in made:
        date = format_datetime(NOW - timedelta(days=post.days_ago)).encode()
        for file_no in range(1, post.files + 1):
            for part in range(1, post.parts + 1):
                if file_no == 2 and part <= post.missing:
                    continue
                number = first + len(lines)
                subject = (
                    f'{post.name} [{file_no:02d}/{post.files:02d}] - "{post.name}.part{file_no:02d}.'
                    f'{post.extension}" yEnc ({part}/{post.parts})'
                )
                lines.append(
                    b"\t".join(
                        [
                            str(number).encode(),
                            subject.encode(),
                            post.poster.encode(),
                            date,
                            b"<made.%d@example.net>" % number,
                            b"",
                            str(post.size).encode(),
                            b"30",
                            b"",
                        ]
                    )
                )
    return lines


def real_lines(first: int, group: str, paths: list[Path], namespace: str = "") -> list[bytes]:
    articles = []
    for path in paths:
        articles += [Article(a.message_id, a.raw) for a in post_articles(load_nzb(path), group, namespace=namespace)]
    return list(overview_lines(articles, group, first))


def store_group(group_name: str, lines: list[bytes], first: int) -> None:
    """The lines as one range of a new group, digested by the real library, accepted, stored and
    joined into posts as a batch is."""
    with session_scope() as s:
        group = make_group(s, group_name)
        (seed_range,) = make_plan(s, group, [(first, first + len(lines) - 1)])
        node, _ = make_node(s, f"edge-{group_name}")
        leases.lease_range(s, node, seed_range.id)
        range_id = seed_range.id
    gatherer = Gatherer(group_name)
    for start in range(0, len(lines), 500):
        chunk = lines[start : start + 500]
        gatherer.add_chunk(first + start, first + start + len(chunk) - 1, [raw(chunk)])
    batch_id = accept(node, range_id, gatherer.build())
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        assert posts.join_batch(s, batch_id) is not None


@pytest.fixture
def sent(monkeypatch):
    """The statements search_posts runs in its savepoint, as (statement, parameters), the statement
    as text() has it: recorded on their way, each then run as it would be."""
    statements: list[tuple[str, dict]] = []
    run = search_service._bounded_run

    def recorded(session, statement, params, timeout_ms, **options):
        statements.append((statement, params))
        return run(session, statement, params, timeout_ms, **options)

    monkeypatch.setattr(search_service, "_bounded_run", recorded)
    return statements


@pytest.fixture(scope="module")
def catalog(engine, settings):
    """The catalog every test here reads (none writes it): the real posts in REAL; the series,
    the punctuated name, the dropped release and the Walking Dead crossposted in MADE."""
    _truncate_all(engine)
    store_group(REAL, real_lines(BIG, REAL, sorted(NZB.glob("*.nzb"))), BIG)
    made = made_lines(BIG, SERIES + OTHERS + [DROPPED])
    crossposted = real_lines(BIG + len(made), MADE, [NZB / "avsnatch_teevee_walking_dead_s03e06.nzb"], "x")
    store_group(MADE, made + crossposted, BIG)
    yield engine
    _truncate_all(engine)


def search(words, **filters):
    with session_scope() as s:
        return search_posts(s, words, **filters)


def names(page) -> list[str]:
    return [item.name for item in page.items]


def group_id(name: str) -> int:
    with session_scope() as s:
        return s.execute(text("SELECT id FROM groups WHERE name = :n"), {"n": name}).scalar_one()


def test_words_match_whatever_their_case_and_punctuation(catalog):
    for words in (
        "walking dead s03e06",
        "WALKING.Dead-S03E06",
        "the walking dead",
        "The_Walking_Dead",
        ["walking", "dead"],
        "dead walking",
        WALKING_DEAD,
        "walking dead s03e0",
        "walk",
        "x264 evolve",
    ):
        page = search(words)
        assert names(page) == [WALKING_DEAD, WALKING_DEAD], words  # the post and its crosspost
        assert [item.group for item in page.items] == [REAL, MADE] and page.total == 2
    # Every word must be there; only the last may be the start of a word.
    assert search("walking dead s03e07").total == 0
    assert search("walkin dead").total == 0
    assert names(search("walking dead", group=REAL)) == [WALKING_DEAD]
    assert names(search("economist april 2025")) == [ECONOMIST]
    assert names(search("你好世界")) == ["你好世界"]
    assert names(search("underbelly rooster")) == ["Underbelly.Badness.S05E04.Year.of.the.Rooster.PDTV.x264-FQM"]
    assert set(names(search("x264", group=REAL))) == {
        WALKING_DEAD,
        "Underbelly.Badness.S05E04.Year.of.the.Rooster.PDTV.x264-FQM",
    }
    assert search("generated show").total == len(SERIES)
    assert names(search("generated show s01e03")) == [SERIES[2].name]


def test_a_post_is_found_by_any_release_and_summed_over_all_of_them(catalog):
    """The Economist post is three releases (two posters of ngPost, and an .nfo of its own): it is
    one result, with the figures of the whole post, named by its release with the most files."""
    (post,) = search("economist").items
    members = query(
        catalog,
        "SELECT r.key, r.files_seen, r.parts_seen, r.bytes, r.poster FROM releases r"
        " LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key"
        " WHERE coalesce(p.post_key, r.key) = :k",
        k=post.key,
    )
    assert len(members) == post.releases == 3
    assert post.files == sum(m.files_seen for m in members) == len(load_nzb(NZB / "dlnzb_ngpost_economist.nzb").files)
    assert post.bytes == sum(m.bytes for m in members) and post.parts_seen == sum(m.parts_seen for m in members)
    assert post.poster == max(members, key=lambda m: (m.files_seen, -m.key)).poster
    assert post.key == min(m.key for m in members if m.files_seen > 1)
    # Every post a search finds is the post summed from its releases (here, in Python).
    page = search(None, limit=MAX_LIMIT)
    summed = posts_from_releases(catalog)
    assert page.total == len(summed) == len(page.items)
    for item in page.items:
        row = summed[(item.group_id, item.key)]
        assert (
            item.name,
            item.poster,
            item.releases,
            item.files,
            item.parts_expected,
            item.parts_seen,
            item.bytes,
            item.first_post,
            item.last_post,
        ) == (
            row["name"],
            row["poster"],
            row["releases"],
            row["files_seen"],
            row["parts_expected"],
            row["parts_seen"],
            row["bytes"],
            row["first_post"],
            row["last_post"],
        )
        assert math.isclose(item.completion, row["completion"], rel_tol=1e-6)


def test_filters(catalog):
    series = "generated show"
    assert names(search(series, poster="ALICE@example")) == [m.name for m in reversed(SERIES) if m.poster == ALICE]
    assert search(series, poster="nobody").total == 0
    # A post has every poster of its releases: the Economist's .nfo came from someone else.
    assert names(search(None, poster="8bs3yn0dqmv")) == names(search("economist", poster="8BS3YN0DQMV")) == [ECONOMIST]
    sizes = sorted(m.bytes for m in SERIES)
    assert {i.bytes for i in search(series, min_size=sizes[3]).items} == set(sizes[3:])
    assert {i.bytes for i in search(series, max_size=sizes[3]).items} == set(sizes[:4])
    assert {i.bytes for i in search(series, min_size=sizes[3], max_size=sizes[5]).items} == set(sizes[3:6])
    assert search(series, min_size=sizes[5], max_size=sizes[3]).total == 0
    # Dates: the post's last article.
    assert names(search(series, max_age_days=5)) == [m.name for m in reversed(SERIES) if m.days_ago <= 5]
    assert names(search(None, max_age_days=5, group=MADE)) == names(search(series, max_age_days=5))
    cut = NOW - timedelta(days=6)
    assert names(search(series, posted_after=cut)) == [m.name for m in reversed(SERIES) if m.days_ago < 6]
    assert names(search(series, posted_before=cut)) == [m.name for m in reversed(SERIES) if m.days_ago > 6]
    assert names(search(None, posted_before=datetime(2013, 1, 1, tzinfo=timezone.utc))) == [
        WALKING_DEAD,
        WALKING_DEAD,
        "Underbelly.Badness.S05E04.Year.of.the.Rooster.PDTV.x264-FQM",
    ]
    # Completion: the fifth episode lost three articles of its second file.
    incomplete = [m for m in SERIES if m.missing]
    assert [i.completion for i in search(incomplete[0].name).items] == [incomplete[0].completion] == [75.0]
    assert names(search(series, min_completion=100)) == [m.name for m in reversed(SERIES) if not m.missing]
    assert search(series, min_completion=75).total == len(SERIES)
    # Groups, one or several.
    assert {i.group for i in search(None, group=MADE).items} == {MADE}
    assert search(None, group=[REAL, MADE]).total == search(None).total
    assert search(None, group="ALT.binaries.TEEVEE ").total == 5  # the real posts
    with pytest.raises(NotFound, match="no such group: alt.binaries.nothing"):
        search("walking", group="alt.binaries.nothing")


def test_newest_first_and_paged(catalog):
    everything = search(None, limit=MAX_LIMIT)
    moments = [item.last_post for item in everything.items]
    assert moments == sorted(moments, reverse=True)
    assert everything.items[0].name == SERIES[-1].name  # a day ago
    assert everything.total == len(SERIES) + len(OTHERS) + 5 + 1  # the real posts and the crosspost
    paged = []
    for offset in range(0, everything.total + 7, 7):
        page = search(None, limit=7, offset=offset)
        assert page.total == everything.total and (page.limit, page.offset) == (7, offset)
        paged += page.items
    assert paged == everything.items
    # A page past the end is empty, and still tells how many match.
    past = search("generated", offset=len(SERIES) + 5)
    assert past.items == [] and past.total == len(SERIES)
    assert names(search("generated", limit=2, offset=1)) == [SERIES[-2].name, SERIES[-3].name]


def test_a_release_dropped_by_rules_is_never_found(catalog):
    assert query(catalog, "SELECT sum(releases) FROM rule_counts WHERE rule = 'executable'") == [(1,)]
    assert search("dropped setup tool").total == 0
    assert search("setup").total == 0
    assert DROPPED.name not in names(search(None, limit=MAX_LIMIT))


@pytest.mark.parametrize(
    "words",
    [
        "'",
        "''",
        "&",
        "|",
        "!",
        ":",
        "*",
        "(",
        ")",
        "\\",
        "\\'",
        "'&|!:*(\\",
        "a:*",
        "!walking",
        "walking & | dead",
        "walking:* & !dead",
        "(walking",
        "walking)",
        "'walking'",
        "walking' OR '1'='1",
        "'; DROP TABLE releases; --",
        "<walking>&amp;</dead>",
        "walking\0dead",
        "walking \udcff dead",
        "%",
        "_",
        "walking%",
        "%dead%",
        "$1",
        ":query",
        "\\x00",
        "walking\u202edead",
        "   ",
        "",
    ],
)
def test_special_characters_are_text(catalog, words):
    page = search(words)
    asked = words_of(words.replace("\udcff", " "))
    if not asked:
        assert page.total == search(None).total  # nothing to look for: the newest posts
    elif set(asked) <= {"walking", "dead"}:
        assert names(page) == [WALKING_DEAD, WALKING_DEAD]  # the punctuation around them changes nothing
    for item in page.items if asked else ():
        found = words_of(item.name)
        assert set(asked[:-1]) <= set(found) and any(word.startswith(asked[-1]) for word in found)
    assert query(catalog, "SELECT count(*) FROM releases")[0][0] > 0


def words_of(name: str) -> list[str]:
    """A name's words as the search reads them (for the ASCII names and words of these tests)."""
    return "".join(c if c.isalnum() else " " for c in name.lower()).split()


def test_punctuation_in_a_name_and_in_the_words(catalog):
    for words in (
        "rock'n'roll",
        "Rock'n'Roll & Blues (Live)",
        "blues | roll",
        "!blues",
        "blues:*",
        "\\blues",
        "(live) 2025",
        "rock n roll",
        "ROCK-N-ROLL.&.BLUES",
        "blues & live & 2025 & rock & n & roll & ro",
    ):
        assert names(search(words)) == [PUNCTUATED], words
    assert search("blues' OR '1'='1").total == 0  # 'or' and '1' are words like the others
    assert search("rock | jazz").total == 0


def test_bounds_are_refused_with_a_clear_error(catalog):
    assert len(search(None, limit=MAX_LIMIT).items) == search(None).total
    assert search(None, offset=MAX_OFFSET).items == []
    for bad, message in (
        ({"limit": 0}, "limit must be between 1 and 1,000, not 0"),
        ({"limit": MAX_LIMIT + 1}, "limit must be between"),
        ({"limit": 10**30}, "limit must be between"),
        ({"limit": "ten"}, "limit must be a whole number"),
        ({"limit": 2.5}, "limit must be a whole number"),
        ({"offset": -1}, "offset must be between 0 and 10,000"),
        ({"offset": MAX_OFFSET + 1}, "offset must be between"),
        ({"offset": 2**64}, "offset must be between"),
        ({"min_size": -1}, "min_size must be between 0"),
        ({"max_size": 2**63}, "max_size must be between"),
        ({"min_completion": 101}, "min_completion must be between 0 and 100"),
        ({"min_completion": float("nan")}, "min_completion must be between"),
        ({"max_age_days": -1}, "max_age_days must be between"),
        ({"max_age_days": float("inf")}, "max_age_days must be between"),
        ({"posted_after": datetime(2025, 1, 1)}, "posted_after must be a datetime with its time zone"),
        ({"poster": "x" * 501}, "the poster is longer than 500"),
    ):
        with pytest.raises(SearchError, match=message) as caught:
            search("walking", **bad)
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, ServiceError)
    with pytest.raises(SearchError, match="longer than 500 characters"):
        search("walking " * 100)
    with pytest.raises(SearchError, match="more than 32 different words"):
        search(" ".join(f"w{i}" for i in range(40)))
    assert search(" ".join(["walking"] * 40)).total == 2  # a word said again is one word
    with pytest.raises(SearchError, match="not a newsgroup name"):
        search(None, group="alt.binaries.*")


def test_a_search_that_runs_too_long_is_cut_and_leaves_the_session_usable(catalog):
    settings = "SELECT current_setting('jit'), current_setting('statement_timeout')"
    with catalog.connect() as blocker, session_scope() as s:
        # The search waits for a lock held elsewhere: its statement timeout cuts it.
        blocker.execute(text("LOCK TABLE posts IN ACCESS EXCLUSIVE MODE"))
        before = s.execute(text(settings)).one()
        started = time.monotonic()
        with pytest.raises(SearchTimeout, match="the search ran longer than 200 ms"):
            search_posts(s, "walking", timeout_ms=200)
        assert time.monotonic() - started < 5
        blocker.rollback()
        assert s.execute(text(settings)).one() == before
        assert search_posts(s, "walking").total == 2
        assert s.execute(text(settings)).one() == before


def test_a_search_whose_connection_the_server_ends_raises_as_sqlalchemy_does_and_the_next_one_works(catalog):
    """The search's statement goes by psycopg itself (app.db.driver_connection): a connection lost
    under it is an OperationalError of SQLAlchemy's, as every caller expects (the newznab API's
    900, the web page's 503), and is not given out again."""
    with catalog.connect() as ender, session_scope() as s:
        pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
        # Waits (up to 10 s) until the backend is gone.
        assert ender.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid}).scalar_one()
        with pytest.raises(OperationalError) as lost:
            search_posts(s, None)  # no words and no group: the search's statement is its first
        assert isinstance(lost.value.orig, psycopg.OperationalError)
        assert s.connection().invalidated
        s.rollback()
    assert search("walking").total == 2


def test_post_details(catalog):
    (post,) = search("economist").items
    nzb = load_nzb(NZB / "dlnzb_ngpost_economist.nzb")
    details = post_details_of(post.key)
    assert details.post == post
    with session_scope() as s:
        assert find_post(s, post.key) == post and find_post(s, post.key, post.group_id) == post
    assert len(details.releases) == 3 and post.key == min(r.key for r in details.releases if not r.metadata_only)
    assert len(details.files) == len(nzb.posted_files) == post.files
    for shown in details.files:
        (truth,) = [f for f in nzb.posted_files if f'"{shown.name}"' in f.subject]
        assert shown.parts_seen == len(truth.segments) and shown.poster == truth.poster
        assert shown.posted_at == datetime.fromtimestamp(truth.date, timezone.utc)
    # Posting order: by date, then by the file counter.
    order = [(f.posted_at, f.file_index or 0) for f in details.files]
    assert order == sorted(order)
    assert sum(f.parts_seen for f in details.files) == post.parts_seen
    assert sum(f.bytes for f in details.files) == post.bytes
    # The key of a release joined into the post (its .nfo) gives the post.
    nfo = next(r for r in details.releases if r.metadata_only)
    assert nfo.key != post.key and post_details_of(nfo.key).post.key == post.key
    # An incomplete post: its files' segments seen and expected.
    (incomplete,) = search("generated show s01e05").items
    files = post_details_of(incomplete.key).files
    assert [(f.parts_seen, f.parts_expected) for f in files] == [(4, 4), (1, 4), (4, 4)]
    # A crossposted key is in both groups: the least group id, unless one is asked for.
    real, made = (item for item in search("walking dead").items)
    assert real.key == made.key and real.group_id < made.group_id
    assert post_details_of(real.key).post.group == REAL
    assert post_details_of(real.key, made.group_id).post.group == MADE
    for missing in (12345, -(2**63), 2**63 - 1):
        with pytest.raises(NotFound, match=f"no post {missing}"):
            post_details_of(missing)
    with pytest.raises(NotFound, match="no post"):
        post_details_of(post.key, made.group_id)
    with pytest.raises(NotFound, match="post key must be"):
        post_details_of(2**63)
    with pytest.raises(NotFound, match="post key must be a whole number"):
        post_details_of("abc")


def post_details_of(key, group_id=None):
    with session_scope() as s:
        return post_details(s, key, group_id)


def invoke(flask_app, *args: str):
    return flask_app.test_cli_runner().invoke(args=["seed", "releases", *args])


def test_cli_search(catalog, flask_app):
    result = invoke(flask_app, "search", "walking", "dead", "s03e06")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["key", "name", "group", "files", "size", "complete", "posted"]
    (real, made) = search("walking dead s03e06").items
    assert lines[1].split() == [
        str(real.key),
        WALKING_DEAD,
        REAL,
        "48",
        "1.7",
        "MiB",
        "100.0%",
        "2012-11-19",
        "20:31:27",
        "UTC",
    ]
    assert lines[2].split()[2] == MADE and lines[-1] == "posts 1-2 of 2"
    result = invoke(flask_app, "search", "generated", "--group", MADE, "--limit", "3", "--json")
    assert result.exit_code == 0, result.output
    page = json.loads(result.output)
    assert (page["total"], page["limit"], page["offset"]) == (len(SERIES), 3, 0)
    assert [item["name"] for item in page["items"]] == [m.name for m in reversed(SERIES)][:3]
    first = page["items"][0]
    assert first["bytes"] == SERIES[-1].bytes and first["completion"] == 100.0 and first["group"] == MADE
    assert datetime.fromisoformat(first["last_post"]) == NOW - timedelta(days=SERIES[-1].days_ago)
    result = invoke(flask_app, "search", "--poster", "alice", "--min-completion", "100", "--offset", "1", "--json")
    assert [item["name"] for item in json.loads(result.output)["items"]] == [
        m.name for m in reversed(SERIES) if m.poster == ALICE and not m.missing
    ][1:]
    result = invoke(flask_app, "search", "nothing", "like", "this")
    assert result.exit_code == 0 and result.output.strip() == "no posts found"
    result = invoke(flask_app, "search", "--limit", "5000")
    assert result.exit_code == 1 and "Error: limit must be between 1 and 1,000, not 5,000" in result.output
    result = invoke(flask_app, "search", "x", "--group", "alt.binaries.nothing")
    assert result.exit_code == 1 and "no such group: alt.binaries.nothing" in result.output
    result = invoke(flask_app, "search", "'&|!:*(\\", "--limit", "1")
    assert result.exit_code == 0 and result.output.splitlines()[-1] == f"posts 1-1 of {search(None).total}"


def test_cli_show(catalog, flask_app):
    (post,) = search("economist").items
    result = invoke(flask_app, "show", str(post.key))
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"post      {post.key} in {REAL}" in out and f"name      {ECONOMIST}" in out
    assert "files     37 in 3 releases" in out
    assert f"segments  {post.parts_seen} seen of {post.parts_expected} expected (100.0% complete)" in out
    assert "posted    2025-04-28 19:34:02 UTC to 2025-05-26 06:53:18 UTC" in out
    files = out.split("\nfiles:\n", 1)[1].splitlines()
    assert files[0].split() == ["#", "name", "posted", "segments", "size"] and len(files) == 1 + 37
    assert files[1].split()[:2] == ["1/36", f"{ECONOMIST}.part01.rar"]
    # A negative key is a key, not an option; --json gives everything.
    assert post.key < 0
    result = invoke(flask_app, "show", str(post.key), "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["post"]["key"] == post.key and len(shown["files"]) == 37 and len(shown["releases"]) == 3
    assert sum(f["parts_seen"] for f in shown["files"]) == post.parts_seen
    (incomplete,) = search("generated show s01e05").items
    result = invoke(flask_app, "show", str(incomplete.key), "--group", MADE)
    assert "segments  9 seen of 12 expected (75.0% complete)" in result.output
    assert " 1/4 " in result.output.split("\nfiles:\n", 1)[1]
    for key, message in (
        ("12345", "no post 12345"),
        ("walking", "post key must be a whole number"),
        (str(2**63), "post key must be between"),
    ):
        result = invoke(flask_app, "show", key)
        assert result.exit_code == 1 and f"Error: {message}" in result.output, result.output
    result = invoke(flask_app, "show", str(post.key), "--group", "alt.binaries.nothing")
    assert result.exit_code == 1 and "no such group" in result.output


def test_a_name_search_uses_the_index(catalog, db_session, sent):
    """On 20,000 posts (inserted straight into the table, in a transaction rolled back at the
    end), the plan of a search finds the posts by an index, never by reading the table: by the
    words' index for words few posts have, else by the newest-first index. Only the count of a
    word every post has (or of no words) reads the table, until it stops COUNT_AHEAD past the page."""
    db_session.execute(text("INSERT INTO groups (id, name) VALUES (900001, 'alt.binaries.test.many')"))
    db_session.execute(
        text("""
        INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen, parts_expected,
                           parts_seen, bytes, completion, first_post, last_post)
        SELECT 900001, n * 7919, name, poster, name, poster, 1, 10, 100, 100, 70000000, 100,
               now() - n * interval '1 minute', now() - n * interval '1 minute'
          FROM generate_series(1, 20000) n
         CROSS JOIN LATERAL (
               SELECT (ARRAY['Some', 'Other', 'Daily', 'Big', 'Little'])[n % 5 + 1] || '.Show.'
                      || (n % 997) || '.S' || lpad((n % 30)::text, 2, '0') || 'E' || lpad((n % 24)::text, 2, '0')
                      || (ARRAY['.720p.HDTV.x264-GRP', '.1080p.WEB-DL', '.PDTV.XviD', '-EBOOK.epub'])[n % 4 + 1]
                      AS name,
                      'poster' || (n % 50) || '@example.net' AS poster) made
    """)
    )
    db_session.execute(text("ANALYZE posts"))
    for words, filters, index in (
        ("walking dead s03e06", {}, "ix_posts_words"),
        ("little show 42 s03", {}, "ix_posts_words"),
        ("walking dead", {"group": "alt.binaries.test.many"}, "ix_posts_words"),
        ("daily show 7", {"min_size": 10, "max_age_days": 30, "poster": "poster1"}, "ix_posts_"),
        # Words most posts have: the newest posts are read by the index until a page is full.
        ("show", {}, "ix_posts_newest"),
        (None, {}, "ix_posts_newest"),
        (None, {"group": "alt.binaries.test.many"}, "ix_posts_"),
        (None, {"group": MADE}, "ix_posts_group_newest"),
        # A group of a few posts may be read by its key instead: either way, no scan.
        ("generated", {"group": MADE}, ""),
    ):
        sent.clear()
        search_posts(db_session, words, **filters)
        assert len(sent) == 1  # the count and the page in one statement
        ((statement, parameters),) = sent
        # Planned as the search runs it: under its settings (SEARCH_BEGIN's page costs).
        conn = db_session.connection()
        conn.exec_driver_sql(SEARCH_BEGIN.format(timeout_ms=10_000))
        plan = "\n".join(conn.exec_driver_sql(f"EXPLAIN {driver_sql(statement)}", parameters).scalars())
        conn.exec_driver_sql(SEARCH_END)
        # The posts matching, read up to the count's bound (the CTE "matching"), and the page.
        counting, _, rest = plan.partition("CTE counted")
        assert "Seq Scan on posts" not in rest, plan
        assert "Seq Scan on posts" not in counting or words in ("show", None), plan
        assert index in plan, plan
    # Counted COUNT_AHEAD past the page, and said to be a lower bound past it; exact below.
    for offset, limit in ((0, 10), (500, 100), (MAX_OFFSET, MAX_LIMIT)):
        page = search_posts(db_session, "show", limit=limit, offset=offset)
        assert (page.total, page.total_exact) == (min(offset + limit + COUNT_AHEAD, 20000), False)
        assert len(page.items) == limit
    daily = search_posts(db_session, "daily show", limit=1000, offset=3000)
    assert (daily.total, daily.total_exact, len(daily.items)) == (4000, True, 1000)
    assert names(search_posts(db_session, "walking dead s03e06")) == [WALKING_DEAD, WALKING_DEAD]
    assert search_posts(db_session, "little show 42 s03").total == len(
        [n for n in range(1, 20001) if n % 5 == 4 and n % 997 == 42 and n % 30 == 3]
    )


def test_words_of_a_few_percent_of_the_posts_are_looked_for_among_the_newest_first(
    catalog, db_session, sent, monkeypatch
):
    """A search of words in between (search._window: by the statistics, in at most WINDOW_SHARE of
    the posts, in WINDOW_MATCHES times the count's bound or more) looks for its page among the
    newest posts first, and among all only when the window holds fewer than the count's bound:
    either way it finds what a search of all the posts finds. Here `mid` is in every 67th of 20,000
    posts, one a minute back from now, and in one dated 400 days ahead (past the window's days: it
    is found by its date), and `oldmid` in as many, all among the oldest tenth: its window (the
    newest posts its share says hold the page twice over) has none of them; `rarish` is as common
    as `mid`, searched by GIN's prefix match of `rari` (FEW_WORDS 0 here), windowed unless that reads more than
    WINDOW_WORD_POSTS posts. The window is asked
    for as the days of the posts' times too (whether PostgreSQL intersects them with the words in
    the index is its choice: on bench/catalog.py's catalogs it does). A few hundred matches are
    enough here (WINDOW_MATCHES 1): the bounds are for catalogs of millions."""
    monkeypatch.setattr(search_service, "WINDOW_MATCHES", 1)
    monkeypatch.setattr(search_service, "FEW_WORDS", 0)  # `rari`, the start of one word, by GIN's prefix match
    db_session.execute(text("INSERT INTO groups (id, name) VALUES (900003, 'alt.binaries.test.window')"))
    db_session.execute(
        text("""
        INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen, parts_expected,
                           parts_seen, bytes, completion, first_post, last_post)
        SELECT 900003, n, name, 'p@example.net', name, 'p@example.net', 1, 1, 1, 1, 1000, 100,
               now() - n * interval '1 minute', now() - n * interval '1 minute'
          FROM generate_series(1, 20000) n
         CROSS JOIN LATERAL (SELECT 'Windowed.Post' || CASE WHEN n % 67 = 0 THEN '.Mid' ELSE '' END
                                    || CASE WHEN n > 18000 AND n % 6 = 0 THEN '.Oldmid' ELSE '' END
                                    || CASE WHEN n % 67 = 5 THEN '.Rarish' ELSE '' END AS name) made
        UNION ALL
        SELECT 900003, 20001, 'Windowed.Ahead.Mid', 'p@example.net', 'Windowed.Ahead.Mid', 'p@example.net', 1, 1, 1, 1, 1000, 100,
               now() + interval '400 days', now() + interval '400 days'
    """)
    )
    db_session.execute(text("ANALYZE posts"))
    forget_common_words()  # read in this transaction, which made them
    try:
        for words, limit, offset, fell_back in (
            ("mid", 1, 0, False),
            ("mid", 3, 20, False),
            ("windowed mid", 2, 10, False),  # the words' shares multiplied: 1.5% of the posts
            ("oldmid", 1, 0, True),
            ("oldmid", 5, 40, True),
            ("rari", 1, 0, False),  # 'rarish' (as many as `mid`), by GIN's prefix match
        ):
            if words == "rari":  # a prefix of words in under 5% of the posts is matched as one
                monkeypatch.setattr(search_service, "COMMON_SHARE", 0.05)
            sent.clear()
            page = search_posts(db_session, words, limit=limit, offset=offset)
            ((statement, parameters),) = sent
            assert "windowed" in statement and parameters["window"] is not None, words
            assert parameters["window"] < parameters["window_end"] < datetime.now(timezone.utc) + timedelta(days=400)
            assert parameters["window_times"].count("'") >= 2, words
            everywhere = (
                db_session.execute(
                    text(
                        "SELECT key FROM posts WHERE words @@ CAST(:query AS tsquery)"
                        " ORDER BY last_post DESC NULLS LAST, group_id, key"
                    ),
                    {"query": parameters["query"]},
                )
                .scalars()
                .all()
            )
            assert [post.key for post in page.items] == everywhere[offset : offset + limit], words
            assert (page.total, page.total_exact) == (offset + limit + COUNT_AHEAD, False), words
            assert (everywhere[0] == 20001) == ("mid" in words.split()), words
            # Whether the search among all ran: the plan as the search ran it.
            conn = db_session.connection()
            conn.exec_driver_sql(SEARCH_BEGIN.format(timeout_ms=10_000))
            plan = (
                conn.exec_driver_sql(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {driver_sql(statement)}", parameters)
                .scalars()
                .all()
            )
            conn.exec_driver_sql(SEARCH_END)
            gate = next(i for i, line in enumerate(plan) if "One-Time Filter" in line and " < " in line)
            assert ("never executed" not in plan[gate + 1]) == fell_back, "\n".join(plan)
        # Words and categories (what Radarr's searches send) are windowed too, the categories' share
        # of the posts (by the statistics) multiplied with the words' (their own share deciding
        # whether they are in between); the same posts are found.
        for categories, limit, offset, test in (
            ([8000], 3, 20, "category BETWEEN 8000 AND 8999"),
            ([8010, 5030], 1, 0, "category IN (8010, 5030)"),
        ):
            sent.clear()
            page = search_posts(db_session, "mid", categories=categories, limit=limit, offset=offset)
            ((statement, parameters),) = sent
            assert "windowed" in statement and parameters["window"] is not None, categories
            everywhere = (
                db_session.execute(
                    text(
                        f"SELECT key FROM posts WHERE words @@ CAST(:query AS tsquery) AND {test}"
                        " ORDER BY last_post DESC NULLS LAST, group_id, key"
                    ),
                    {"query": parameters["query"]},
                )
                .scalars()
                .all()
            )
            assert [post.key for post in page.items] == everywhere[offset : offset + limit], categories
        # Categories of no post, or of fewer than WINDOW_NARROWED of them: no window.
        for categories, narrowed in (([7000], 0.25), ([8000], 1.01)):
            monkeypatch.setattr(search_service, "WINDOW_NARROWED", narrowed)
            sent.clear()
            search_posts(db_session, "mid", categories=categories)
            ((statement, parameters),) = sent
            assert "windowed" not in statement, categories
        # One category alone, of fewer than WINDOW_NARROWED of the posts, is tested by equality (its
        # posts newest first from ix_posts_category_newest); of more, by `= ANY`. The same posts.
        for narrowed, by_equality in ((1.01, True), (0.0, False)):
            monkeypatch.setattr(search_service, "WINDOW_NARROWED", narrowed)
            sent.clear()
            page = search_posts(db_session, "mid", categories=[8010], limit=3, offset=2)
            ((statement, parameters),) = sent
            assert ("p.category = CAST(:category AS smallint)" in statement) == by_equality, narrowed
            assert ("p.category = ANY(" in statement) != by_equality, narrowed
            everywhere = (
                db_session.execute(
                    text(
                        "SELECT key FROM posts WHERE words @@ CAST(:query AS tsquery) AND category = 8010"
                        " ORDER BY last_post DESC NULLS LAST, group_id, key"
                    ),
                    {"query": parameters["query"]},
                )
                .scalars()
                .all()
            )
            assert len(everywhere) > 5 and [post.key for post in page.items] == everywhere[2:5], narrowed
        # Several narrow categories without words (Sonarr's RSS sync): each one's newest posts, merged
        # (MATCHING_BY_CATEGORY); of more posts, or with words, `= ANY`. The same posts and count.
        newest = (
            db_session.execute(
                text(
                    "SELECT key FROM posts WHERE category IN (8010, 5030)"
                    " ORDER BY last_post DESC NULLS LAST, group_id, key"
                )
            )
            .scalars()
            .all()
        )
        assert len(newest) > 6
        for narrowed, words, merged in ((1.01, None, True), (0.0, None, False), (1.01, "mid", False)):
            monkeypatch.setattr(search_service, "WINDOW_NARROWED", narrowed)
            sent.clear()
            page = search_posts(db_session, words, categories=[8010, 5030], limit=3, offset=2)
            ((statement, parameters),) = sent
            assert ("CROSS JOIN LATERAL" in statement) == merged, (narrowed, words)
            if words is None:
                assert [post.key for post in page.items] == newest[2:5], narrowed
                assert page.total == min(len(newest), 2 + 3 + COUNT_AHEAD), narrowed
        # Words too common, too rare or of too many posts each for a window, and words with other
        # filters than categories, look among all at once.
        monkeypatch.setattr(search_service, "WINDOW_WORD_POSTS", 100)
        for words, filters in (
            ("windowed", {}),
            ("post 134", {}),
            ("mid", {"group": "alt.binaries.test.window"}),
            ("rari", {}),  # a prefix match of 298 posts, more than WINDOW_WORD_POSTS
            ("oldmid", {"limit": 100}),  # in 333 posts, fewer than WINDOW_MATCHES times 201
        ):
            if words == "oldmid":
                monkeypatch.setattr(search_service, "WINDOW_WORD_POSTS", 25_000)
                monkeypatch.setattr(search_service, "WINDOW_MATCHES", 2)
            sent.clear()
            search_posts(db_session, words, **{"limit": 1, **filters})
            ((statement, parameters),) = sent
            assert "windowed" not in statement and "window" not in parameters, words
    finally:
        forget_common_words()  # they go with the transaction


def test_the_words_shares_are_counted_past_the_words_postgresql_plans_with(db_session):
    """A search sizes its window by the shares of the statistics object posts_word_shares
    (migration 0028), which keeps ten times the words the column's own statistics keep: PostgreSQL
    plans with the column's, and a longer list costs every plan. Here the column keeps 10 words
    (statistics target 1, in this transaction only), and 60 words each in a 60th of the posts are
    all counted, with their shares; without the object's counts, the column's are read."""
    db_session.execute(text("INSERT INTO groups (id, name) VALUES (900004, 'alt.binaries.test.shares')"))
    db_session.execute(text("ALTER TABLE posts ALTER COLUMN words SET STATISTICS 1"))
    db_session.execute(
        text("""
        INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen, parts_expected,
                           parts_seen, bytes, completion, first_post, last_post)
        SELECT 900004, n, 'Shared.Word' || n % 60, 'p@example.net', 'Shared.Word' || n % 60, 'p@example.net',
               1, 1, 1, 1, 1000, 100, now(), now()
          FROM generate_series(1, 6000) n
    """)
    )
    planned = text("""
        SELECT array_length(most_common_elems, 1) FROM pg_stats
         WHERE tablename = 'posts' AND attname = 'words' AND schemaname = current_schema()
    """)
    forget_common_words()
    try:
        db_session.execute(text("ANALYZE posts"))
        shares = search_service._statistics(db_session).words
        assert db_session.execute(planned).scalar_one() <= 10
        posts = db_session.execute(text("SELECT count(*) FROM posts")).scalar_one()
        for n in range(60):
            assert shares[f"word{n}"] == pytest.approx(100 / posts, rel=0.01), n
        assert shares["shared"] == pytest.approx(6000 / posts, rel=0.01)
        # Without the object's counts (dropped in this transaction): the column's.
        db_session.execute(text("DROP STATISTICS posts_word_shares"))
        forget_common_words()
        column = search_service._statistics(db_session).words
        assert len(column) == db_session.execute(planned).scalar_one()
        assert column["shared"] == pytest.approx(6000 / posts, rel=0.01)
    finally:
        forget_common_words()  # they go with the transaction


def test_a_posts_times_are_the_hours_python_names_for_its_last_article(db_session):
    """post_times (migration 0027) and search.time_words give a moment the same hour, day and 16
    days: at a day's first and last microsecond, before 1970, far ahead, in another time zone. A
    post without dates has no times."""
    moments = [
        datetime(2026, 12, 6, 0, 0, tzinfo=timezone.utc),
        datetime(2026, 12, 5, 23, 59, 59, 999999, tzinfo=timezone.utc),
        datetime(1969, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
        datetime(1900, 3, 1, 12, tzinfo=timezone.utc),
        datetime(9999, 12, 31, 23, tzinfo=timezone.utc),
        datetime(2026, 12, 6, 1, 30, tzinfo=timezone(timedelta(hours=5))),  # the 5th in UTC
    ]
    for moment in moments:
        stored = db_session.execute(
            text("SELECT tsvector_to_array(post_times(:moment))"), {"moment": moment}
        ).scalar_one()
        assert sorted(stored) == sorted(time_words(moment)), moment
    assert time_words(moments[5]) == time_words(datetime(2026, 12, 5, 20, 30, tzinfo=timezone.utc))
    assert db_session.execute(text("SELECT post_times(NULL)")).scalar_one() is None
    # Inlined: the column's expression is the function's, without a call per row written.
    plan = db_session.execute(text("EXPLAIN (VERBOSE) SELECT post_times(last_post) FROM posts")).scalars().all()
    assert "array_to_tsvector" in "\n".join(plan) and "post_times" not in "\n".join(plan), plan


def test_a_window_is_asked_for_as_the_fewest_times_from_its_start_to_the_hour_after_now():
    """window_times: the window from the start of its hour, or of its 16 days or its day when that
    lengthens it by at most WINDOW_GROWTH, as times of TIME_WORD_HOURS, each starting where the one
    before ends, from that start to the hour after now at least; None when that takes too many
    words, or the window starts later."""
    now = datetime(2026, 12, 6, 17, 5, tzinfo=timezone.utc)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    hour = timedelta(hours=1)
    after_now = datetime(2026, 12, 6, 18, tzinfo=timezone.utc)
    for window, first_size, words in (
        (datetime(2026, 12, 6, 16, 59, tzinfo=timezone.utc), 1, 3),  # 2 hours: from its hour
        (datetime(2026, 9, 8, 21, 27, 57, tzinfo=timezone.utc), 384, 6),  # 16 days start on Sep 8
        (datetime(2026, 12, 6, 0, 0, tzinfo=timezone.utc), 24, 1),
        (datetime(2026, 12, 6, 18, 59, tzinfo=timezone.utc), 1, 1),
        (datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc), 384, 22),  # from Dec 26, 6 days earlier
        (datetime(2026, 11, 20, 5, 0, tzinfo=timezone.utc), 24, 8),  # its 16 days: 9 of 16 days earlier
    ):
        times = window_times(window, now)
        assert times is not None, window
        start, asked, end = times
        assert start <= window and start.minute == start.second == start.microsecond == 0, window
        hour_start = window.replace(minute=0, second=0, microsecond=0)
        assert start == hour_start or hour_start - start <= WINDOW_GROWTH * (after_now - hour_start), window
        assert end >= datetime(2026, 12, 6, 19, tzinfo=timezone.utc), window
        at = (start - epoch) // hour
        sizes = []
        for word in asked.split(" | "):
            size, index = (int(part) for part in word.strip("'").split("h"))
            assert size in TIME_WORD_HOURS and index * size == at, (window, asked)
            at += size
            sizes.append(size)
        assert epoch + at * hour == end, window
        assert (sizes[0], len(sizes)) == (first_size, words), (window, asked)
    assert window_times(datetime(2026, 12, 6, 19, 0, tzinfo=timezone.utc), now) is None
    assert window_times(datetime(2023, 7, 20, 20, 17, tzinfo=timezone.utc), now) is None  # 78 words


def test_the_last_word_stands_for_the_words_of_the_catalog_that_start_with_it(catalog, db_session, sent):
    """A trigger on posts keeps each group's words (post_words), in the writing transaction, for
    rows inserted and updated alike. The last word of a search is searched as the words that start
    with it, named, when a common word (COMMON_WORDS) is among them (GIN's prefix match would read
    all their posts first) or at most FEW_WORDS start with it; else, or when more than PREFIX_WORDS
    start with it, as GIN's prefix match. Either way every post whose word starts with it is found."""
    db_session.execute(text("INSERT INTO groups (id, name) VALUES (900002, 'alt.binaries.test.prefixes')"))
    many = PREFIX_WORDS + 10
    # Posts of one common word each (cmn1 ... cmn3, a third of the posts each), of words each in
    # one post (pfx1 ... pfx74), and of rare words again (rre1, rre2).
    db_session.execute(
        text("""
        INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen, parts_expected,
                           parts_seen, bytes, completion, first_post, last_post)
        SELECT 900002, n, name, 'p@example.net', name, 'p@example.net', 1, 1, 1, 1, 1000, 100, now(), now()
          FROM generate_series(1, 3000) n
         CROSS JOIN LATERAL (SELECT 'Prefixed.Word.Cmn' || (n % 3 + 1)
                                    || CASE WHEN n <= :many THEN '.Pfx' || n ELSE '' END
                                    || CASE WHEN n IN (2000, 2001) THEN '.Rre' || n ELSE '' END AS name) made
    """),
        {"many": many},
    )
    words = set(db_session.execute(text("SELECT word FROM post_words WHERE group_id = 900002")).scalars())
    assert {"prefixed", "word", "cmn1", "rre2000", *(f"pfx{n}" for n in range(1, many + 1))} <= words
    db_session.execute(
        text("UPDATE posts SET names = names || E'\\nLater.Cmnlater.Rrelater' WHERE group_id = 900002 AND key = 1")
    )
    # The join writes posts by upsert: the words of a row it updates come too.
    db_session.execute(
        text("""
        INSERT INTO posts AS p (group_id, key, name, poster, names, posters, releases, files_seen, parts_expected,
                                parts_seen, bytes, completion, first_post, last_post)
        SELECT group_id, key, name, poster, names || E'\\nUpserted.Rreupsert', posters, releases, files_seen,
               parts_expected, parts_seen, bytes, completion, first_post, last_post
          FROM posts WHERE group_id = 900002 AND key = 2
        ON CONFLICT (group_id, key) DO UPDATE SET names = EXCLUDED.names
    """)
    )
    assert {"cmnlater", "rrelater", "upserted", "rreupsert"} <= set(
        db_session.execute(text("SELECT word FROM post_words WHERE group_id = 900002")).scalars()
    )
    db_session.execute(text("ANALYZE posts"))
    forget_common_words()  # read in this transaction, which made them
    try:
        # Common words start with cmn: named, each of them (cmnlater only in a name added later).
        page = search_posts(db_session, "prefixed word cmn", limit=1000, offset=2000)
        assert (page.total, page.total_exact, len(page.items)) == (3000, True, 1000)
        assert sent[-1][1]["query"] == "'prefixed' & 'word' & ('cmn1' | 'cmn2' | 'cmn3' | 'cmnlater')"
        assert search_posts(db_session, "cmnlater").total == 1
        assert search_posts(db_session, "cmn1", limit=1000, offset=900).total == 1000
        assert sent[-1][1]["query"] == "'cmn1'"  # the only word starting with it
        # More than FEW_WORDS rare words: GIN's prefix match.
        found = search_posts(db_session, "prefixed word rre")
        assert sorted(item.key for item in found.items) == [1, 2, 2000, 2001]
        assert sent[-1][1]["query"] == "'prefixed' & 'word' & 'rre':*"
        # FEW_WORDS or fewer: named, rare or not.
        assert search_posts(db_session, "prefixed word rre200").total == 2
        assert sent[-1][1]["query"] == "'prefixed' & 'word' & ('rre2000' | 'rre2001')"
        assert search_posts(db_session, "rrelat").total == 1
        assert sent[-1][1]["query"] == "'rrelater'"
        assert search_posts(db_session, "rrelatest").total == 0  # no word starts with it
        assert sent[-1][1]["query"] == "'rrelatest':*"
        # More than PREFIX_WORDS start with pfx: GIN's prefix match.
        assert search_posts(db_session, "cmn2 pfx", limit=1000).total == len(
            [n for n in range(1, many + 1) if n % 3 + 1 == 2]
        )
        assert sent[-1][1]["query"] == "'cmn2' & 'pfx':*"
        # The last word is the one said last, whatever its place among the others.
        assert search_posts(db_session, "rrelater prefixed cm").total == 1
        assert sent[-1][1]["query"].startswith("'rrelater' & 'prefixed' & (")
    finally:
        forget_common_words()  # they go with the transaction
