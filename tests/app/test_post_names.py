"""What posts keep of their names (app.services.postnames) on the real database: the join writes
each post's category and parsed fields, reads an obfuscated post by its files' names, writes them
again when the post's name changes, and the searches filter on them."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import text

from app import metrics
from app.db import session_scope
from app.services import leases, postnames, search
from app.services.ingest import posts, store
from edge.digest.gather import Gatherer
from tests.app.factories import BIG, accept, add_groups, make_node, make_plan
from tests.app.overview import raw
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


def stored_with_reading(clean_db, reading) -> tuple[str, dict]:
    """The teevee posts digested as a node does, what it read of their names changed by
    reading(release_names), accepted, stored and joined as the task does: (group, rows)."""
    group = "alt.binaries.teevee"
    lines = lines_of([post for post in POSTS if post[0] == group])[group]
    with session_scope() as s:
        (added,) = add_groups(s, [group])
        range_id = make_plan(s, added, [(BIG, BIG + len(lines) - 1)])[0].id
        node, _ = make_node(s)
        leases.lease(s, node, max_leases=1)
    gatherer = Gatherer(group)
    gatherer.add_chunk(BIG, BIG + len(lines) - 1, [raw(lines)])
    batch = gatherer.build()
    reading(batch["release_names"], batch["releases"]["name"])
    batch_id = accept(node, range_id, batch)
    with session_scope() as s:
        result = store.store_batch(s, batch_id)
    with session_scope() as s:
        assert posts.join_batch(s, batch_id, result.names) is not None
    return group, rows(clean_db)


EPISODE = "Show.Name.S01E02.720p.HDTV.x264-GRP"


def retitled(title: str, version: str | None = None):
    def change(release_names, names):
        release_names["title"][names.index(EPISODE)] = title
        if version is not None:
            release_names["version"] = version

    return change


def test_the_join_writes_what_the_node_read_of_a_name(clean_db, monkeypatch):
    """Where the node's reading is this code's, the join takes its columns without reading the
    name again (shown by a node that read a title of its own)."""
    monkeypatch.setattr(posts, "VERIFY_SHARE", 0.0)
    group, found = stored_with_reading(clean_db, retitled("Read By The Node"))
    assert found[EPISODE]["title"] == "Read By The Node"
    # The others as the data center reads them too.
    for name, row in found.items():
        if name != EPISODE:
            assert row["title"] == postnames.post_name(name, group).title


def test_a_node_of_another_reading_has_its_names_read_again(clean_db, monkeypatch):
    monkeypatch.setattr(posts, "VERIFY_SHARE", 0.0)
    _, found = stored_with_reading(clean_db, retitled("Read By The Node", version="0" * 16))
    assert found[EPISODE]["title"] == "Show Name"


def test_a_name_read_otherwise_by_the_node_is_counted_and_overruled(clean_db, monkeypatch):
    """The share the join reads again to compare: the data center's reading is kept, and the
    disagreement counted."""
    monkeypatch.setattr(posts, "VERIFY_SHARE", 1.0)
    group = "alt.binaries.teevee"
    disagreed = metrics.POST_NAMES_DISAGREED.labels(group)
    read = metrics.POST_NAMES_READ_BY_NODE.labels(group)
    before, read_before = disagreed._value.get(), read._value.get()
    _, found = stored_with_reading(clean_db, retitled("Read By The Node"))
    assert found[EPISODE]["title"] == "Show Name"
    assert disagreed._value.get() - before == 1
    # The other four posts of the group took the node's reading (checked, and the same).
    assert read._value.get() - read_before == 4
