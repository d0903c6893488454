"""Inspections in the data center (app.services.inspections) through the node API on the real
database: the join queues the posts worth it, nodes lease them with the message-ids to read,
leases expire and are given back, a result is stored once and bounded, and bad input gets a
clear error that changes nothing."""

from __future__ import annotations

import hashlib
import threading
import xml.etree.ElementTree as ET
import zlib

import pytest
from sqlalchemy import select, text

from app.db import session_scope
from app.models import Group, SeedNode
from app.services import apikeys, inspections, leases, search
from app.services.ingest import posts, store
from edge.digest.gather import Gatherer
from tests.app.factories import BIG, accept, make_node, make_plan
from tests.app.overview import raw
from tests.app.test_nzb_export import store_groups
from tests.fixtures.queries import assert_posts_summed, query, scalar
from tests.fixtures.waiting import wait_until

API = "/api/v1/seed"
DATE = b"Sat, 01 Nov 2025 07:27:27 +0000"
HASHED = "8f3a9c2e71b04d5fa6e2c9d1b7f04a3e"


def overview_line(number: int, subject: bytes, poster: bytes, message_id: bytes, size: int = 4000) -> bytes:
    return b"\t".join([str(number).encode(), subject, poster, DATE, message_id, b"", str(size).encode(), b"30", b""])


def lines(name: str, files: list[str], posters: list[bytes], first: int = 0) -> list[bytes]:
    return [
        overview_line(
            BIG + first + i,
            b'%s [%d/%d] - "%s" yEnc (1/1)' % (name.encode(), i + 1, len(files), f.encode()),
            posters[i % len(posters)],
            b"<i%d.%d@example.net>" % (first, i),
        )
        for i, f in enumerate(files)
    ]


@pytest.fixture
def queued(client, clean_db):
    """A hashed post (queued), a named one (not), and two nodes' headers."""
    hashed_files = [
        f"{HASHED}.par2",
        f"{HASHED}.vol00+01.par2",
        f"{HASHED}.part01.rar",
        f"{HASHED}.part02.rar",
        f"{HASHED}.nfo",
    ]
    # Named, of one poster, two files, none that tells more than headers: not worth inspecting.
    named_files = ["Show.Name.S01E02.720p.HDTV.x264-GRP.mkv", "Show.Name.S01E02.720p.HDTV.x264-GRP.srt"]
    store_groups(
        {
            "alt.binaries.misc": lines(HASHED, hashed_files, [b"a <a@x.example>"])
            + lines("Show.Name.S01E02.720p.HDTV.x264-GRP", named_files, [b"b <b@y.example>"], first=5)
        }
    )
    with session_scope() as s:
        _, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
    return client, {"Authorization": f"Bearer {token_a}"}, {"Authorization": f"Bearer {token_b}"}


def test_the_join_queues_posts_worth_inspecting_once(queued, clean_db):
    rows = query(
        clean_db,
        "SELECT p.name, i.reason, i.state FROM post_inspections i"
        " JOIN posts p ON p.group_id = i.group_id AND p.key = i.post_key",
    )
    assert [tuple(r) for r in rows] == [(HASHED, "hashed", "queued")]


def test_each_reason_queues_a_post_and_a_post_with_nothing_to_tell_is_not(client, clean_db):
    film = "Film.Name.2019.1080p.BluRay.x264-GRP"
    posts = {
        "hashed": lines(HASHED, [f"{HASHED}.mkv", f"{HASHED}.srt"], [b"a <a@x.example>"]),
        "misc": lines(
            "holiday pictures", ["holiday pictures.jpg", "holiday pictures 2.jpg"], [b"a <a@x.example>"], first=2
        ),
        "one_file": lines(film, [f"{film}.mkv"], [b"a <a@x.example>"], first=4),
        "contents": lines(
            "Other.Show.S02E03.1080p.WEB.h264-GRP",
            ["Other.Show.S02E03.1080p.WEB.h264-GRP.mkv", "Other.Show.S02E03.1080p.WEB.h264-GRP.nfo"],
            [b"a <a@x.example>"],
            first=5,
        ),
        None: lines(
            "Quiet.Show.S03E04.720p.HDTV.x264-GRP",
            ["Quiet.Show.S03E04.720p.HDTV.x264-GRP.mkv", "Quiet.Show.S03E04.720p.HDTV.x264-GRP.srt"],
            [b"a <a@x.example>"],
            first=7,
        ),
    }
    store_groups({"alt.binaries.misc": [line for post in posts.values() for line in post]})
    rows = query(
        clean_db,
        "SELECT p.names, i.reason FROM posts p LEFT JOIN post_inspections i"
        " ON i.group_id = p.group_id AND i.post_key = p.key",
    )
    assert sorted(map(str, (row.reason for row in rows))) == sorted(map(str, posts)), [tuple(r) for r in rows]
    assert [row.names for row in rows if row.reason is None] == ["Quiet.Show.S03E04.720p.HDTV.x264-GRP"]


def test_a_7z_lease_reads_the_last_article_of_its_last_volume_too(client, clean_db):
    """7-Zip's header is at the end of the archive: the lease names the first article of the
    first volume and the last article of the last one."""
    name = "Film.Name.2019.1080p.BluRay.x264-GRP"
    volumes = [f"{name}.7z.001", f"{name}.7z.002", f"{name}.7z.003"]
    store_groups(
        {
            "alt.binaries.misc": [
                overview_line(
                    BIG + 2 * v + p,
                    b'%s [%d/3] - "%s" yEnc (%d/2)' % (name.encode(), v + 1, f.encode(), p + 1),
                    b"a <a@x.example>",
                    b"<z%d.%d@example.net>" % (v, p),
                )
                for v, f in enumerate(volumes)
                for p in range(2)
            ]
        }
    )
    with session_scope() as s:
        _, token = make_node(s, "edge-a")
    answer = client.post(f"{API}/inspections/lease", headers={"Authorization": f"Bearer {token}"})
    (leased,) = answer.json["inspections"]
    assert [(f["name"], f["message_id"]) for f in leased["files"]] == [
        (f"{name}.7z.001", "<z0.0@example.net>"),
        (f"{name}.7z.003", "<z2.1@example.net>"),
    ]


def test_a_lease_of_a_post_whose_names_tell_nothing_reads_its_smallest_file(client, clean_db):
    """Of files whose names say nothing (obfuscated), the one with the smallest first article is
    read: each file's first article is looked up for it. In the same lease, a post whose names
    tell has only the files they name looked up."""
    hashed = "a91f0c2e9b7d4e1f6c3a"
    files = {f"{hashed}.bin": 5000, f"{hashed}.dat": 700, f"{hashed}.img": 3000}
    named = "Film.Name.2019.1080p.BluRay.x264-GRP"
    overview = [
        overview_line(
            BIG + 2 * index + part,
            b'%s [%d/3] - "%s" yEnc (%d/2)' % (hashed.encode(), index + 1, name.encode(), part + 1),
            b"a <a@x.example>",
            b"<o%d.%d@example.net>" % (index, part),
            size + part,
        )
        for index, (name, size) in enumerate(files.items())
        for part in range(2)
    ] + lines(named, [f"{named}.nfo", f"{named}.mkv", f"{named}.par2"], [b"b <b@y.example>"], first=6)
    store_groups({"alt.binaries.misc": overview})
    with session_scope() as s:
        _, token = make_node(s, "edge-a")
    answer = client.post(f"{API}/inspections/lease", json={"max": 5}, headers={"Authorization": f"Bearer {token}"})
    leases = {lease["name"]: lease for lease in answer.json["inspections"]}
    assert set(leases) == {hashed, named}, answer.json
    assert [(f["name"], f["message_id"], f["bytes"]) for f in leases[hashed]["files"]] == [
        (f"{hashed}.dat", "<o1.0@example.net>", 700)
    ]
    assert sorted(f["name"] for f in leases[named]["files"]) == [f"{named}.nfo", f"{named}.par2"]


def test_a_lease_carries_the_articles_to_read_and_a_result_is_stored_once(queued, clean_db):
    client, a, b = queued
    answer = client.post(f"{API}/inspections/lease", json={"max": 5}, headers=a)
    assert answer.status_code == 200, answer.json
    (leased,) = answer.json["inspections"]
    assert leased["name"] == HASHED and answer.json["max_bytes"] == inspections.MAX_BYTES
    names = [f["name"] for f in leased["files"]]
    # The par2 index, the nfo, the first volume; never the recovery volumes nor the second part.
    assert set(names) == {f"{HASHED}.par2", f"{HASHED}.nfo", f"{HASHED}.part01.rar"}
    assert all(f["message_id"].startswith("<i") and f["message_id"].endswith("@example.net>") for f in leased["files"])
    # Nothing more to lease, for anyone.
    assert client.post(f"{API}/inspections/lease", headers=b).status_code == 204
    result = {
        "name": "Hidden.Show.S05E06.1080p.WEB.h264-GRP",
        "password": 1,
        "flags": ["encrypted_headers"],
        "files": [{"name": "Hidden.Show.S05E06.1080p.WEB.h264-GRP.mkv", "size": 2**33, "source": "par2"}],
        "nfo": "Hidden Show\nhttps://www.imdb.com/title/tt0133093/",
        "imdb": 133093,
        "articles_read": 3,
        "articles_missing": 0,
        "bytes_read": 2000,
    }
    url = f"{API}/inspections/{leased['id']}/result"
    assert client.post(url, json=result, headers=b).status_code == 409  # not b's
    first = client.post(url, json=result, headers=a)
    assert (first.status_code, first.json["status"]) == (200, "stored")
    again = client.post(url, json=result, headers=a)
    assert (again.status_code, again.json["status"]) == (200, "already_stored")
    (row,) = query(clean_db, "SELECT state, password, flags, inner_name, files, nfo, imdb FROM post_inspections")
    assert (row.state, row.password, row.flags, row.inner_name, row.imdb) == (
        "done",
        1,
        "encrypted_headers",
        result["name"],
        133093,
    )
    assert row.files[0]["size"] == 2**33 and zlib.decompress(row.nfo).decode() == result["nfo"]
    # The post takes the name its files told, and its category by it; the posted name stays
    # searchable, and the row is what a join would sum.
    (post,) = query(clean_db, f"SELECT name, names, category, season, episode FROM posts WHERE names LIKE '{HASHED}%'")
    assert (post.name, post.category, post.season, post.episode) == (result["name"], 5010, 5, 6)
    with session_scope() as s:
        for words in ("hidden show s05e06", HASHED):
            assert [p.name for p in search.search_posts(s, words).items] == [result["name"]], words
    assert_posts_summed(clean_db)


def test_a_result_and_a_join_of_its_group_under_way_do_not_deadlock(queued, clean_db):
    """A join holds its group's lock and queues posts (this one again); a result recorded
    meanwhile waits for the lock before it takes the inspection's row, never the other way."""
    from app.services.ingest.posts import JOIN_LOCK

    client, a, _ = queued
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    group_id = scalar(clean_db, "SELECT group_id FROM post_inspections WHERE id = :i", i=leased["id"])
    answers = []
    with clean_db.connect() as join:
        transaction = join.begin()
        join.execute(text("SELECT pg_advisory_xact_lock(:lock, :g)"), {"lock": JOIN_LOCK, "g": group_id})
        poster = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    f"{API}/inspections/{leased['id']}/result",
                    json={"name": "Real.Name.2024.1080p.WEB.h264-GRP"},
                    headers=a,
                )
            )
        )
        poster.start()
        wait_until(
            lambda: (
                scalar(
                    clean_db,
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%pg_advisory_xact_lock%'",
                )
                == 1
            ),
            30,
            "the result waiting",
        )
        join.execute(inspections.queue_statement(group_id), {"g": group_id, "keys": [leased["post_key"]]})
        transaction.commit()
    poster.join(30)
    assert [answer.status_code for answer in answers] == [200]
    assert scalar(clean_db, "SELECT state FROM post_inspections WHERE id = :i", i=leased["id"]) == "done"


def store_range(group: str, more: list[bytes], first: int) -> None:
    """More overview lines of a group stored before (numbered from `first`), as a range of their
    own read later: one batch, stored and joined."""
    with session_scope() as s:
        found = s.scalars(select(Group).where(Group.name == group)).one()
        (planned,) = make_plan(s, found, [(first, first + len(more) - 1)])
        node, _ = make_node(s, f"reader-{first}")
        leases.lease(s, node, max_leases=1)
    gatherer = Gatherer(group)
    gatherer.add_chunk(first, first + len(more) - 1, [raw(more)])
    batch_id = accept(node, planned.id, gatherer.build())
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        assert posts.join_batch(s, batch_id) is not None


def test_a_post_is_read_once_it_settles_and_again_when_it_grows(client, clean_db):
    """A post still being posted is leased once the join has left it unchanged for the settle
    time; one read before is queued again when later batches bring it more files, MAX_ROUNDS
    times in all."""
    group = "alt.binaries.misc"
    names = [
        f"{HASHED}.part01.rar",
        f"{HASHED}.part02.rar",
        f"{HASHED}.nfo",
        f"{HASHED}.par2",
        f"{HASHED}.vol00+01.par2",
        f"{HASHED}.part03.rar",
        f"{HASHED}.part04.rar",
    ]
    posted = lines(HASHED, names, [b"a <a@x.example>"])

    def row():
        return query(clean_db, "SELECT state, rounds, attempts, files_seen, changed_at FROM post_inspections")[0]

    def settled() -> None:
        with clean_db.begin() as db:
            db.execute(text("UPDATE post_inspections SET changed_at = now() - interval '61 seconds'"))

    def read_and_record() -> list[str]:
        with session_scope() as s:
            node = s.scalars(select(SeedNode).where(SeedNode.name == "edge-a")).one()
            assert inspections.lease(s, node, 10, 900, settle=60) == []  # changed within the minute
        settled()
        with session_scope() as s:
            node = s.scalars(select(SeedNode).where(SeedNode.name == "edge-a")).one()
            (leased,) = inspections.lease(s, node, 10, 900, settle=60)
            assert inspections.record(s, node, leased.id, {"password": 0, "articles_read": 1})
        return sorted(f["name"] for f in leased.files)

    store_groups({group: posted[:2]})
    with session_scope() as s:
        make_node(s, "edge-a")
    first = row()
    assert (first.state, first.rounds, first.files_seen) == ("queued", 1, 2)
    store_range(group, posted[2:3], BIG + 2)  # still queued: noted changed, not queued again
    grown = row()
    assert (grown.state, grown.rounds, grown.files_seen) == ("queued", 1, 3) and grown.changed_at > first.changed_at
    assert read_and_record() == [f"{HASHED}.nfo", f"{HASHED}.part01.rar"]
    assert row().state == "done"

    store_range(group, posted[3:5], BIG + 3)  # its par2 set arrives: read again
    assert tuple(row())[:4] == ("queued", 2, 0, 5)
    assert read_and_record() == [f"{HASHED}.nfo", f"{HASHED}.par2", f"{HASHED}.part01.rar"]
    store_range(group, posted[5:6], BIG + 5)
    assert tuple(row())[:4] == ("queued", 3, 0, 6)
    read_and_record()
    store_range(group, posted[6:7], BIG + 6)  # MAX_ROUNDS read: it stays as it is
    assert tuple(row())[:4] == ("done", inspections.MAX_ROUNDS, 1, 6)
    assert_posts_summed(clean_db)


def test_an_expired_lease_goes_to_the_next_node_and_a_given_back_one_is_leased_again(queued, clean_db):
    client, a, b = queued
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    assert client.post(f"{API}/inspections/{leased['id']}/release", headers=b).status_code == 409
    assert client.post(f"{API}/inspections/{leased['id']}/release", headers=a).json["status"] == "queued"
    assert scalar(clean_db, "SELECT attempts FROM post_inspections") == 0
    (again,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    assert again["id"] == leased["id"]
    with session_scope() as s:
        s.execute(text("UPDATE post_inspections SET expires_at = now() - interval '1 second'"))
    (taken,) = client.post(f"{API}/inspections/lease", headers=b).json["inspections"]
    assert taken["id"] == leased["id"]
    # a's late result is refused: b holds it now.
    late = client.post(f"{API}/inspections/{leased['id']}/result", json={"password": 0}, headers=a)
    assert (late.status_code, late.json["error"]) == (409, "not_your_inspection")
    # Given up after MAX_ATTEMPTS expired leases.
    for _ in range(inspections.MAX_ATTEMPTS):
        with session_scope() as s:
            s.execute(text("UPDATE post_inspections SET expires_at = now() - interval '1 second'"))
        client.post(f"{API}/inspections/lease", headers=b)
    assert tuple(query(clean_db, "SELECT state, error FROM post_inspections")[0]) == (
        "failed",
        "its lease expired 3 times",
    )


@pytest.mark.parametrize(
    "result, why",
    [
        ([], "object"),
        ({"password": 3}, "password"),
        ({"password": True}, "password"),
        ({"flags": ["rm -rf"]}, "flags"),
        ({"files": [{"size": 1}]}, "name"),
        ({"files": [{"name": "x" * 2000}]}, "file's name"),
        ({"files": [{"name": "a"}] * (inspections.MAX_RESULT_FILES + 1)}, "files"),
        ({"files": [{"name": "a", "size": -1}]}, "size"),
        ({"nfo": "x" * (inspections.MAX_NFO + 1)}, "nfo"),
        ({"imdb": 0}, "imdb"),
        ({"imdb": 2**40}, "imdb"),
        ({"bytes_read": "many"}, "bytes_read"),
        ({"read": [{"size": 1}]}, "hash16k"),
        ({"read": [{"size": 1, "hash16k": "zz"}]}, "hash16k"),
        ({"read": [{"hash16k": "0" * 32}]}, "size"),
        ({"read": [{"size": 1, "hash16k": "0" * 32}] * (inspections.MAX_READ + 1)}, "read"),
        ({"files": [{"name": "a", "hash16k": "x" * 32}]}, "hash16k"),
    ],
)
def test_bad_results_get_400_and_change_nothing(queued, clean_db, result, why):
    client, a, _ = queued
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    answer = client.post(f"{API}/inspections/{leased['id']}/result", json=result, headers=a)
    assert answer.status_code == 400 and why in answer.json["message"], answer.json
    assert scalar(clean_db, "SELECT state FROM post_inspections") == "leased"


def test_bad_requests_get_clear_errors(queued, clean_db):
    client, a, _ = queued
    assert client.post(f"{API}/inspections/lease", json={"max": 0}, headers=a).status_code == 400
    assert client.post(f"{API}/inspections/lease", json={"max": "all"}, headers=a).status_code == 400
    assert client.post(f"{API}/inspections/lease").status_code == 401
    assert client.post(f"{API}/inspections/{2**64}/result", json={}, headers=a).status_code == 404
    assert client.post(f"{API}/inspections/99/release", headers=a).json["error"] == "unknown_inspection"
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    url = f"{API}/inspections/{leased['id']}/result"
    assert client.post(url, data=b"{not json", headers={**a, "Content-Type": "application/json"}).status_code == 400
    assert client.post(url, data=b"password=0", headers=a).status_code == 400  # not said to be JSON
    huge = b'{"nfo": "' + b"x" * (5 * 1024 * 1024) + b'"}'
    assert client.post(url, data=huge, headers={**a, "Content-Type": "application/json"}).status_code == 400
    assert scalar(clean_db, "SELECT state FROM post_inspections") == "leased"


def several_queued(client, count: int) -> tuple[dict[str, str], dict[str, str], list[dict]]:
    """`count` hashed posts queued and leased to node a (b is another node)."""
    hashes = [hashlib.md5(f"post {n}".encode()).hexdigest() for n in range(count)]
    store_groups(
        {
            "alt.binaries.misc": [
                line
                for n, h in enumerate(hashes)
                for line in lines(h, [f"{h}.par2", f"{h}.part01.rar", f"{h}.nfo"], [b"a <a@x.example>"], first=3 * n)
            ]
        }
    )
    with session_scope() as s:
        _, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
    a, b = {"Authorization": f"Bearer {token_a}"}, {"Authorization": f"Bearer {token_b}"}
    leased = client.post(f"{API}/inspections/lease", json={"max": count}, headers=a).json["inspections"]
    assert len(leased) == count
    return a, b, leased


def told(n: int) -> dict:
    return {
        "name": f"Told.Show.S01E{n:02d}.1080p.WEB.h264-GRP",
        "password": 0,
        "imdb": 1000 + n,
        "articles_read": 3,
        "bytes_read": 3000,
    }


def test_results_posted_together_are_each_answered_and_stored_once(client, clean_db):
    a, b, leased = several_queued(client, 3)
    first, second, third = (entry["id"] for entry in leased)
    body = {
        "results": [
            {"id": first, "result": told(1)},
            {"id": second, "result": {"password": 7}},
            {"id": third, "result": told(3)},
            {"id": first, "result": told(1)},
            {"id": 2**40, "result": told(4)},
        ]
    }
    answer = client.post(f"{API}/inspections/results", json=body, headers=a)
    assert answer.status_code == 200, answer.json
    assert [(r["id"], r["status"]) for r in answer.json["results"]] == [
        (first, "stored"),
        (second, "malformed_result"),
        (third, "stored"),
        (first, "already_stored"),
        (2**40, "unknown_inspection"),
    ]
    assert "password" in answer.json["results"][1]["message"]
    # The one refused is still a's to post; b's result for it is not taken.
    again = client.post(
        f"{API}/inspections/results", json={"results": [{"id": second, "result": told(2)}]}, headers=b
    ).json["results"]
    assert [r["status"] for r in again] == ["not_your_inspection"]
    rows = query(
        clean_db,
        "SELECT i.id, i.state, p.name, p.imdb FROM post_inspections i"
        " JOIN posts p ON p.group_id = i.group_id AND p.key = i.post_key ORDER BY i.id",
    )
    assert {r.id: (r.state, r.name, r.imdb) for r in rows} == {
        first: ("done", told(1)["name"], 1001),
        third: ("done", told(3)["name"], 1003),
        second: ("leased", rows[[r.id for r in rows].index(second)].name, None),
    }
    assert_posts_summed(clean_db)


def test_results_postgresql_refuses_together_are_stored_one_by_one(client, clean_db):
    """What PostgreSQL refuses of one result (here a trigger of the test's refuses one name) is
    answered so; the others of its call are stored."""
    a, _, leased = several_queued(client, 3)
    with clean_db.begin() as db:
        db.execute(
            text("""
            CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.inner_name = 'Refused.By.The.Database' THEN RAISE EXCEPTION 'refused by the test'; END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER refuse_one BEFORE UPDATE ON post_inspections FOR EACH ROW EXECUTE FUNCTION refuse_one();
        """)
        )
    try:
        results = [told(1), {**told(2), "name": "Refused.By.The.Database"}, told(3)]
        answer = client.post(
            f"{API}/inspections/results",
            headers=a,
            json={"results": [{"id": entry["id"], "result": result} for entry, result in zip(leased, results)]},
        )
        assert answer.status_code == 200, answer.json
        assert [r["status"] for r in answer.json["results"]] == ["stored", "refused", "stored"]
        assert "refused by the test" in answer.json["results"][1]["message"]
        states = dict(query(clean_db, "SELECT id, state FROM post_inspections"))
        assert [states[entry["id"]] for entry in leased] == ["done", "leased", "done"]
    finally:
        with clean_db.begin() as db:
            db.execute(text("DROP TRIGGER refuse_one ON post_inspections; DROP FUNCTION refuse_one()"))
    assert_posts_summed(clean_db)


@pytest.mark.parametrize(
    "body, why",
    [
        (b'{"results": {}}', "results must be a list"),
        (b'{"results": []}', "results must be a list"),
        (b'{"results": [' + b",".join([b'{"id": 1, "result": {}}'] * 101) + b"]}", "results must be a list"),
        (b'{"results": [{"id": "1", "result": {}}]}', "each of results"),
        (b'{"results": [{"id": 0, "result": {}}]}', "each of results"),
        (b'{"results": [{"id": 9223372036854775808, "result": {}}]}', "each of results"),
        (b'{"results": [7]}', "each of results"),
        (b'{"results": [{"id": 1, "result": {"nfo": "' + b"x" * (5 * 1024 * 1024) + b'"}}]}', "body over"),
        (b"{not json", "not JSON"),
    ],
)
def test_bad_calls_of_results_get_400_and_change_nothing(client, clean_db, body, why):
    a, _, leased = several_queued(client, 1)
    answer = client.post(f"{API}/inspections/results", data=body, headers={**a, "Content-Type": "application/json"})
    assert answer.status_code == 400 and why in answer.json["message"], answer.json
    assert client.post(f"{API}/inspections/results", data=b"results=1", headers=a).status_code == 400
    assert client.post(f"{API}/inspections/results", json={"results": []}).status_code == 401
    assert scalar(clean_db, "SELECT state FROM post_inspections") == "leased"


def test_what_an_inspection_found_is_served_by_the_newznab_api(queued, clean_db):
    import xml.etree.ElementTree as ET

    from app.services import apikeys

    client, a, _ = queued
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    nfo = "Film Title (1999)\r\nhttps://www.imdb.com/title/tt0133093/\r\n\x1b[0m <ok> & done"
    result = {
        "name": "Film.Title.1999.1080p.BluRay.x264-GRP",
        "password": 2,
        "nfo": nfo,
        "imdb": 133093,
        "files": [
            {"name": "Film.Title.1999.1080p.BluRay.x264-GRP.mkv", "size": 2**33, "source": "rar5"},
            {"name": "Extras & <more>.rar", "size": 5, "source": "rar5"},
        ],
    }
    assert client.post(f"{API}/inspections/{leased['id']}/result", json=result, headers=a).status_code == 200
    with session_scope() as s:
        _, key = apikeys.create_key(s, "radarr")
    newznab = "{http://www.newznab.com/DTD/2010/feeds/attributes/}"

    def ask(**params):
        response = client.get("/api", query_string={"apikey": key, **params})
        assert response.status_code == 200, response.data[:300]
        return response

    found = ET.fromstring(ask(t="movie", imdbid="tt0133093", extended="1").data)
    (item,) = found.findall("channel/item")
    attrs = {a.get("name"): a.get("value") for a in item.iter(f"{newznab}attr")}
    assert item.find("title").text == result["name"]
    assert (attrs["password"], attrs["imdb"]) == ("2", "0133093")
    assert [a.get("value") for a in item.iter(f"{newznab}attr") if a.get("name") == "category"] == ["2000", "2040"]
    assert ET.fromstring(ask(t="movie", imdbid="0133093").data).find("channel/item") is not None
    # An id no post has: an empty page (a client then searches by name); of a kind never kept: 203.
    for params in ({"imdbid": "tt0000001"}, {"tmdbid": "603"}):
        empty = ET.fromstring(ask(t="movie", **params).data)
        assert empty.tag == "rss" and empty.find("channel/item") is None, params
    for params in ({"traktid": "5"}, {"rid": "7"}):
        assert ET.fromstring(ask(t="movie", **params).data).get("code") == "203", params
    assert ET.fromstring(ask(t="movie", imdbid="ttx").data).get("code") == "201"
    post_id = item.find("guid").text.rsplit("=", 1)[1]
    text_item = ET.fromstring(ask(t="getnfo", id=post_id).data).find("channel/item")
    assert text_item.find("description").text == nfo.replace("\x1b", "")
    raw = ask(t="getnfo", id=post_id, o="file")
    assert raw.mimetype == "text/plain" and raw.get_data(as_text=True) == nfo
    assert raw.headers["Content-Disposition"].startswith(
        'attachment; filename="Film.Title.1999.1080p.BluRay.x264-GRP.nfo"'
    )
    other = query(clean_db, "SELECT key FROM posts WHERE key <> :k", k=leased["post_key"])[0].key
    assert ET.fromstring(ask(t="getnfo", id=str(other)).data).get("code") == "300"
    # t=details lists the files inside and says there is an NFO; a post never inspected says neither.
    (detailed,) = ET.fromstring(ask(t="details", id=post_id).data).findall("channel/item")
    attrs_list = [(a.get("name"), a.get("value")) for a in detailed.iter(f"{newznab}attr")]
    assert ("nfo", "1") in attrs_list
    assert [v for n, v in attrs_list if n == "file"] == [f["name"] for f in result["files"]]
    assert detailed.find("description").text.splitlines()[1:] == [
        "Film.Title.1999.1080p.BluRay.x264-GRP.mkv (8,589,934,592 bytes)",
        "Extras & <more>.rar (5 bytes)",
    ]
    (plain,) = ET.fromstring(ask(t="details", id=str(other)).data).findall("channel/item")
    assert not [a for a in plain.iter(f"{newznab}attr") if a.get("name") in ("nfo", "file")]
    # The web page says it too.
    from tests.app.test_web import log_in

    assert log_in(client, key).status_code == 303
    html = client.get("/search", query_string={"q": "film title"}).get_data(as_text=True)
    assert '<div class="password">an archive inside</div>' in html and '<span class="imdb">tt0133093</span>' in html
    assert ET.fromstring(ask(t="search", o="file").data).get("code") == "201"


def test_an_id_an_nfo_gave_finds_the_posts_of_the_same_title_and_year_too(client, clean_db):
    """One post's NFO names the film's IMDb id; its other releases (no NFO) are found by the id
    too, by their parsed title and year; another film of that title (another year) is not."""
    film = "Film.Title.1999.720p.WEB.x264-OTHER"
    remake = "Film.Title.2005.1080p.BluRay.x264-GRP"
    store_groups(
        {
            "alt.binaries.misc": lines(HASHED, [f"{HASHED}.part01.rar", f"{HASHED}.nfo"], [b"a <a@x.example>"])
            + lines(film, [f"{film}.mkv", f"{film}.srt"], [b"b <b@y.example>"], first=2)
            + lines(remake, [f"{remake}.mkv", f"{remake}.srt"], [b"c <c@z.example>"], first=4)
        }
    )
    with session_scope() as s:
        _, token = make_node(s, "edge-a")
        _, key = apikeys.create_key(s, "radarr")
    a = {"Authorization": f"Bearer {token}"}
    (leased,) = client.post(f"{API}/inspections/lease", json={"max": 5}, headers=a).json["inspections"]
    assert leased["name"] == HASHED
    told = {"name": "Film.Title.1999.1080p.BluRay.x264-GRP", "imdb": 133093}
    assert client.post(f"{API}/inspections/{leased['id']}/result", json=told, headers=a).status_code == 200

    def titles(**params) -> list[str]:
        answer = ET.fromstring(client.get("/api", query_string={"apikey": key, **params}).data)
        return sorted(item.find("title").text for item in answer.findall("channel/item"))

    assert titles(t="movie", imdbid="0133093") == sorted([told["name"], film])
    assert titles(t="movie", imdbid="tt0133093", tmdbid="603") == sorted([told["name"], film])  # any id given
    assert titles(t="movie", q="film title") == sorted([told["name"], film, remake])


@pytest.mark.parametrize(
    "rules, result, dropped_by",
    [
        ([], {"flags": ["executable"]}, "inspected-executable"),
        ([], {"password": 1}, None),
        ([("passworded", "^password$", "drop")], {"password": 1}, "passworded"),
        ([("exe-ok", "executable", "keep")], {"flags": ["executable"], "password": 1}, None),
        ([("no-pw-sites", "password_url", "drop")], {"flags": ["password_url", "executable"]}, "no-pw-sites"),
    ],
)
def test_flags_drop_or_keep_a_post_by_the_rules_and_are_counted(queued, clean_db, rules, result, dropped_by):
    from app.services import rules as rule_service

    client, a, _ = queued
    with session_scope() as s:
        for name, pattern, action in rules:
            rule_service.add_rule(s, {"name": name, "field": "flag", "pattern": pattern, "action": action})
        # Flag rules are the data center's: never handed to nodes with a lease.
        assert rule_service.active_rules(s, "alt.binaries.misc") == []
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    assert client.post(f"{API}/inspections/{leased['id']}/result", json=result, headers=a).status_code == 200
    assert scalar(clean_db, "SELECT dropped_by FROM post_inspections") == dropped_by
    hashed_posts = scalar(clean_db, f"SELECT count(*) FROM posts WHERE names LIKE '{HASHED}%'")
    assert hashed_posts == (0 if dropped_by else 1)
    assert_posts_summed(clean_db)


def test_a_flag_rule_is_checked_like_any_rule(clean_db):
    from app.services import rules as rule_service
    from app.services.errors import ServiceError

    with session_scope() as s:
        for data in (
            {"name": "bad", "field": "flag", "pattern": "("},
            {"name": "inspected-executable", "field": "flag", "pattern": "x"},
            {"name": "bad", "field": "flag", "pattern": "x", "action": "maybe"},
        ):
            with pytest.raises(ServiceError):
                rule_service.add_rule(s, data)


def test_releases_show_tells_what_was_inspected(queued, clean_db, cli_runner):
    import json

    client, a, _ = queued
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    result = {
        "name": "Film.Title.1999.1080p.BluRay.x264-GRP",
        "password": 1,
        "flags": ["encrypted_headers"],
        "files": [{"name": "Film.Title.1999.1080p.BluRay.x264-GRP.mkv", "size": 8_000_000_000, "source": "rar"}],
        "nfo": "the film",
        "imdb": 133093,
    }
    assert client.post(f"{API}/inspections/{leased['id']}/result", json=result, headers=a).status_code == 200
    shown = cli_runner.invoke(args=["seed", "releases", "show", str(leased["post_key"])])
    assert shown.exit_code == 0, shown.output
    for text_shown in (
        "inspected done, queued as hashed, passworded, flagged encrypted_headers",
        "told      Film.Title.1999.1080p.BluRay.x264-GRP",
        "ids       imdb 133093",
        "Film.Title.1999.1080p.BluRay.x264-GRP.mkv",
    ):
        assert text_shown in shown.output
    as_json = json.loads(cli_runner.invoke(args=["seed", "releases", "show", str(leased["post_key"]), "--json"]).output)
    assert as_json["inspection"]["files"] == result["files"] and as_json["inspection"]["nfo"] == "the film"


def test_rules_list_counts_the_posts_each_flag_rule_dropped(queued, clean_db, cli_runner):
    import json

    client, a, _ = queued
    added = cli_runner.invoke(args=["seed", "rules", "add", "no-pw", "--field", "flag", "--pattern", "^password$"])
    assert added.exit_code == 0, added.output
    (leased,) = client.post(f"{API}/inspections/lease", headers=a).json["inspections"]
    assert client.post(f"{API}/inspections/{leased['id']}/result", json={"password": 1}, headers=a).status_code == 200
    listed = json.loads(cli_runner.invoke(args=["seed", "rules", "list", "--json"]).output)
    assert [(r["name"], r["posts_dropped"]) for r in listed] == [("no-pw", 1), ("inspected-executable", 0)]


def test_an_obfuscated_posts_files_join_the_post_of_the_par2_set_that_lists_them(client, clean_db):
    """Every file with a random subject and a random poster: three posts, until their inspections
    tie them by the MD5 of each file's first 16 KiB and its size to the par2 set listing them;
    whichever comes first, they end as one post under the real name (the one the par2 set's files
    share), and stay one."""
    from app.services.ingest import posts as post_service

    names = ["3f9a1c0e5b7d2a4f6c8e0a1b3d5f7a9c", "8b2e4d6f0a1c3e5a7b9d1f3a5c7e9b0d", "c5e7a9b1d3f5a7c9e1b3d5f7a9c1e3b5"]
    group = "alt.binaries.misc"
    lines_by = []
    for index, name in enumerate(names):
        lines_by += lines(name, [f"{name}.bin"], [b"x%d <x%d@r%d.example>" % (index, index, index)], first=index)
    store_groups({group: lines_by})
    with session_scope() as s:
        _, token = make_node(s, "edge-a")
    a = {"Authorization": f"Bearer {token}"}
    leased = {
        i["name"]: i for i in client.post(f"{API}/inspections/lease", json={"max": 10}, headers=a).json["inspections"]
    }
    assert set(leased) == set(names)
    h = ["%032x" % (n * 7919) for n in (1, 2)]
    real = "Real.Name.2024.1080p.WEB.h264-GRP"
    results = [
        (names[1], {"read": [{"name": "v1", "size": 700_000, "hash16k": h[0]}]}),
        # No .nfo: the post is named by the files its par2 set lists.
        (
            names[0],
            {
                "files": [
                    {"name": f"{real}.part1.rar", "size": 700_000, "source": "par2", "hash16k": h[0]},
                    {"name": f"{real}.part2.rar", "size": 650_000, "source": "par2", "hash16k": h[1]},
                ]
            },
        ),
        (names[2], {"read": [{"name": "v2", "size": 650_000, "hash16k": h[1]}]}),
    ]
    for name, result in results:
        answer = client.post(f"{API}/inspections/{leased[name]['id']}/result", json=result, headers=a)
        assert answer.status_code == 200, answer.json
    (post,) = query(clean_db, "SELECT key, name, releases FROM posts")
    assert (post.name, post.releases, post.key) == (real, 3, leased[names[0]]["post_key"])
    with session_scope() as s:
        assert [p.name for p in search.search_posts(s, "real name 2024").items] == [real]
    assert_posts_summed(clean_db)
    # A later batch with more of a joined file: the join of its name keeps it in the par2 set's post.
    group_id = scalar(clean_db, "SELECT id FROM groups WHERE name = :n", n=group)
    with session_scope() as s:
        post_service.join_posts(s, group_id, [leased[names[2]]["post_key"], leased[names[1]]["post_key"]])
    assert [tuple(r) for r in query(clean_db, "SELECT name, releases FROM posts")] == [(real, 3)]
    assert_posts_summed(clean_db)


@pytest.mark.parametrize("pins_written", ["the later pin first", "the earlier pin first"])
def test_a_chain_of_pins_keeps_every_release_in_the_post_at_its_end(clean_db, pins_written):
    """Three obfuscated posts A < B < C (by key). A's par2 set listed a file B read: B was pinned to
    A and moved into its post. Then C's par2 set and B's listed one file: C was pinned to B, the
    least key listing it, and moved into B's post, which is A's. A later join of B and C (more of
    their files) keeps both in A's post, whichever pin PostgreSQL reads first."""
    names = ["1f9a1c0e5b7d2a4f6c8e0a1b3d5f7a9c", "7b2e4d6f0a1c3e5a7b9d1f3a5c7e9b0d", "e5e7a9b1d3f5a7c9e1b3d5f7a9c1e3b5"]
    group = "alt.binaries.misc"
    lines_by = []
    for index, name in enumerate(names):
        lines_by += lines(name, [f"{name}.bin"], [b"x%d <x%d@r%d.example>" % (index, index, index)], first=index)
    group_id = store_groups({group: lines_by})[group]
    a, b, c = sorted(key for (key,) in query(clean_db, "SELECT key FROM releases"))
    pins = [(c, b), (b, a)] if pins_written == "the later pin first" else [(b, a), (c, b)]
    with clean_db.begin() as conn:
        for release, anchor in pins:
            conn.execute(
                text("INSERT INTO inspection_joins (group_id, release_key, anchor) VALUES (:g, :r, :a)"),
                {"g": group_id, "r": release, "a": anchor},
            )
        conn.execute(
            text("INSERT INTO release_posts (group_id, key, post_key) VALUES (:g, :b, :a), (:g, :c, :a)"),
            {"g": group_id, "a": a, "b": b, "c": c},
        )
    with session_scope() as s:  # the posts' rows as the inspections' results left them
        posts.refresh_posts_of(s, group_id, group, [a, b, c])
    assert query(clean_db, "SELECT key, releases FROM posts") == [(a, 3)]
    with session_scope() as s:
        posts.join_posts(s, group_id, [b, c])
    assert query(clean_db, "SELECT key, post_key FROM release_posts ORDER BY key") == sorted([(b, a), (c, a)])
    assert query(clean_db, "SELECT key, releases FROM posts") == [(a, 3)]
    assert_posts_summed(clean_db)


def test_metrics_tell_the_inspections_waiting_and_under_way(queued, clean_db):
    from app.services import operators
    from tests.app.test_metrics import sample, scrape

    client, a, _ = queued
    with session_scope() as s:
        _, key = operators.create_key(s, "ops")
    assert (
        sample(scrape(client, key), "seed_inspections", state="queued"),
        sample(scrape(client, key), "seed_inspections", state="leased"),
    ) == (1, 0)
    client.post(f"{API}/inspections/lease", headers=a)
    samples = scrape(client, key)
    assert (
        sample(samples, "seed_inspections", state="queued"),
        sample(samples, "seed_inspections", state="leased"),
    ) == (0, 1)
