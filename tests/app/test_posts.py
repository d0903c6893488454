"""Releases joined into posts (app.services.ingest.posts) on the real database: a post whose
poster changes part way and whose .nfo has a counter of its own is one post, whatever batches
cut it and in whichever order they are stored; different names posted at once by one poster,
and a repost of a name days later, stay apart."""

from __future__ import annotations

import itertools
import random
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from app.db import session_scope
from app.services import leases
from app.services.ingest import posts, store
from edge.digest.gather import Gatherer
from edge.digest.overview import MAX_TEXT_BYTES
from simnews.generator import Config, generate
from simnews.scripted import overview_lines
from tests.app.factories import BIG, accept, lease_one_range, make_group, make_node, make_plan
from tests.app.overview import raw
from tests.fixtures.queries import assert_posts_summed, query, scalar

DAY1 = b"Sat, 01 Nov 2025 07:27:27 +0000"
DAY1_LATER = b"Sat, 01 Nov 2025 07:39:02 +0000"
DAY4 = b"Tue, 04 Nov 2025 21:02:11 +0000"


def post_lines() -> list[tuple[bytes, bytes, bytes, str]]:
    """(subject, poster, date, what it is) of each article, in posting order."""
    articles = []
    for index in range(1, 7):  # ngPost style: the poster changes after the third file
        poster = b"KIUzWM340zX@mile.com" if index <= 3 else b"Myfranco@mile.com"
        for part in (1, 2):
            articles.append(
                (b'[%02d/06] "Post.Name.2025.part%02d.rar" yEnc (%d/2)' % (index, index, part), poster, DAY1, "post")
            )
    articles.append((b'[01/01] - "Post.Name.2025.nfo" yEnc (1/1)', b"8Bs3Yn0DQmv@5Sc.ChS", DAY1_LATER, "post"))
    for index in (1, 2):  # the same poster, the same time, another name: another post
        articles.append(
            (
                b'[%d/2] - "Other.Post.2025.part%d.rar" yEnc (1/1)' % (index, index),
                b"KIUzWM340zX@mile.com",
                DAY1,
                "other",
            )
        )
    for index in (1, 2):  # the name posted again three days later by someone else: a repost
        articles.append(
            (
                b'[%d/2] - "Post.Name.2025.part%d.rar" yEnc (1/1)' % (index, index),
                b"Reposter <r@example.net>",
                DAY4,
                "repost",
            )
        )
    return articles


def overview(first: int, articles) -> list[bytes]:
    return [
        b"\t".join(
            [
                str(first + i).encode(),
                subject,
                poster,
                date,
                b"<a%d.%d@example.net>" % (first, i),
                b"",
                b"4000",
                b"30",
                b"",
            ]
        )
        for i, (subject, poster, date, _) in enumerate(articles)
    ]


def batch_of(first: int, lines: list[bytes]) -> dict:
    gatherer = Gatherer("alt.binaries.test")
    gatherer.add_chunk(first, first + len(lines) - 1, [raw(lines)])
    return gatherer.build()


def stored_and_joined(lines: list[bytes]) -> int | None:
    """The lines as one batch of a range of their own, stored, then joined: what the join
    returned (the releases that changed post)."""
    node, range_id = lease_one_range(BIG, BIG + len(lines) - 1)
    batch_id = accept(node, range_id, batch_of(BIG, lines))
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        return posts.join_batch(s, batch_id)


def store_in(cut: int, order: tuple[int, ...]) -> dict[str, set]:
    """The articles in two batches cut at `cut`, stored and joined in `order`: what each post
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
            assert posts.join_batch(s, ids[position]) is not None
    return ids


def posted(clean_db) -> dict[str, tuple]:
    """For each posted thing: (post key, files in the post, releases in it). The table `posts`
    holds every post summed from its releases."""
    assert_posts_summed(clean_db)
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
    # The post's key is the least key of its sets (the .nfo is a companion), whatever the order.
    members = query(
        clean_db,
        "SELECT r.key, r.metadata_only FROM releases r LEFT JOIN release_posts p"
        " ON p.group_id = r.group_id AND p.key = r.key WHERE coalesce(p.post_key, r.key) = :k",
        k=key,
    )
    assert len(members) == 3 and key == min(k for k, metadata in members if not metadata)
    assert sorted(metadata for _, metadata in members) == [False, False, True]
    assert query(clean_db, "SELECT count(*) FROM seed_batches WHERE state <> 'joined' OR release_keys IS NOT NULL") == [
        (0,)
    ]


def test_every_order_gives_the_same_posts(clean_db):
    seen = set()
    for order in itertools.permutations((0, 1)):
        with clean_db.begin() as conn:
            conn.exec_driver_sql(
                "TRUNCATE releases, files, release_chunks, fragment_packs, stored_fragments,"
                " rule_counts, seed_batches, seed_ranges, seed_plans, seed_nodes, groups CASCADE"
            )
        store_in(9, order)
        seen.add(
            tuple(
                query(
                    clean_db,
                    "SELECT r.key, coalesce(p.post_key, r.key) FROM releases r LEFT JOIN"
                    " release_posts p ON p.group_id = r.group_id AND p.key = r.key ORDER BY r.key",
                )
            )
        )
    assert len(seen) == 1


def test_joining_again_moves_nothing(clean_db):
    ids = store_in(7, (0, 1))
    with session_scope() as s:
        assert posts.join_batch(s, ids[1]) is None  # joined already
        keys = [k for (k,) in s.execute(text("SELECT key FROM releases")).all()]
        assert posts.join_posts(s, query(clean_db, "SELECT id FROM groups")[0][0], keys) == 0


def test_releases_of_a_name_too_short_to_join_by_are_posts_of_their_own(clean_db):
    """A name under 8 letters and digits has no hash to join by (catalog.name_hash): its releases,
    one name from two posters of one mail domain at one time, are two posts, each searchable."""
    articles = [
        (b'[%d/2] - "Ab.2025.part%d.rar" yEnc (1/1)' % (index, index), poster, DAY1, "short")
        for poster in (b"first@mile.com", b"second@mile.com")
        for index in (1, 2)
    ]
    assert stored_and_joined(overview(BIG, articles)) == 0
    assert query(clean_db, "SELECT count(*), count(name_hash) FROM releases") == [(2, 0)]
    assert query(clean_db, "SELECT key, files_seen, releases FROM posts ORDER BY key") == [
        (key, 2, 1) for (key,) in query(clean_db, "SELECT key FROM releases ORDER BY key")
    ]
    assert_posts_summed(clean_db)


def test_every_cut_of_the_batches_gives_the_same_posts(clean_db):
    """Where batches cut the articles does not matter either (a companion is told by what its
    release holds in the end, not by its first batch)."""
    seen = set()
    for cut in (2, 7, 12, 13, 15):
        with clean_db.begin() as conn:
            conn.exec_driver_sql(
                "TRUNCATE releases, release_posts, posts, files, release_chunks, fragment_packs,"
                " stored_fragments, rule_counts, seed_batches, seed_ranges, seed_plans, seed_nodes,"
                " groups CASCADE"
            )
        store_in(cut, (1, 0))
        seen.add(
            tuple(query(clean_db, "SELECT p.files_seen, p.releases, p.name FROM posts p ORDER BY p.name, p.first_post"))
        )
    assert len(seen) == 1


EBOOKS = "alt.binaries.e-book.french"


def _stored_in_a_shuffle(lines: dict[int, bytes], last: int, rng: random.Random) -> int:
    """The group's articles 1..last (those in `lines`: the rest the server lacks) planned in ranges
    of 10,000, digested in batches of one to four chunks of 1,000 (where nodes cut them, a node
    taking over a range where another stopped), accepted in order, then stored and joined in a
    random order with the joins lagging at random behind the stores, as two workers do. Returns
    how many batches."""
    spans = [(first, min(first + 9_999, last)) for first in range(1, last + 1, 10_000)]
    with session_scope() as s:
        ranges = make_plan(s, make_group(s, EBOOKS), spans)
        node, _ = make_node(s)
        for _ in spans:
            leases.lease(s, node, max_leases=len(spans))
        range_ids = [r.id for r in ranges]
    ids = []
    for range_id, (first, end) in zip(range_ids, spans):
        while first <= end:
            to = min(first + rng.choice((1, 2, 3, 4)) * 1_000 - 1, end)
            gatherer = Gatherer(EBOOKS)
            for chunk in range(first, to + 1, 1_000):
                chunk_end = min(chunk + 999, to)
                block = [lines[n] for n in range(chunk, chunk_end + 1) if n in lines]
                gatherer.add_chunk(chunk, chunk_end, [raw(block)] if block else [])
            ids.append(accept(node, range_id, gatherer.build()))
            first = to + 1
    waiting, stored, joined = rng.sample(ids, len(ids)), [], set()
    while len(joined) < len(ids):
        ready = [i for i in stored if i not in joined]
        if waiting and (not ready or rng.random() < 0.5):
            with session_scope() as s:
                assert store.store_batch(s, waiting[-1]).stored
            stored.append(waiting.pop())
        else:
            joined.add(batch_id := rng.choice(ready))
            with session_scope() as s:
                assert posts.join_batch(s, batch_id) is not None
    return len(ids)


def test_a_generated_group_in_any_cut_and_order_gives_the_same_posts_none_across_names(clean_db):
    """The join's promise on a whole group of generated e-book posts (about 1,400 releases from
    40,000 generated articles, many names shared by several posts, some releases cut by what the
    server lacks): whatever batches cut it and in whichever order they are stored and joined, every
    release ends in the same post, and no post holds releases of different names."""
    articles = generate(40_000, Config(seed=11, groups=(EBOOKS,), namespace="e2e", lost_rate=0.01))
    numbered = list(overview_lines(articles, EBOOKS, 1))
    # The server lacks a scatter of articles and a run of 2,500 (a chunk and more empty).
    lines = {n: line for n, line in enumerate(numbered, 1) if n % 397 != 11 and not 20_001 <= n <= 22_500}
    rng = random.Random(35)
    seen = set()
    for _ in range(3):
        with clean_db.begin() as conn:
            conn.exec_driver_sql(
                "TRUNCATE releases, release_posts, posts, post_inspections, files, release_chunks,"
                " fragment_packs, stored_fragments, rule_counts, seed_batches, seed_ranges, seed_plans,"
                " seed_nodes, groups CASCADE"
            )
        assert _stored_in_a_shuffle(lines, len(numbered), rng) > 10
        across = query(
            clean_db,
            "SELECT p.key, p.post_key FROM release_posts p"
            " JOIN releases r ON r.group_id = p.group_id AND r.key = p.key"
            " JOIN releases q ON q.group_id = p.group_id AND q.key = p.post_key"
            " WHERE r.name_hash IS DISTINCT FROM q.name_hash",
        )
        assert across == []
        seen.add(
            tuple(
                query(
                    clean_db,
                    "SELECT r.key, coalesce(p.post_key, r.key) FROM releases r LEFT JOIN release_posts p"
                    " ON p.group_id = r.group_id AND p.key = r.key ORDER BY r.key",
                )
            )
        )
        assert_posts_summed(clean_db)
    assert len(seen) == 1
    # The join had namesakes to weigh: releases sharing a name's hash, none of one post here.
    assert len(next(iter(seen))) > 1_000
    assert scalar(clean_db, "SELECT count(name_hash) - count(DISTINCT name_hash) FROM releases") > 50


def namesake(key, hours, *, count=6, domain="mile.com", companion=False, span=0.2):
    start = datetime(2025, 11, 1, tzinfo=timezone.utc) + timedelta(hours=hours)
    return posts.Namesake(key, 1, count, start, start + timedelta(hours=span), companion, domain)


def test_posts_of_a_name():
    posts_of = posts.posts_of
    # Sets of one count and domain posted together join; the least key names the post.
    assert posts_of([namesake(5, 0), namesake(3, 0.5)]) == {5: 3, 3: 3}
    # Another count, another domain, no domain, or hours apart: posts of their own.
    assert posts_of([namesake(5, 0), namesake(3, 0.5, count=4)]) == {5: 5, 3: 3}
    assert posts_of([namesake(5, 0), namesake(3, 0.5, domain="other.example")]) == {5: 5, 3: 3}
    assert posts_of([namesake(5, 0, domain=None), namesake(3, 0.5, domain=None)]) == {5: 5, 3: 3}
    assert posts_of([namesake(5, 0), namesake(3, 5)]) == {5: 5, 3: 3}
    # Reposts an hour apart do not chain into one post beyond a day.
    chained = posts_of([namesake(k, k * 0.9) for k in range(1, 60)])
    assert len(set(chained.values())) > 1
    assert all(chained[k] == min(j for j in chained if chained[j] == chained[k]) for k in chained)
    # A companion joins the nearest set within weeks, never names the post, and a set far away
    # stays apart; a companion with no set near is a post of its own.
    assert posts_of([namesake(1, 600, count=1, companion=True), namesake(7, 0), namesake(9, 2000)]) == {
        1: 7,
        7: 7,
        9: 9,
    }
    assert posts_of([namesake(1, 0, count=1, companion=True), namesake(9, 24 * 60)]) == {1: 1, 9: 9}


def test_a_name_posted_thousands_of_times_costs_a_sort():
    many = [namesake(k, k * 3) for k in range(20_000)]
    started = time.process_time()
    result = posts.posts_of(many)
    assert len(set(result.values())) == 20_000
    # Recorded, not asserted: the figure shows the sweep is not quadratic (20,000^2 pairs would
    # take minutes).
    print(f"posts_of over 20,000 namesakes: {time.process_time() - started:.3f} s")


def test_a_name_too_long_for_an_index_is_stored_and_joined(clean_db):
    """The join looks names up by their hash: a name of any length the digest keeps goes in, one
    past a btree index row too (about 2,700 bytes): a subject of Latin-1 bytes, as long as the
    digest keeps (MAX_TEXT_BYTES), is twice as long in UTF-8."""
    long_name = b"\xe9" * (MAX_TEXT_BYTES - 40)
    lines = overview(
        BIG,
        [
            (b'[1/2] - "%s.part1.rar" yEnc (1/1)' % long_name, b"a@mile.com", DAY1, "x"),
            (b'[2/2] - "%s.part2.rar" yEnc (1/1)' % long_name, b"b@mile.com", DAY1, "x"),
        ],
    )
    assert stored_and_joined(lines) == 1
    assert query(clean_db, "SELECT files_seen, releases FROM posts") == [(2, 2)]
    assert len(scalar(clean_db, "SELECT name FROM posts").encode()) > 3_000
