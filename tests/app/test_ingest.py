"""Accepted batches reach the catalog through real Celery workers: once, whole, and even when
Redis was away when they were accepted."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.db import session_scope
from tests.app.factories import BIG, make_group, make_node, make_plan
from tests.app.overview import make_batch
from tests.app.test_api import API, post_batch
from tests.fixtures.app import task_result
from tests.fixtures.queries import assert_posts_summed, scalar
from tests.fixtures.waiting import wait_until


def all_stored(engine):
    """Every batch stored and joined."""
    return scalar(engine, "SELECT count(*) FILTER (WHERE state <> 'joined') = 0 AND count(*) > 0 FROM seed_batches")


@pytest.fixture
def leased(client):
    return lease_a_range(client)


def lease_a_range(client) -> tuple[dict[str, str], int]:
    """Node edge-a holding a range of 3,000 articles past 2^32: its auth header and the range's id."""
    with session_scope() as s:
        group = make_group(s)
        _, token = make_node(s, "edge-a")
        (seed_range,) = make_plan(s, group, [(BIG, BIG + 2999)])
        range_id = seed_range.id
    auth = {"Authorization": f"Bearer {token}"}
    assert client.post(f"{API}/lease", headers=auth).status_code == 200
    return auth, range_id


def test_batches_are_stored_once_and_releases_whole(client, leased, clean_db, celery_worker, celery_app):
    auth, range_id = leased
    # 3 files x 5 parts = 15 articles per release; 1000 is not a multiple of 15, so releases
    # straddle the batches and must be put together by joining.
    skip = {BIG + 7, BIG + 1500}
    batches = [make_batch(a, a + 999, skip=skip) for a in (BIG, BIG + 1000, BIG + 2000)]
    for batch in batches:
        assert post_batch(client, auth, range_id, batch).status_code == 202
    assert post_batch(client, auth, range_id, batches[1]).status_code == 200  # sent again
    assert wait_until(lambda: all_stored(clean_db)), "batches not stored"
    # A redelivered ingest task finds the batch stored and stores nothing again.
    with clean_db.connect() as conn:
        batch_ids = conn.execute(text("SELECT id FROM seed_batches")).scalars().all()
    for batch_id in batch_ids:
        stored = task_result(celery_app, "ingest.store_batch", (batch_id,), worker=celery_worker, ignore_result=False)
        assert stored["state"] == "already_stored"

    assert scalar(clean_db, "SELECT count(*) FROM fragments") == 3000 - len(skip)
    assert scalar(clean_db, "SELECT count(DISTINCT article) FROM fragments") == 3000 - len(skip)
    assert scalar(clean_db, "SELECT min(article) FROM fragments") == BIG
    per_release = 15
    releases = {BIG // per_release + i for i in range(0, 3000 // per_release + 1)}
    with clean_db.connect() as conn:
        rows = conn.execute(
            text("SELECT name, files_seen, parts_expected, parts_seen, completion FROM releases ORDER BY name")
        ).all()
    assert len(rows) == len(releases)
    straddling = f"Some.Release.2025.{(BIG + 1000) // per_release}"
    whole = {r.name: r for r in rows}[straddling]
    assert (whole.files_seen, whole.parts_expected, whole.parts_seen, whole.completion) == (3, 15, 15, 100.0)
    holed = {r.name: r for r in rows}[f"Some.Release.2025.{(BIG + 1500) // per_release}"]
    assert holed.parts_seen == 14
    assert scalar(clean_db, "SELECT sum(missing) FROM seed_ranges") == len(skip)
    assert scalar(clean_db, "SELECT sum(articles) FROM seed_ranges") == 3000 - len(skip)
    assert scalar(clean_db, "SELECT count(*) FROM rule_counts WHERE rule = ''") == 3
    assert scalar(clean_db, "SELECT count(*) FROM seed_batches WHERE body IS NOT NULL OR release_keys IS NOT NULL") == 0
    repaired = task_result(celery_app, "releases.repair", (batch_ids[1],), worker=celery_worker, ignore_result=False)
    assert repaired is None  # redelivered: no-op

    # A task lost between the store and the join into posts: the sweep finds the stored-but-not-
    # joined batch again and the ingest task joins it.
    put_back = text(
        "UPDATE seed_batches SET state = 'stored', stored_at = now() - interval '1 hour',"
        " release_keys = (SELECT array_agg(key) FROM releases WHERE name = :n) WHERE id = :b"
    )
    with session_scope() as s:
        s.execute(put_back, {"n": straddling, "b": batch_ids[1]})
    requeued = task_result(celery_app, "batches.requeue", worker=celery_worker)
    assert requeued == {"accepted": [], "stored": [batch_ids[1]]}
    assert wait_until(lambda: all_stored(clean_db))
    assert scalar(clean_db, "SELECT parts_seen FROM releases WHERE name = :n", n=straddling) == 15

    # An operator doubting a release's sums puts its batch back and repairs it: recomputed whole.
    with session_scope() as s:
        s.execute(put_back, {"n": straddling, "b": batch_ids[1]})
        s.execute(text("UPDATE releases SET files_seen = 0, parts_seen = 0 WHERE name = :n"), {"n": straddling})
    repaired = task_result(celery_app, "releases.repair", (batch_ids[1],), worker=celery_worker, ignore_result=False)
    assert repaired == scalar(clean_db, "SELECT count(*) FROM releases WHERE name = :n", n=straddling)
    assert all_stored(clean_db)
    assert scalar(clean_db, "SELECT parts_seen FROM releases WHERE name = :n", n=straddling) == 15
    # The posts searched are the releases summed again after the repair (the join keeps them).
    assert_posts_summed(clean_db)


def test_batches_accepted_while_redis_is_down_are_stored_once_it_is_back(
    client, leased, clean_db, celery_worker, celery_app, redis_server
):
    auth, range_id = leased
    redis_server.stop()
    try:
        response = post_batch(client, auth, range_id, make_batch(BIG, BIG + 999))
        assert response.status_code == 202
    finally:
        redis_server.start()
    assert scalar(clean_db, "SELECT state FROM seed_batches") == "accepted"
    celery_worker.wait_ready(celery_app)
    # The beat sweep (run here by hand, with no waiting age) sends what was never enqueued.
    with session_scope() as s:
        s.execute(text("UPDATE seed_batches SET accepted_at = now() - interval '1 hour'"))
    task_result(celery_app, "batches.requeue", worker=celery_worker)
    assert wait_until(lambda: all_stored(clean_db))
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == 1000


def test_after_redis_comes_back_the_next_batch_is_enqueued_on_a_fresh_connection(
    client, leased, clean_db, celery_worker, celery_app, redis_server
):
    """The API enqueues through the broker pool: the connection that failed while Redis was down
    is not handed out again broken, so the first batch after Redis is back goes straight to a
    worker (only the one accepted while it was down waits for the requeue sweep)."""
    auth, range_id = leased
    assert post_batch(client, auth, range_id, make_batch(BIG, BIG + 999)).status_code == 202
    assert wait_until(lambda: all_stored(clean_db))  # a pooled connection has been used
    redis_server.stop()
    try:
        assert post_batch(client, auth, range_id, make_batch(BIG + 1000, BIG + 1999)).status_code == 202
    finally:
        redis_server.start()
    celery_worker.wait_ready(celery_app)
    assert post_batch(client, auth, range_id, make_batch(BIG + 2000, BIG + 2999)).status_code == 202
    assert wait_until(
        lambda: scalar(clean_db, "SELECT state FROM seed_batches WHERE batch_from = :f", f=BIG + 2000) == "joined"
    )
    assert scalar(clean_db, "SELECT state FROM seed_batches WHERE batch_from = :f", f=BIG + 1000) == "accepted"
