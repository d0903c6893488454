"""GET /metrics (app/metrics.py, app/api/metrics.py): operators only; counters counted where the
thing happens, once, when its transaction commits; the gauges read from PostgreSQL and Redis at
each scrape; several processes summed through PROMETHEUS_MULTIPROC_DIR."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from app import metrics
from app.db import session_scope
from app.models.ranges import RANGE_STATUSES
from app.services import apikeys
from app.services.ingest import store
from app.services.ingest.lifecycle import record_failure
from app.services.planner import plan_groups
from edge.digest.batch import encode_batch
from edge.digest.settings import NNTPSettings, TLSMode
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import make_batch
from tests.app.test_api import API
from tests.app.test_newznab import catalog  # noqa: F401 - the fixture, for the catalog's counters
from tests.fixtures.queries import scalar

REPO = Path(__file__).resolve().parents[2]
GROUP = "alt.binaries.test"


def parse(exposition: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
    }


def sample(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(client, key: str) -> dict:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.data[:500]
    assert response.content_type.startswith("text/plain")
    return parse(response.get_data(as_text=True))


# -- who may scrape ----------------------------------------------------------------------------


def test_metrics_are_for_operators_only(client, operator_key):
    with session_scope() as s:
        _, node_token = make_node(s, "edge-a")
        _, api_key = apikeys.create_key(s, "sonarr")
    for headers in (
        {},
        {"Authorization": "Bearer seedop_not-a-key"},
        {"Authorization": f"Bearer {node_token}"},
        {"Authorization": f"Bearer {api_key}"},
        {"Authorization": f"Basic {operator_key}"},
        {"Authorization": "Bearer "},
    ):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401, headers
        assert response.get_json()["error"] == "unauthorized" and response.get_json()["message"]
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get(f"/metrics?apikey={operator_key}").status_code == 401  # never from a URL
    assert client.post("/metrics", headers={"Authorization": f"Bearer {operator_key}"}).status_code == 405
    samples = scrape(client, operator_key)
    assert sample(samples, "seed_metrics_source_up", source="database") == 1
    assert sample(samples, "seed_metrics_source_up", source="broker") == 1


# -- counted where it happens, once -------------------------------------------------------------


def test_batches_are_counted_when_accepted_stored_and_failed_each_once(client, operator_key, clean_db):
    with session_scope() as s:
        group = make_group(s, GROUP)
        node, token = make_node(s, "edge-a")
        (seed_range,) = make_plan(s, group, [(BIG, BIG + 2999)])
        range_id = seed_range.id
    assert client.post(f"{API}/lease", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    before = scrape(client, operator_key)
    skip = {BIG + 7, BIG + 500, BIG + 1999}
    batches = [make_batch(a, a + 999, skip=skip) for a in (BIG, BIG + 1000, BIG + 2000)]
    bodies = [encode_batch(b) for b in batches]
    ids = [accept(node, range_id, b, encoded) for b, encoded in zip(batches, bodies)]
    accept(node, range_id, batches[0], bodies[0])  # sent again: already accepted, not counted

    # A store rolled back is not counted; the one that commits is, once; a redelivery is not.
    with pytest.raises(RuntimeError), session_scope() as s:
        assert store.store_batch(s, ids[0]).stored
        raise RuntimeError("the commit never comes")
    for batch_id in ids[:2]:
        with session_scope() as s:
            assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        assert not store.store_batch(s, ids[0]).stored
    # The third fails twice, the second time for good.
    for _ in range(2):
        with session_scope() as s:
            record_failure(s, ids[2], "ValueError: poison", max_attempts=2)

    after = scrape(client, operator_key)

    def moved(name: str, **labels) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("seed_batches_accepted_total", group=GROUP) == 3
    assert moved("seed_article_numbers_accepted_total", group=GROUP) == 3000
    assert moved("seed_node_article_numbers_accepted_total", node="edge-a") == 3000  # each node's rate
    assert moved("seed_batch_bytes_accepted_total", group=GROUP) == sum(len(body) for body, _, _ in bodies)
    assert moved("seed_batches_stored_total", group=GROUP) == 2
    assert moved("seed_articles_stored_total", group=GROUP) == 2000 - 3  # the three holes are in the stored two
    assert moved("seed_articles_stored_total", group=GROUP) == scalar(clean_db, "SELECT sum(articles) FROM seed_ranges")
    assert moved("seed_article_numbers_stored_total", group=GROUP) == 2000
    assert moved("seed_batch_bytes_stored_total", group=GROUP) == len(bodies[0][0]) + len(bodies[1][0])
    assert moved("seed_store_errors_total", group=GROUP) == 2
    assert moved("seed_batches_failed_total", group=GROUP) == 1
    assert moved("seed_article_numbers_failed_total", group=GROUP) == 1000
    assert moved("seed_batch_bytes_failed_total", group=GROUP) == len(bodies[2][0])
    assert moved("seed_accept_duration_seconds_count") == 3
    assert moved("seed_store_duration_seconds_count") == 2
    assert moved("seed_store_duration_seconds_sum") > 0
    assert moved("seed_store_duration_seconds_bucket", le="+Inf") == 2


def test_plannings_and_their_failures_are_counted_by_group(client, operator_key, settings):
    with session_scope() as s:
        make_group(s, GROUP)
    before = scrape(client, operator_key)
    nowhere = dataclasses.replace(settings, nntp=NNTPSettings(host="127.0.0.1", port=1, tls=TLSMode.NONE, timeout=5))
    results = list(plan_groups(nowhere, [GROUP], days=30))
    assert results[0].error is not None
    after = scrape(client, operator_key)
    for name in ("seed_planning_runs_total", "seed_planning_failures_total"):
        moved = sample(after, name, group=GROUP, kind="backfill") - sample(before, name, group=GROUP, kind="backfill")
        assert moved == 1, name
    assert sample(after, "seed_group_plan_failures", group=GROUP) == 1  # read from the group's row


def test_catalog_searches_and_nzb_downloads_are_counted(catalog, operator_key):  # noqa: F811
    client, key = catalog

    def counted(samples, interface, request, outcome):
        return sample(samples, "seed_catalog_requests_total", interface=interface, request=request, outcome=outcome)

    asked = [
        ("newznab", "search", "ok", {"t": "search", "q": "economist", "apikey": key}),
        ("newznab", "search", "unauthorized", {"t": "search", "q": "economist", "apikey": "wrong"}),
        ("newznab", "search", "bad_request", {"t": "search", "limit": "many", "apikey": key}),
        ("newznab", "details", "not_found", {"t": "details", "id": "12345", "apikey": key}),
        ("newznab", "nzb", "not_found", {"t": "get", "id": "x", "apikey": key}),
    ]
    before = scrape(client, operator_key)
    for _, _, _, params in asked:
        assert client.get("/api", query_string=params).status_code == 200
    assert client.get("/api", query_string={"t": "caps"}).status_code == 200  # not a catalog request
    assert client.get("/api", query_string={"t": "nonsense", "apikey": key}).status_code == 200  # nor this
    found = client.get("/api", query_string={"t": "search", "q": "economist", "apikey": key, "o": "json"}).get_json()
    items = found["rss"]["channel"]["item"]
    post_id = (items[0] if isinstance(items, list) else items)["guid"]["#text"].rsplit("id=", 1)[1]
    assert client.get("/api", query_string={"t": "get", "id": post_id, "apikey": key}).status_code == 200
    assert client.get("/search", query_string={"q": "economist", "apikey": key}).status_code == 200
    assert client.get("/search", query_string={"apikey": key}).status_code == 200  # the form: no search
    assert client.get(f"/nzb/{post_id}", query_string={"apikey": key}).status_code == 200
    assert client.get("/nzb/4242", query_string={"apikey": key}).status_code == 404
    after = scrape(client, operator_key)

    expected = {}
    for interface, request, outcome, _ in asked:
        expected[(interface, request, outcome)] = expected.get((interface, request, outcome), 0) + 1
    expected[("newznab", "search", "ok")] += 1
    expected[("newznab", "nzb", "ok")] = 1
    expected.update({("web", "search", "ok"): 1, ("web", "nzb", "ok"): 1, ("web", "nzb", "not_found"): 1})
    for (interface, request, outcome), count in expected.items():
        moved = counted(after, interface, request, outcome) - counted(before, interface, request, outcome)
        assert moved == count, (interface, request, outcome)
    durations = sample(after, "seed_catalog_request_duration_seconds_count", interface="newznab", request="search")
    assert (
        durations - sample(before, "seed_catalog_request_duration_seconds_count", interface="newznab", request="search")
        == 4
    )
    assert not any(
        name == "seed_catalog_requests_total" and dict(labels).get("request") in ("caps", "nonsense")
        for name, labels in after
    )


# -- read at each scrape ---------------------------------------------------------------------


def test_gauges_are_read_from_the_database_and_redis_at_each_scrape(client, operator_key):
    with session_scope() as s:
        group = make_group(s, GROUP)
        node, token = make_node(s, "edge-a")
        make_node(s, "edge-never-seen")
        ranges = make_plan(s, group, [(BIG, BIG + 999), (BIG + 1000, BIG + 1999), (BIG + 2000, BIG + 2999)])
        range_id = ranges[0].id
        s.execute(text("UPDATE groups SET plan_failures = 3"))
    assert client.post(f"{API}/lease", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    samples = scrape(client, operator_key)
    assert {state: sample(samples, "seed_ranges", group=GROUP, state=state) for state in RANGE_STATUSES} == {
        "planned": 2,
        "leased": 1,
        "done": 0,
        "expired": 0,
    }
    assert sample(samples, "seed_node_leased_ranges", node="edge-a") == 1
    assert sample(samples, "seed_node_leased_ranges", node="edge-never-seen") == 0
    assert abs(sample(samples, "seed_node_last_seen_timestamp_seconds", node="edge-a") - time.time()) < 60
    assert ("seed_node_last_seen_timestamp_seconds", (("node", "edge-never-seen"),)) not in samples
    assert sample(samples, "seed_group_plan_failures", group=GROUP) == 3
    assert sample(samples, "seed_oldest_unstored_batch_age_seconds") == 0
    assert {q for name, labels in samples if name == "seed_queue_depth" for _, q in labels} == set(metrics.QUEUES)

    # A batch accepted an hour ago and not stored yet: waiting, and old.
    batch_id = accept(node, range_id, make_batch(BIG, BIG + 999))
    with session_scope() as s:
        s.execute(text("UPDATE seed_batches SET accepted_at = now() - interval '1 hour'"))
    samples = scrape(client, operator_key)
    assert sample(samples, "seed_batches", state="accepted") == 1
    assert 3600 <= sample(samples, "seed_oldest_unstored_batch_age_seconds") < 3700
    with session_scope() as s:
        store.store_batch(s, batch_id)
    samples = scrape(client, operator_key)
    assert (sample(samples, "seed_batches", state="accepted"), sample(samples, "seed_batches", state="stored")) == (
        0,
        1,
    )
    assert sample(samples, "seed_oldest_unstored_batch_age_seconds") == 0


def test_queue_depths_count_the_messages_waiting(celery_app, clean_redis):
    for _ in range(3):
        celery_app.send_task("control.ping", queue="depth-probe-metrics")
    assert metrics.queue_depths(queues=("depth-probe-metrics", "nothing-here")) == {
        "depth-probe-metrics": 3,
        "nothing-here": 0,
    }


def test_a_source_that_does_not_answer_is_reported_and_the_rest_still_served(
    client, operator_key, redis_server, celery_worker, celery_app
):
    redis_server.stop()
    try:
        samples = scrape(client, operator_key)
    finally:
        redis_server.start()
    assert sample(samples, "seed_metrics_source_up", source="broker") == 0
    assert sample(samples, "seed_metrics_source_up", source="database") == 1
    assert not any(name == "seed_queue_depth" for name, _ in samples)
    assert ("seed_accept_duration_seconds_count", ()) in samples  # the counters and histograms
    assert ("seed_oldest_unstored_batch_age_seconds", ()) in samples  # the database's gauges
    celery_worker.wait_ready(celery_app)


def test_the_queues_are_celerys():
    import celeryconfig

    assert tuple(queue.name for queue in celeryconfig.task_queues) == metrics.QUEUES


def test_a_rolled_back_transaction_counts_nothing_and_a_failing_metric_never_fails_a_commit(db_session):
    counted = []
    db_session.execute(text("SELECT 1"))
    metrics.on_commit(db_session, lambda: counted.append("rolled back"))
    db_session.rollback()
    db_session.execute(text("SELECT 1"))
    metrics.on_commit(db_session, lambda: counted.append("before a savepoint"))
    db_session.begin_nested().rollback()  # a savepoint rolled back forgets nothing of the transaction
    metrics.on_commit(db_session, lambda: 1 / 0)
    metrics.on_commit(db_session, lambda: counted.append("committed"))
    db_session.commit()
    assert counted == ["before a savepoint", "committed"]


# -- several processes, one directory ----------------------------------------------------------

COUNT_IN_A_PROCESS = """
import os, sys
from app import metrics
metrics.BATCHES_STORED.labels("alt.binaries.test").inc(int(sys.argv[1]))
metrics.STORE_SECONDS.observe(0.2)
print(metrics.process_identifier())
"""

SCRAPE_IN_A_PROCESS = """
from app.services import gauges
body, content_type = gauges.exposition()
print(body.decode())
"""


def test_processes_count_into_the_multiprocess_directory_and_the_scrape_sums_them():
    """No service: the gauges' sources are away (a database and a Redis nobody listens on), and
    the counters of the processes that counted and exited are summed all the same."""
    directory = os.path.join(tempfile.mkdtemp(prefix="metrics-test."), "not-made-yet")
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": directory,
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": "postgresql+psycopg://seed@127.0.0.1:1/none",
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    identifiers = [
        subprocess.run(
            [sys.executable, "-c", COUNT_IN_A_PROCESS, str(n)],
            env=env,
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for n in (2, 5)
    ]
    assert len(set(identifiers)) == 2 and all(i.rsplit("-", 1)[1].isdigit() for i in identifiers)
    assert sorted(os.listdir(directory)) == sorted(
        f"{kind}_{i}.db" for kind in ("counter", "histogram") for i in identifiers
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRAPE_IN_A_PROCESS], env=env, cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    samples = parse(out)
    assert sample(samples, "seed_batches_stored_total", group=GROUP) == 7
    assert sample(samples, "seed_store_duration_seconds_count") == 2
    assert sample(samples, "seed_store_duration_seconds_bucket", le="0.25") == 2
    assert sample(samples, "seed_metrics_source_up", source="database") == 0
    assert sample(samples, "seed_metrics_source_up", source="broker") == 0
