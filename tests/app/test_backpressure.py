"""Backpressure (STORE_BACKLOG, app/services/ingest/backlog.py): while the workers are behind, a
lease and a batch are answered 429 busy at once and change nothing; what lets a node keep and
finish what it holds is answered; once the workers catch up, the same batch is taken."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import text

from app.config import Settings
from app.db import session_scope
from app.models import SeedNode
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import make_batch
from tests.app.test_api import API, post_batch, snapshot
from tests.app.test_ingest import all_stored
from tests.app.test_metrics import sample, scrape
from tests.fixtures.app import task_result
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services


@pytest.fixture
def backlog_of_two(flask_app: Flask, settings: Settings) -> Iterator[None]:
    flask_app.config["SETTINGS"] = dataclasses.replace(settings, store_backlog=2)
    try:
        yield
    finally:
        flask_app.config["SETTINGS"] = settings


def accepted_while_redis_was_away(node_name: str, range_id: int, first: int, last: int) -> int:
    """A batch accepted as the API accepts one, its store task never sent (as when Redis is
    down: the batch is durable and waits for `batches.requeue`), so that it waits for the workers
    whatever they do meanwhile."""
    with session_scope() as s:
        node = s.query(SeedNode).filter_by(name=node_name).one()
    return accept(node, range_id, make_batch(first, last))


def test_past_the_backlog_leases_and_batches_are_busy_and_what_a_node_holds_goes_on(
    client,
    clean_db,
    backlog_of_two,
    operator_key,
    celery_worker,
    celery_app,  # noqa: F811
):
    with session_scope() as s:
        group = make_group(s)
        _, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
        ranges = [r.id for r in make_plan(s, group, [(BIG, BIG + 2999), (BIG + 3000, BIG + 5999)])]
    a, b = ({"Authorization": f"Bearer {token}"} for token in (token_a, token_b))
    assert client.post(f"{API}/lease", headers=a).get_json()["range"]["id"] == ranges[0]
    waiting = [accepted_while_redis_was_away("edge-a", ranges[0], first, first + 999) for first in (BIG, BIG + 1000)]
    busy_before = {
        call: sample(scrape(client, operator_key), "seed_busy_answers_total", call=call) for call in ("lease", "batch")
    }

    # Two batches wait for the workers: the bound. Another node's lease and edge-a's next batch
    # are answered busy, with when to come back, and change nothing.
    before = snapshot(clean_db)
    for response in (
        client.post(f"{API}/lease", headers=b),
        post_batch(client, a, ranges[0], make_batch(BIG + 2000, BIG + 2999)),
    ):
        assert response.status_code == 429, response.data
        assert response.get_json()["error"] == "busy" and "STORE_BACKLOG" in response.get_json()["message"]
        assert response.headers["Retry-After"] == "2"
    assert snapshot(clean_db) == before
    # What edge-a holds stays its own: its heartbeat is answered.
    heartbeat = client.post(f"{API}/ranges/{ranges[0]}/heartbeat", headers=a)
    assert heartbeat.status_code == 200 and heartbeat.get_json()["next_id"] == BIG + 2000
    samples = scrape(client, operator_key)
    assert {
        call: sample(samples, "seed_busy_answers_total", call=call) - busy_before[call] for call in ("lease", "batch")
    } == {"lease": 1, "batch": 1}

    # The workers catch up (the store of each, then the join): the same calls are taken.
    for batch_id in waiting:
        task_result(celery_app, "ingest.store_batch", (batch_id,), worker=celery_worker, ignore_result=False)
    assert wait_until(lambda: all_stored(clean_db), what="the two batches stored and joined")
    accepted = post_batch(client, a, ranges[0], make_batch(BIG + 2000, BIG + 2999))
    assert accepted.status_code == 202 and accepted.get_json()["next_id"] == BIG + 3000
    assert client.post(f"{API}/ranges/{ranges[0]}/done", headers=a).status_code == 200
    assert client.post(f"{API}/lease", headers=b).get_json()["range"]["id"] == ranges[1]
    assert wait_until(lambda: all_stored(clean_db), what="the third batch stored and joined")
    with clean_db.connect() as conn:
        assert conn.execute(text("SELECT count(*), count(DISTINCT article) FROM fragments")).one() == (3000, 3000)


@pytest.mark.parametrize(("bound", "status"), [(0, 200), (1, 429), (2, 200)])
def test_the_bound_counts_the_batches_waiting_and_zero_is_none(client, clean_db, flask_app, settings, bound, status):
    with session_scope() as s:
        group = make_group(s)
        _, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
        ranges = [r.id for r in make_plan(s, group, [(BIG, BIG + 999), (BIG + 1000, BIG + 1999)])]
    assert client.post(f"{API}/lease", headers={"Authorization": f"Bearer {token_a}"}).status_code == 200
    accepted_while_redis_was_away("edge-a", ranges[0], BIG, BIG + 999)  # one batch waits
    flask_app.config["SETTINGS"] = dataclasses.replace(settings, store_backlog=bound)
    try:
        assert client.post(f"{API}/lease", headers={"Authorization": f"Bearer {token_b}"}).status_code == status
    finally:
        flask_app.config["SETTINGS"] = settings
