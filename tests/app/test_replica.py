"""Reads from a replica (DATABASE_READ_URL): the catalog's reads go to a real hot standby of the
tests' cluster (tests/fixtures/postgres.py, ops/pg replica), its writes to the primary; the lag in
/readyz and /metrics. The other catalog tests run on the replica too (tests/fixtures/app.py)."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient
from sqlalchemy import text

from app.db import get_engine, get_read_engine, session_scope
from app.services import apikeys
from tests.app.factories import BIG
from tests.app.overview import make_batch
from tests.app.test_api import post_batch
from tests.app.test_health import not_ready
from tests.app.test_ingest import all_stored, lease_a_range
from tests.app.test_metrics import sample, scrape
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services
PER_RELEASE = 15  # tests/app/overview.py: 3 files of 5 parts


@pytest.fixture
def leased(client):
    return lease_a_range(client)


@pytest.fixture
def replay_paused(postgres_replica) -> Iterator[None]:
    """The replica receiving the primary's WAL but not replaying it, as one that fell behind."""
    postgres_replica.pause()
    try:
        yield
    finally:
        postgres_replica.resume()


def found(client: FlaskClient, key: str, words: str) -> list[str]:
    response = client.get("/api", query_string={"t": "search", "q": words, "apikey": key})
    assert response.status_code == 200, response.data[:300]
    root = ET.fromstring(response.data)
    assert root.tag == "rss", response.data[:300]
    return [item.findtext("title") for item in root.findall("channel/item")]


def test_the_catalog_reads_from_a_hot_standby_and_writes_to_the_primary(client, settings):
    assert settings.database_read_url is not None
    with get_read_engine().connect() as conn:
        assert conn.execute(text("SELECT pg_is_in_recovery()")).scalar_one() is True
        assert conn.execute(text("SHOW transaction_read_only")).scalar_one() == "on"
    with get_engine().connect() as conn:
        assert conn.execute(text("SELECT pg_is_in_recovery()")).scalar_one() is False


def test_a_post_reaches_the_replica_after_its_batch_is_stored(
    flask_app, leased, clean_db, celery_worker, replay_paused, postgres_replica, operator_key
):
    """The post is stored and joined on the primary while the replica replays nothing: the
    catalog does not list it yet (its reads are the replica's), the key's use is counted all the
    same (the primary's), and the lag shows; the replica replaying again, the post is found by
    itself: this client does not wait for the replica (the app's test client does)."""
    client = FlaskClient(flask_app)
    auth, range_id = leased
    with session_scope() as s:
        _, key = apikeys.create_key(s, "sonarr")
    name = f"Some.Release.2025.{(BIG + 1000) // PER_RELEASE}"
    assert post_batch(client, auth, range_id, make_batch(BIG, BIG + 2999)).status_code == 202
    assert wait_until(lambda: all_stored(clean_db), what="the batch stored and joined on the primary")
    with clean_db.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM posts WHERE name = :n"), {"n": name}).scalar_one() == 1
    assert found(client, key, name) == []
    with session_scope() as s:
        assert apikeys.list_usage(s, "sonarr")[0][1].requests == 1
    assert wait_until(
        lambda: sample(scrape(client, operator_key), "seed_database_replica_lag_seconds") > 0,
        what="a lag while the replica replays nothing",
    )
    assert sample(scrape(client, operator_key), "seed_metrics_source_up", source="replica") == 1

    postgres_replica.resume()
    assert wait_until(lambda: found(client, key, name) == [name], interval=0.02, what="the post found on the replica")
    assert wait_until(
        lambda: sample(scrape(client, operator_key), "seed_database_replica_lag_seconds") == 0,
        what="no lag once the replica has replayed all",
    )


def test_readyz_gives_the_lag_and_fails_past_the_bound(flask_app, settings, replay_paused, clean_db):
    plain = FlaskClient(flask_app)  # no wait for the replica: it is paused
    body = plain.get("/readyz").get_json()
    assert body["checks"]["replica"]["status"] == "ok" and body["checks"]["replica"]["lag_seconds"] >= 0
    # A write the paused replica receives and does not replay: it falls behind, second by second.
    with session_scope() as s:
        apikeys.create_key(s, "lagging")
    flask_app.config["SETTINGS"] = dataclasses.replace(settings, database_read_max_lag=1)
    try:
        assert wait_until(lambda: plain.get("/readyz").status_code == 503, what="the replica past 1 s behind")
        body = not_ready(plain.get("/readyz"), "replica", "behind the primary", "DATABASE_READ_MAX_LAG")
        assert body["checks"]["replica"]["lag_seconds"] > 1
        assert {name: c["status"] for name, c in body["checks"].items() if name != "replica"} == {
            "database": "ok",
            "redis": "ok",
            "migrations": "ok",
        }
    finally:
        flask_app.config["SETTINGS"] = settings


def test_the_replica_down_is_said_and_searches_get_an_error_not_a_500(client, flask_app, postgres_replica, clean_db):
    from app.db import reset_engine

    with session_scope() as s:
        _, key = apikeys.create_key(s, "radarr")
    plain = FlaskClient(flask_app)
    postgres_replica.stop()
    try:
        not_ready(plain.get("/readyz"), "replica", "OperationalError")
        response = plain.get("/api", query_string={"t": "search", "q": "anything", "apikey": key})
        assert response.status_code == 200
        error = ET.fromstring(response.data)
        assert (error.tag, error.get("code")) == ("error", "900")
        assert plain.get("/healthz").status_code == 200  # the primary answers
    finally:
        postgres_replica.server.run("start")
        reset_engine()
    assert wait_until(lambda: plain.get("/readyz").status_code == 200, what="the replica streaming again")
    assert found(client, key, "anything") == []
