"""Giving a range back (POST /api/v1/seed/ranges/N/release, app.services.leases.release) at its
edges (issue 32): a failure text holding what PostgreSQL cannot store (NUL, a lone surrogate) or
what an operator should not read raw (controls, bidi overrides, megabytes of it), and a release
after every batch of the range is in, which makes the range done, not planned again."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.db import session_scope
from app.services import leases
from tests.app.factories import BIG, make_group, make_node, make_plan
from tests.app.overview import encoded, make_batch

API = "/api/v1/seed"
FIRST, LAST = BIG, BIG + 999


@pytest.fixture
def held(client):
    """One range FIRST..LAST, leased by edge-a; edge-b waits: (client, range id, auth a, auth b)."""
    with session_scope() as s:
        group = make_group(s)
        _, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
        (seed_range,) = make_plan(s, group, [(FIRST, LAST)])
        range_id = seed_range.id
    a, b = {"Authorization": f"Bearer {token_a}"}, {"Authorization": f"Bearer {token_b}"}
    assert client.post(f"{API}/lease", headers=a).get_json()["range"]["id"] == range_id
    return client, range_id, a, b


def range_row(engine, range_id: int):
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT status, node_id, failures, last_failure, done_at, next_id FROM seed_ranges WHERE id = :id"),
            {"id": range_id},
        ).one()


def release_raw(client, range_id: int, auth: dict, body: bytes):
    return client.post(
        f"{API}/ranges/{range_id}/release", data=body, headers={**auth, "Content-Type": "application/json"}
    )


# -- item 7: a failure text of any content gives the range back -----------------------------------


@pytest.mark.parametrize(
    "body, kept",
    [
        (b'{"failure": "bad\\u0000byte"}', "edge-a: bad\ufffdbyte"),
        (b'{"failure": "\\ud800 lone surrogate"}', "edge-a: \ufffd lone surrogate"),
        (b'{"failure": "\\udfff"}', "edge-a: \ufffd"),
        (b'{"failure": "\\u0000"}', "edge-a: \ufffd"),
        (
            b'{"failure": "line\\nbreak\\ttab \\u001b[2J \\u202eevil \\u009b"}',
            "edge-a: line break tab \ufffd[2J \ufffdevil \ufffd",
        ),
        (b'{"failure": "caf\\u00e9 \xe6\x97\xa5\xf0\x9f\x98\x80 \\ud83d\\ude00"}', "edge-a: café 日😀 😀"),
    ],
)
def test_a_failure_text_of_any_content_is_kept_cleaned_and_the_range_given_back(held, clean_db, body, kept):
    client, range_id, a, b = held
    answer = release_raw(client, range_id, a, body)
    assert answer.status_code == 200, answer.data[:300]
    assert answer.get_json() == {"status": "planned", "next_id": FIRST}
    status, node_id, failures, last_failure, _, _ = range_row(clean_db, range_id)
    assert (status, node_id, failures, last_failure) == ("planned", None, 1, kept)
    # Given back: another node leases it (a failed range comes after others, and there are none).
    assert client.post(f"{API}/lease", headers=b).get_json()["range"]["id"] == range_id


def test_a_long_failure_text_is_cut(held, clean_db):
    client, range_id, a, _ = held
    answer = client.post(f"{API}/ranges/{range_id}/release", headers=a, json={"failure": "\x00é" * 10_000})
    assert answer.status_code == 200
    last_failure = range_row(clean_db, range_id).last_failure
    assert len(last_failure) == leases.MAX_FAILURE_TEXT and last_failure.startswith("edge-a: \ufffdé\ufffd")


def test_failure_text_cleaning():
    assert leases.failure_text("plain words: 413 batch_too_large") == "plain words: 413 batch_too_large"
    assert leases.failure_text("\x00\x1f\x7f\x9f\ud800\u2066\u061c\r\n") == "\ufffd" * 7 + "  "
    assert len(leases.failure_text("x" * 5000)) == leases.MAX_FAILURE_TEXT


# -- item 9c: a range released with every batch in is done --------------------------------------


def test_a_range_released_after_all_its_batches_is_done_not_planned_again(held, clean_db):
    client, range_id, a, b = held
    body, headers = encoded(make_batch(FIRST, LAST))
    posted = client.post(f"{API}/ranges/{range_id}/batches", data=body, headers={**a, **headers})
    assert posted.status_code == 202 and posted.get_json()["next_id"] == LAST + 1
    answer = client.post(f"{API}/ranges/{range_id}/release", headers=a, json={"failure": "stopping"})
    assert answer.status_code == 200 and answer.get_json() == {"status": "done", "next_id": LAST + 1}
    status, node_id, failures, last_failure, done_at, _ = range_row(clean_db, range_id)
    # Done as POST /done makes it; the failure said while stopping is not counted against it.
    assert (status, node_id, failures, last_failure) == ("done", None, 0, None) and done_at is not None
    assert client.post(f"{API}/lease", headers=b).status_code == 204  # nothing leased for nothing
    assert client.post(f"{API}/ranges/{range_id}/done", headers=a).get_json()["status"] == "done"
    assert client.post(f"{API}/ranges/{range_id}/release", headers=a).status_code == 409


def test_a_range_released_part_way_is_planned_again(db_session):
    group = make_group(db_session)
    node, _ = make_node(db_session)
    (seed_range,) = make_plan(db_session, group, [(FIRST, LAST)])
    leases.lease(db_session, node, max_leases=1)
    seed_range.next_id = LAST  # one article still missing
    assert leases.release(db_session, node, seed_range.id).status == "planned"
    leases.lease(db_session, node, max_leases=1)
    seed_range.next_id = LAST + 1
    released = leases.release(db_session, node, seed_range.id)
    assert (released.status, released.node_id) == ("done", None) and released.done_at is not None
