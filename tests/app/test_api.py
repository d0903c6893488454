"""The node API with the real database: tokens, the node guard, bodies, and what refusals leave."""

from __future__ import annotations

import dataclasses
import gzip
import json

import msgpack
import pytest
from sqlalchemy import text

from app.db import session_scope
from app.services.nodes import set_enabled
from app.services.spool import store_chunk
from tests.app.factories import BIG, make_group, make_node, make_plan
from tests.app.overview import encoded, make_batch, overview_lines, raw

API = "/api/v1/seed"


@pytest.fixture
def seeded(client):
    """Two nodes, one group, a plan of two ranges past 2^32."""
    with session_scope() as s:
        group = make_group(s)
        _, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
        ranges = make_plan(s, group, [(BIG + 1000, BIG + 1999), (BIG, BIG + 999)])
        ids = [r.id for r in ranges]
    return {"a": {"Authorization": f"Bearer {token_a}"}, "b": {"Authorization": f"Bearer {token_b}"}, "ranges": ids}


def snapshot(engine) -> tuple:
    """What a refused request must leave alone: the accepted batches and the ranges. (A worker
    from another test may be storing an accepted batch meanwhile, so catalog counts would move
    for reasons of their own; only accepted batches ever reach the catalog.)"""
    with engine.connect() as conn:
        return (
            tuple(conn.execute(text("SELECT id, range_id, batch_from, batch_to FROM seed_batches ORDER BY id")).all()),
            tuple(conn.execute(text("SELECT id, next_id, status, node_id FROM seed_ranges ORDER BY id")).all()),
        )


def post_batch(client, auth, range_id, batch, fmt="msgpack", gzip_body=True):
    body, headers = encoded(batch, fmt=fmt, gzip=gzip_body)
    return client.post(f"{API}/ranges/{range_id}/batches", data=body, headers={**auth, **headers})


def test_tokens_are_checked(client, seeded):
    assert client.post(f"{API}/lease").status_code == 401
    bad = client.post(f"{API}/lease", headers={"Authorization": "Bearer seed_not-a-token"})
    assert bad.status_code == 401 and bad.get_json()["error"] == "unauthorized"
    assert client.post(f"{API}/lease", headers={"Authorization": "Basic abc"}).status_code == 401
    with session_scope() as s:
        set_enabled(s, "edge-b", False)
    assert client.post(f"{API}/lease", headers=seeded["b"]).status_code == 401
    assert client.post(f"{API}/lease", headers=seeded["a"]).status_code == 200


def test_lease_gives_each_node_its_own_range_then_204(client, seeded):
    first = client.post(f"{API}/lease", headers=seeded["a"]).get_json()
    second = client.post(f"{API}/lease", headers=seeded["b"]).get_json()
    assert first["range"]["id"] == seeded["ranges"][0] and second["range"]["id"] == seeded["ranges"][1]
    assert first["range"]["next_id"] == BIG + 1000 and first["chunk_size"] == 20_000
    assert first["batch_chunks"] == 10 and first["rules"] == []
    assert client.post(f"{API}/lease", headers=seeded["a"]).status_code == 204


def test_a_lease_hands_out_the_enabled_header_rules_of_its_group_in_order(client, seeded):
    """A lease's rules: the enabled header rules whose groups match the range's group, or that have
    none, in the order they were added, as the node's digest reads them; not the disabled ones, nor
    the flag rules (the data center applies those to inspections). The data center's own fetch
    reads the same (active_rules)."""
    from app.services import rules as rule_service

    with session_scope() as s:
        for data in (
            {"name": "spam-posters", "field": "poster", "pattern": "spam@"},
            {"name": "other-groups", "field": "subject", "pattern": "x", "groups": "alt.other.*"},
            {"name": "switched-off", "field": "subject", "pattern": "y"},
            {
                "name": "keep-this-group",
                "field": "subject",
                "pattern": "z",
                "action": "keep",
                "groups": "alt.binaries.*",
            },
            {"name": "no-passwords", "field": "flag", "pattern": "password"},
        ):
            rule_service.add_rule(s, data)
        rule_service.set_enabled(s, "switched-off", False)
    spam = {"name": "spam-posters", "field": "poster", "pattern": "spam@", "action": "drop"}
    keep = {"name": "keep-this-group", "field": "subject", "pattern": "z", "action": "keep", "groups": "alt.binaries.*"}
    other = {"name": "other-groups", "field": "subject", "pattern": "x", "action": "drop", "groups": "alt.other.*"}
    lease = client.post(f"{API}/lease", headers=seeded["a"]).get_json()
    assert lease["range"]["group"] == "alt.binaries.test" and lease["rules"] == [spam, keep]
    with session_scope() as s:
        assert rule_service.active_rules(s, "alt.binaries.test") == [spam, keep]
        assert rule_service.active_rules(s, "alt.other.group") == [spam, other]


def test_batches_accepted_once_and_the_guard_holds(client, seeded, clean_db):
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    batch = make_batch(BIG + 1000, BIG + 1499)
    accepted = post_batch(client, seeded["a"], range_id, batch)
    assert accepted.status_code == 202, accepted.get_json()
    assert accepted.get_json()["next_id"] == BIG + 1500
    again = post_batch(client, seeded["a"], range_id, batch, fmt="json")
    assert again.status_code == 200 and again.get_json()["status"] == "already_accepted"
    before = snapshot(clean_db)
    foreign = post_batch(client, seeded["b"], range_id, make_batch(BIG + 1500, BIG + 1999))
    assert foreign.status_code == 409 and foreign.get_json()["error"] == "not_your_lease"
    gap = post_batch(client, seeded["a"], range_id, make_batch(BIG + 1600, BIG + 1999))
    assert gap.status_code == 409 and gap.get_json()["error"] == "out_of_order"
    outside = post_batch(client, seeded["a"], range_id, make_batch(BIG + 1500, BIG + 2100))
    assert outside.status_code == 422
    foreign_group = post_batch(
        client, seeded["a"], range_id, make_batch(BIG + 1500, BIG + 1999, group="alt.binaries.other")
    )
    assert foreign_group.status_code == 422 and "another group" in foreign_group.get_json()["message"]
    early = client.post(f"{API}/ranges/{range_id}/done", headers=seeded["a"])
    assert early.status_code == 409 and early.get_json()["error"] == "batches_missing"
    assert snapshot(clean_db) == before
    assert (
        post_batch(
            client, seeded["a"], range_id, make_batch(BIG + 1500, BIG + 1999), fmt="json", gzip_body=False
        ).status_code
        == 202
    )
    assert client.post(f"{API}/ranges/{range_id}/done", headers=seeded["a"]).status_code == 200


@pytest.mark.parametrize(
    "body, headers",
    [
        (b"\x00garbage", {"Content-Type": "application/msgpack"}),
        (b"not gzip", {"Content-Type": "application/msgpack", "Content-Encoding": "gzip"}),
        (b'{"first": 1', {"Content-Type": "application/json"}),
        (msgpack.packb({"first": 1, "last": 2}), {"Content-Type": "application/msgpack"}),
        (b"[]", {"Content-Type": "application/json"}),
        (b"{}", {"Content-Type": "text/plain"}),
    ],
)
def test_malformed_bodies_get_400_and_change_nothing(client, seeded, clean_db, body, headers):
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    before = snapshot(clean_db)
    response = client.post(f"{API}/ranges/{range_id}/batches", data=body, headers={**seeded["a"], **headers})
    assert response.status_code in (400, 415), response.get_json()
    assert response.get_json()["error"]
    assert snapshot(clean_db) == before


_DEEP_BOTH = [
    (lambda b: b["fragments"]["article"].__setitem__(7, "seven"), "fragments.article"),
    (lambda b: b["fragments"]["article"].__setitem__(3, 2**63), "64 bits"),
    (lambda b: b["fragments"]["part"].__setitem__(3, 2**31), "past 32 bits"),
    (lambda b: b["fragments"]["bytes"].__setitem__(3, None), "fragments.bytes"),
    # The catalog keeps no key on the fragments: an article listed twice is refused at the door.
    (lambda b: b["fragments"]["article"].__setitem__(4, b["fragments"]["article"][3]), "an article twice"),
    (lambda b: b["fragments"]["article"].__setitem__(1, b["fragments"]["article"][-1]), "an article twice"),
    (lambda b: b["fragments"]["message_id"].__setitem__(5, 12), "message_id"),
    (lambda b: b["fragments"].__setitem__("extra", [1] * len(b["fragments"]["file"])), "fragments"),
    (lambda b: b["fragments"].pop("part"), "fragments"),
    # PostgreSQL's text holds no NUL: refused at the door, not left to fail the store.
    (lambda b: b["fragments"]["message_id"].__setitem__(5, "<a\x00b@x>"), "NUL"),
    (lambda b: b["files"]["subject"].__setitem__(0, "a\x00b"), "NUL"),
    (lambda b: b["releases"]["name"].__setitem__(0, "\x00"), "NUL"),
    (lambda b: b["rules"].__setitem__("a\x00b", [0, 0, 0, 0]), "rule names"),
    # Dates past what a timestamptz holds.
    (lambda b: b["files"]["date"].__setitem__(0, -(10**12)), "date"),
    (lambda b: b["release_chunks"]["last_date"].__setitem__(0, 10**13), "date"),
    # Tables that are not one batch's catalog: rows no release or file would count.
    (lambda b: b["files"]["release"].__setitem__(0, 2**62 + 5), "a file's release is not among"),
    (lambda b: b["release_chunks"]["release"].__setitem__(0, 2**62 + 5), "one row for each of the batch's releases"),
    (lambda b: [b["release_chunks"][c].pop() for c in list(b["release_chunks"])], "one row for each"),
    (lambda b: b["fragments"]["file"].__setitem__(3, 2**62 + 5), "a fragment's file is not among"),
    # What the node read of the releases' names (release_names) holds only what a post's row can.
    (lambda b: b["release_names"].pop("title"), "release_names must be a map"),
    (lambda b: b["release_names"].__setitem__("version", 1), "release_names.version"),
    # (msgpack: refused as it is decoded, past the releases' count; JSON: by the check)
    (lambda b: b["release_names"]["category"].append(5030), "release_names"),
    (lambda b: b["release_names"]["category"].pop(), "one value a release"),
    (lambda b: b["release_names"]["category"].__setitem__(0, 1234), "not a category"),
    (lambda b: b["release_names"]["category"].__setitem__(0, "5030"), "release_names.category must hold integers"),
    (lambda b: b["release_names"]["year"].__setitem__(0, 2**40), "past 0 .. 32767"),
    (lambda b: b["release_names"]["season"].__setitem__(0, -1), "past 0 .. 32767"),
    (lambda b: b["release_names"]["title"].__setitem__(0, "a\x00b"), "release_names.title"),
    (lambda b: b["release_names"]["title"].__setitem__(0, "x" * 201), "release_names.title"),
    (lambda b: b["release_names"]["title"].__setitem__(0, ""), "release_names.title"),
    (lambda b: b["release_names"]["air_date"].__setitem__(0, "2024-02-30"), "release_names.air_date"),
    (lambda b: b["release_names"]["air_date"].__setitem__(0, "20240201"), "release_names.air_date"),
    (
        lambda b: (
            b["release_names"]["category"].__setitem__(0, None),
            b["release_names"]["title"].__setitem__(0, "T"),
        ),
        "null where category is",
    ),
]
_DEEP_CASES = (
    [("json", *case) for case in _DEEP_BOTH]
    + [("msgpack", *case) for case in _DEEP_BOTH]
    + [
        # msgpack text arrives as UTF-8 bytes: a character cut between two values is no string.
        ("msgpack", lambda b: b["fragments"]["message_id"].__setitem__(slice(5, 7), [b"<a\xc3", b"\xa9b>"]), "utf-8"),
    ]
)


@pytest.mark.parametrize("fmt, spoil, message", _DEEP_CASES)
def test_a_wrong_value_deep_in_a_batch_is_refused(client, seeded, clean_db, store_parts, fmt, spoil, message):
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    batch = make_batch(BIG + 1000, BIG + 1499)
    spoil(batch)
    before = snapshot(clean_db)
    response = post_batch(client, seeded["a"], range_id, batch, fmt=fmt)
    assert response.status_code == 400 and message in response.get_json()["message"], response.get_json()
    assert snapshot(clean_db) == before


def test_a_lone_surrogate_in_json_text_is_refused(client, seeded, clean_db):
    """JSON can say a lone surrogate (escaped), which no UTF-8 text holds."""
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    batch = make_batch(BIG + 1000, BIG + 1499)
    batch["files"]["subject"][0] = "lone \ud800 surrogate"
    body = json.dumps(batch, default=lambda v: v.decode()).encode()  # ASCII, the surrogate escaped
    before = snapshot(clean_db)
    response = client.post(
        f"{API}/ranges/{range_id}/batches", data=body, headers={**seeded["a"], "Content-Type": "application/json"}
    )
    assert response.status_code == 400 and "files.subject" in response.get_json()["message"]
    assert snapshot(clean_db) == before


def test_gzip_bomb_and_oversized_body_get_413_without_reaching_a_worker(client, flask_app, seeded, clean_db):
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    before = snapshot(clean_db)
    settings = flask_app.config["SETTINGS"]
    flask_app.config["SETTINGS"] = dataclasses.replace(settings, max_decoded_bytes=1024 * 1024)
    try:
        bomb = gzip.compress(b"[" + b" " * (64 * 1024 * 1024) + b"]")
        assert len(bomb) < 100_000
        response = client.post(
            f"{API}/ranges/{range_id}/batches",
            data=bomb,
            headers={**seeded["a"], "Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert response.status_code == 413 and response.get_json()["error"] == "batch_too_large"
    finally:
        flask_app.config["SETTINGS"] = settings
    limit = flask_app.config["MAX_CONTENT_LENGTH"]
    flask_app.config["MAX_CONTENT_LENGTH"] = 10_000
    try:
        big = client.post(
            f"{API}/ranges/{range_id}/batches",
            data=b"x" * 20_000,
            headers={**seeded["a"], "Content-Type": "application/msgpack"},
        )
        assert big.status_code == 413 and big.get_json()["error"]
    finally:
        flask_app.config["MAX_CONTENT_LENGTH"] = limit
    assert snapshot(clean_db) == before


def test_heartbeat_release_and_resume(client, seeded):
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    assert client.post(f"{API}/ranges/{range_id}/heartbeat", headers=seeded["b"]).status_code == 409
    assert client.post(f"{API}/ranges/{range_id}/heartbeat", headers=seeded["a"]).status_code == 200
    assert post_batch(client, seeded["a"], range_id, make_batch(BIG + 1000, BIG + 1199)).status_code == 202
    released = client.post(f"{API}/ranges/{range_id}/release", headers=seeded["a"])
    assert released.status_code == 200 and released.get_json()["next_id"] == BIG + 1200
    lease = client.post(f"{API}/lease", headers=seeded["b"]).get_json()
    assert (lease["range"]["id"], lease["range"]["next_id"]) == (range_id, BIG + 1200)
    assert client.post(f"{API}/ranges/99999/heartbeat", headers=seeded["a"]).status_code == 404


def test_the_range_calls_commit_without_waiting_for_the_flush_and_a_batch_waits(client, seeded):
    """What each call's commit does, seen as it commits (docs/api.md, Heartbeat, done, release): the
    calls that a crash may lose harmlessly set synchronous_commit off for their transaction; a
    batch's acceptance keeps the server's own (on in production; the tests' cluster has it off in
    its configuration file, which is what a commit that sets nothing shows here)."""
    from sqlalchemy import event

    from app.db import get_engine

    seen: list[tuple[str, str]] = []

    def committing(conn) -> None:
        seen.append(
            tuple(
                conn.exec_driver_sql("SELECT setting, source FROM pg_settings WHERE name = 'synchronous_commit'").one()
            )
        )

    range_id = seeded["ranges"][0]
    event.listen(get_engine(), "commit", committing)
    try:
        calls = {}
        for name, call in (
            ("lease", lambda: client.post(f"{API}/lease", headers=seeded["a"])),
            ("heartbeat", lambda: client.post(f"{API}/ranges/{range_id}/heartbeat", headers=seeded["a"])),
            ("batch", lambda: post_batch(client, seeded["a"], range_id, make_batch(BIG + 1000, BIG + 1999))),
            ("done", lambda: client.post(f"{API}/ranges/{range_id}/done", headers=seeded["a"])),
        ):
            seen.clear()
            assert call().status_code in (200, 202), name
            calls[name] = seen[-1]
    finally:
        event.remove(get_engine(), "commit", committing)
    unflushed = ("off", "session")
    assert calls["lease"] == calls["heartbeat"] == calls["done"] == unflushed
    assert calls["batch"] != unflushed and calls["batch"][1] == "configuration file"


def test_a_release_may_say_the_range_failed_and_a_lease_may_skip_ranges(client, seeded, clean_db):
    bad, good = seeded["ranges"]
    assert client.post(f"{API}/lease", headers=seeded["a"]).get_json()["range"]["id"] == bad
    released = client.post(
        f"{API}/ranges/{bad}/release", headers=seeded["a"], json={"failure": "Refused: 413 batch_too_large"}
    )
    assert released.status_code == 200 and released.get_json()["status"] == "planned"
    with clean_db.connect() as conn:
        failures, why = conn.execute(
            text("SELECT failures, last_failure FROM seed_ranges WHERE id = :id"), {"id": bad}
        ).one()
    assert (failures, why) == (1, "edge-a: Refused: 413 batch_too_large")
    skipping = client.post(f"{API}/lease", headers=seeded["a"], json={"skip": [bad, 2**40]})
    assert skipping.get_json()["range"]["id"] == good
    assert client.post(f"{API}/lease", headers=seeded["a"], json={"skip": [bad]}).status_code == 204
    assert client.post(f"{API}/lease", headers=seeded["b"], json={}).get_json()["range"]["id"] == bad
    # A body that does not say it is JSON is ignored, so clients that send none keep working.
    assert (
        client.post(
            f"{API}/ranges/{bad}/release",
            headers={**seeded["b"], "Content-Type": "text/plain"},
            data=b'{"failure": "x"}',
        ).status_code
        == 200
    )
    assert (
        client.post(
            f"{API}/lease", headers={**seeded["b"], "Content-Type": "application/msgpack"}, data=b"\x93\x01"
        ).get_json()["range"]["id"]
        == bad
    )


@pytest.mark.parametrize(
    "path, body, content_type",
    [
        ("/lease", b'{"skip": "1"}', "application/json"),
        ("/lease", b'{"skip": [1.5]}', "application/json"),
        ("/lease", b'{"skip": [true]}', "application/json"),
        ("/lease", b'{"skip": [-1]}', "application/json"),
        ("/lease", b'{"skip": [9223372036854775808]}', "application/json"),
        ("/lease", b'{"skip": [' + b",".join(b"1" for _ in range(10_001)) + b"]}", "application/json"),
        ("/lease", b"[1, 2]", "application/json"),
        ("/lease", b'{"skip": [1', "application/json"),
        ("/lease", b"\xff\xfe", "application/json"),
        ("/ranges/{id}/release", b'{"failure": 413}', "application/json"),
        ("/ranges/{id}/release", b'{"failure": "  "}', "application/json"),
        ("/ranges/{id}/release", b'"failed"', "application/json"),
    ],
)
def test_malformed_lease_and_release_bodies_are_refused_and_change_nothing(
    client, seeded, clean_db, path, body, content_type
):
    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    before = snapshot(clean_db)
    answer = client.post(
        API + path.format(id=range_id), data=body, headers={**seeded["a"], "Content-Type": content_type}
    )
    assert (answer.status_code, answer.get_json()["error"]) == (400, "malformed_request")
    assert snapshot(clean_db) == before


def test_spooled_chunks_stream_as_frames(client, seeded):
    from io import BytesIO

    from edge.digest.frames import iter_frames

    range_id = seeded["ranges"][0]
    client.post(f"{API}/lease", headers=seeded["a"])
    assert client.get(f"{API}/ranges/{range_id}/chunks", headers=seeded["a"]).status_code == 404
    with session_scope() as s:
        store_chunk(s, range_id, BIG + 1000, BIG + 1499, raw(overview_lines(BIG + 1000, BIG + 1499)))
        store_chunk(s, range_id, BIG + 1500, BIG + 1999, raw(overview_lines(BIG + 1500, BIG + 1999, skip={BIG + 1600})))
    assert client.get(f"{API}/ranges/{range_id}/chunks", headers=seeded["b"]).status_code == 409
    response = client.get(f"{API}/ranges/{range_id}/chunks", headers=seeded["a"])
    assert response.status_code == 200
    frames = list(iter_frames(BytesIO(response.data)))
    assert [(f.chunk_from, f.chunk_to, f.lines) for f in frames] == [
        (BIG + 1000, BIG + 1499, 500),
        (BIG + 1500, BIG + 1999, 499),
    ]
    assert frames[1].raw() == raw(overview_lines(BIG + 1500, BIG + 1999, skip={BIG + 1600}))


def test_status_answers_json(client, seeded):
    client.post(f"{API}/lease", headers=seeded["a"])
    status = client.get(f"{API}/status", headers=seeded["a"])
    assert status.status_code == 200
    data = status.get_json()
    assert data["groups"][0]["group"] == "alt.binaries.test" and data["groups"][0]["leased"] == 1
    # A node token sees its own view: no other node's name (the whole view needs an operator key,
    # tests/app/test_operator_keys.py).
    assert (data["scope"], data["node"]) == ("node", "edge-a") and "nodes" not in data
    json.dumps(data)
