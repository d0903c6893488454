"""Releases joined into posts (app.services.ingest.posts) on the real database: a post whose
poster changes part way and whose .nfo has a counter of its own is one post, whatever batches
cut it and in whichever order they are stored; different names posted at once by one poster,
and a repost of a name days later, stay apart."""
from __future__ import annotations

import itertools

import pytest

from app.db import session_scope
from app.services.ingest import posts, store
from edge.digest.gather import Gatherer
from tests.app.factories import BIG, accept, lease_one_range
from tests.app.overview import raw
from tests.fixtures.queries import query

DAY1 = b"Sat, 01 Nov 2025 07:27:27 +0000"
DAY1_LATER = b"Sat, 01 Nov 2025 07:39:02 +0000"
DAY4 = b"Tue, 04 Nov 2025 21:02:11 +0000"


def post_lines() -> list[tuple[bytes, bytes, bytes, str]]:
    """(subject, poster, date, what it is) of each article, in posting order."""
    articles = []
    for index in range(1, 7):  # ngPost style: the poster changes after the third file
        poster = b"KIUzWM340zX@mile.com" if index <= 3 else b"Myfranco@mile.com"
        for part in (1, 2):
            articles.append((b'[%02d/06] "Post.Name.2025.part%02d.rar" yEnc (%d/2)' % (index, index, part),
                             poster, DAY1, "post"))
    articles.append((b'[01/01] - "Post.Name.2025.nfo" yEnc (1/1)', b"8Bs3Yn0DQmv@5Sc.ChS", DAY1_LATER, "post"))
    for index in (1, 2):  # the same poster, the same time, another name: another post
        articles.append((b'[%d/2] - "Other.Post.2025.part%d.rar" yEnc (1/1)' % (index, index),
                         b"KIUzWM340zX@mile.com", DAY1, "other"))
    for index in (1, 2):  # the name posted again three days later by someone else: a repost
        articles.append((b'[%d/2] - "Post.Name.2025.part%d.rar" yEnc (1/1)' % (index, index),
                         b"Reposter <r@example.net>", DAY4, "repost"))
    return articles


def overview(first: int, articles) -> list[bytes]:
    return [b"\t".join([str(first + i).encode(), subject, poster, date, b"<a%d.%d@example.net>" % (first, i), b"",
                        b"4000", b"30", b""]) for i, (subject, poster, date, _) in enumerate(articles)]


def batch_of(first: int, lines: list[bytes]) -> dict:
    gatherer = Gatherer("alt.binaries.test")
    gatherer.add_chunk(first, first + len(lines) - 1, [raw(lines)])
    return gatherer.build()


def store_in(cut: int, order: tuple[int, ...]) -> dict[str, set]:
    """The articles in two batches cut at `cut`, stored and gathered in `order`: what each post
    holds, by what was posted."""
    articles = post_lines()
    lines = overview(BIG, articles)
    node, range_id = lease_one_range(BIG, BIG + len(lines) - 1)
    batches = [batch_of(BIG, lines[:cut]), batch_of(BIG + cut, lines[cut:])]
    ids = [accept(node, range_id, batch) for batch in batches]
    for position in order:
        with session_scope() as s:
            assert store.store_batch(s, ids[position]).stored
        with session_scope() as s:
            assert posts.gather_batch(s, ids[position]) is not None
    return ids


def posted(clean_db) -> dict[str, tuple]:
    """For each posted thing: (post key, files in the post, releases in it)."""
    rows = query(clean_db, "SELECT p.key, p.files_seen, p.releases, p.name, p.first_post FROM posts p ORDER BY p.key")
    found = {}
    for key, files, releases, name, first in rows:
        what = "other" if name.startswith("Other") else "repost" if first.day == 4 else "post"
        assert what not in found, f"{what} came out as several posts: {rows}"
        found[what] = (key, files, releases)
    return found


@pytest.mark.parametrize("cut, order", [(7, (0, 1)), (7, (1, 0)), (12, (1, 0)), (13, (0, 1)), (3, (1, 0))])
def test_a_post_cut_anywhere_and_stored_in_any_order_is_one_post(clean_db, cut, order):
    store_in(cut, order)
    found = posted(clean_db)
    assert set(found) == {"post", "other", "repost"}
    key, files, releases = found["post"]
    assert (files, releases) == (7, 3)  # six rars over two posters, and the .nfo of a third
    assert found["other"][1:] == (2, 1) and found["repost"][1:] == (2, 1)
    # The post's key is its least release key, whatever the order.
    members = query(clean_db, "SELECT key FROM releases WHERE coalesce(post_key, key) = :k", k=key)
    assert key == min(k for (k,) in members) and len(members) == 3
    assert query(clean_db, "SELECT count(*) FROM seed_batches WHERE state <> 'gathered' OR release_keys IS NOT NULL"
                 ) == [(0,)]


def test_every_order_gives_the_same_posts(clean_db):
    seen = set()
    for order in itertools.permutations((0, 1)):
        with clean_db.begin() as conn:
            conn.exec_driver_sql("TRUNCATE releases, files, release_chunks, fragments, stored_fragments,"
                                 " rule_counts, seed_batches, seed_ranges, seed_plans, seed_nodes, groups CASCADE")
        store_in(9, order)
        seen.add(tuple(query(clean_db, "SELECT key, coalesce(post_key, key) FROM releases ORDER BY key")))
    assert len(seen) == 1


def test_gathering_again_moves_nothing(clean_db):
    ids = store_in(7, (0, 1))
    with session_scope() as s:
        assert posts.gather_batch(s, ids[1]) is None  # gathered already
        keys = [k for (k,) in s.execute(posts.text("SELECT key FROM releases")).all()]
        assert posts.join_posts(s, query(clean_db, "SELECT id FROM groups")[0][0], keys) == 0
