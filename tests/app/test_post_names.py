"""What posts keep of their names (app.services.postnames) on the real database: the join writes
each post's category and parsed fields, reads an obfuscated post by its files' names, writes them
again when the post's name changes, and the searches filter on them."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import text

from app.db import session_scope
from app.services import postnames, search
from tests.app.factories import BIG
from tests.app.test_nzb_export import store_groups
from tests.fixtures.queries import assert_posts_summed, query

DATE = b"Sat, 01 Nov 2025 07:27:27 +0000"
# (group, name, files): posts of real name shapes, in the groups they go to.
POSTS = (
    ("alt.binaries.teevee", "Show.Name.S01E02.720p.HDTV.x264-GRP", 3),
    ("alt.binaries.teevee", "Show.Name.S01E03E04.1080p.WEB-DL.DD5.1.H.264-GRP", 3),
    ("alt.binaries.teevee", "Show.Name.S02.1080p.BluRay.x264-GRP", 4),
    ("alt.binaries.teevee", "Talk.Show.2014.07.22.Guest.Name.720p.HDTV.x264-GRP", 2),
    ("alt.binaries.teevee", "Film.Title.2019.1080p.BluRay.x264-GRP", 3),
    ("alt.binaries.moovee", "Other.Film.2021.2160p.WEB-DL.DDP5.1.HDR.HEVC-GRP", 3),
    ("alt.binaries.e-book", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", 2),
)


def lines_of(posts) -> dict[str, list[bytes]]:
    by_group: dict[str, list[bytes]] = {}
    for group, name, files in posts:
        lines = by_group.setdefault(group, [])
        for index in range(1, files + 1):
            subject = b'[%d/%d] - "%s.part%02d.rar" yEnc (1/1)' % (index, files, name.encode(), index)
            lines.append(subject)
    numbered: dict[str, list[bytes]] = {}
    for group, subjects in by_group.items():
        numbered[group] = [
            b"\t".join(
                [
                    str(BIG + i).encode(),
                    subject,
                    b"Poster <p@example.net>",
                    DATE,
                    b"<%d.%d@example.net>" % (i, abs(hash(group)) % 10**6),
                    b"",
                    b"4000",
                    b"30",
                    b"",
                ]
            )
            for i, subject in enumerate(subjects)
        ]
    return numbered


@pytest.fixture
def named_catalog(clean_db):
    store_groups(lines_of(POSTS))
    return clean_db


def rows(engine) -> dict[str, dict]:
    return {row.name: row._asdict() for row in query(engine, "SELECT * FROM posts")}


def test_the_join_keeps_each_posts_category_and_fields(named_catalog):
    found = rows(named_catalog)
    episode = found["Show.Name.S01E02.720p.HDTV.x264-GRP"]
    assert (
        episode["category"],
        episode["title"],
        episode["season"],
        episode["episode"],
        episode["episode_last"],
        episode["resolution"],
        episode["source"],
    ) == (5040, "Show Name", 1, 2, 2, 720, "hdtv")
    double = found["Show.Name.S01E03E04.1080p.WEB-DL.DD5.1.H.264-GRP"]
    assert (double["category"], double["episode"], double["episode_last"]) == (5010, 3, 4)
    pack = found["Show.Name.S02.1080p.BluRay.x264-GRP"]
    assert (pack["season"], pack["episode"], pack["episode_last"]) == (2, None, None)
    daily = found["Talk.Show.2014.07.22.Guest.Name.720p.HDTV.x264-GRP"]
    assert daily["air_date"] == date(2014, 7, 22) and daily["category"] == 5040
    # A film posted in a TV group is a film.
    assert found["Film.Title.2019.1080p.BluRay.x264-GRP"]["category"] == 2040
    assert found["Film.Title.2019.1080p.BluRay.x264-GRP"]["year"] == 2019
    assert found["Other.Film.2021.2160p.WEB-DL.DDP5.1.HDR.HEVC-GRP"]["category"] == 2045
    # A hash in an e-book group: a book by its group.
    assert found["a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6"]["category"] == 7020
    assert_posts_summed(named_catalog)


def test_an_obfuscated_post_is_read_by_its_files_names(clean_db):
    hashed = "8f3a9c2e71b04d5fa6e2c9d1b7f04a3e"
    store_groups(lines_of([("alt.binaries.misc", hashed, 2)]))
    (post,) = query(clean_db, "SELECT name, category, season FROM posts")
    assert (post.name, post.category, post.season) == (hashed, 8020, None)
    # Its files carry a real name (as a par2 set's inner names will give): read by them.
    with session_scope() as s:
        s.execute(
            text(
                "UPDATE files SET name = 'Hidden.Show.S05E06.1080p.WEB.h264-GRP.part01.rar' WHERE name LIKE '%part01%'"
            )
        )
    with session_scope() as s:
        assert postnames.refill(s) == 1
    (post,) = query(clean_db, "SELECT name, category, season, episode, title FROM posts")
    assert (post.category, post.season, post.episode, post.title) == (5010, 5, 6, "Hidden Show"), post


def test_refill_recomputes_and_the_join_writes_a_changed_name_afresh(named_catalog):
    with session_scope() as s:
        s.execute(text("UPDATE posts SET category = 8010, title = NULL, season = NULL"))
    with session_scope() as s:
        changed = postnames.refill(s, page=2)
    assert changed == len(POSTS)
    found = rows(named_catalog)
    assert found["Show.Name.S01E02.720p.HDTV.x264-GRP"]["season"] == 1
    with session_scope() as s:
        assert postnames.refill(s) == 0  # nothing left to change


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        (
            {"categories": [5040]},
            {
                "Show.Name.S01E02.720p.HDTV.x264-GRP",
                "Show.Name.S02.1080p.BluRay.x264-GRP",
                "Talk.Show.2014.07.22.Guest.Name.720p.HDTV.x264-GRP",
            },
        ),
        (
            {"categories": [5000]},
            {
                "Show.Name.S01E02.720p.HDTV.x264-GRP",
                "Show.Name.S02.1080p.BluRay.x264-GRP",
                "Talk.Show.2014.07.22.Guest.Name.720p.HDTV.x264-GRP",
                "Show.Name.S01E03E04.1080p.WEB-DL.DD5.1.H.264-GRP",
            },
        ),
        (
            {"categories": [2000, 5010]},
            {
                "Film.Title.2019.1080p.BluRay.x264-GRP",
                "Other.Film.2021.2160p.WEB-DL.DDP5.1.HDR.HEVC-GRP",
                "Show.Name.S01E03E04.1080p.WEB-DL.DD5.1.H.264-GRP",
            },
        ),
        ({"categories": []}, set()),
        ({"season": 1}, {"Show.Name.S01E02.720p.HDTV.x264-GRP", "Show.Name.S01E03E04.1080p.WEB-DL.DD5.1.H.264-GRP"}),
        ({"season": 1, "episode": 4}, {"Show.Name.S01E03E04.1080p.WEB-DL.DD5.1.H.264-GRP"}),
        ({"season": 2}, {"Show.Name.S02.1080p.BluRay.x264-GRP"}),
        ({"season": 2, "episode": 1}, set()),
        ({"air_date": date(2014, 7, 22)}, {"Talk.Show.2014.07.22.Guest.Name.720p.HDTV.x264-GRP"}),
        ({"year": 2019}, {"Film.Title.2019.1080p.BluRay.x264-GRP"}),
    ],
)
def test_searches_filter_on_what_names_say(named_catalog, filters, names):
    with session_scope() as s:
        page = search.search_posts(s, None, **filters)
    assert {post.name for post in page.items} == names
    assert page.total == len(names)


@pytest.mark.parametrize(
    "filters", [{"categories": [10000]}, {"season": -1}, {"episode": 40000}, {"air_date": "2014-07-22"}]
)
def test_filters_out_of_bounds_are_refused(clean_db, filters):
    with session_scope() as s, pytest.raises(search.SearchError):
        search.search_posts(s, None, **filters)
