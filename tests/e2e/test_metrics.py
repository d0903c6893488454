"""/metrics and the health endpoints through gunicorn (3 workers) while real Celery workers store
a run of two `edge run` nodes: the counters move by exactly what was accepted and stored (the
catalog and the ground truth say how much), the queue depth and the oldest batch's age rise while
the ingest workers are stopped and fall back once they store, and the histograms count every
accept and store. Every gunicorn worker serves the same sums: the processes' counts meet in
PROMETHEUS_MULTIPROC_DIR."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import GROUPS
from tests.e2e.truth import check_ground_truth
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services
INGEST_WORKERS = ("e2e-ingest-1", "e2e-ingest-2")


def get(dc, path: str, key: str | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of a GET to the API over HTTPS."""
    context = ssl.create_default_context(cafile=dc.api.cafile)
    request = urllib.request.Request(dc.api.url + path, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


class Scrape:
    def __init__(self, dc, key: str):
        status, content_type, body = get(dc, "/metrics", key)
        assert status == 200 and content_type.startswith("text/plain"), (status, body[:500])
        self.samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body)
            for s in family.samples
        }

    def __call__(self, name: str, **labels) -> float:
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def total(self, name: str) -> float:
        """The sum over every label set (every group)."""
        return sum(value for (sample, _), value in self.samples.items() if sample == name)

    def has(self, name: str) -> bool:
        return any(sample == name for sample, _ in self.samples)


def test_metrics_follow_a_run_stored_by_the_workers(dc, news):
    key = json.loads(dc.flask("operators", "create", "prometheus", "--json"))["key"]
    # Operators only; the health endpoints are for anyone.
    for credential in (None, "seedop_wrong", "seed_a-node-token-it-is-not"):
        status, content_type, body = get(dc, "/metrics", credential)
        assert status == 401 and content_type == "application/json" and json.loads(body)["error"] == "unauthorized"
    assert get(dc, "/livez")[0] == 200
    status, _, body = get(dc, "/readyz")
    assert status == 200 and json.loads(body)["status"] == "ok", body
    before = Scrape(dc, key)
    for name in ("seed_queue_depth", "seed_oldest_unstored_batch_age_seconds", "seed_batches"):
        assert before.has(name), name

    # The ingest workers stopped: what the nodes send is accepted and waits in the queue.
    for name in INGEST_WORKERS:
        dc.workers[name].stop()
    with news.provider() as proxy:
        tokens = dc.prepare(proxy)
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(120) == 0, node.log()
    batches = dc.value("SELECT count(*) FROM seed_batches")
    numbers = dc.value("SELECT sum(last_id - first_id + 1) FROM seed_ranges")
    ranges = dc.value("SELECT count(*) FROM seed_ranges")
    assert batches > 0 and dc.value("SELECT count(*) FROM seed_batches WHERE state <> 'accepted'") == 0
    wait_until(
        lambda: Scrape(dc, key)("seed_oldest_unstored_batch_age_seconds") > 1, 30, "the oldest batch's age to grow"
    )
    waiting = Scrape(dc, key)
    assert waiting("seed_queue_depth", queue="ingest") == batches  # one store task a batch, none taken
    assert waiting("seed_batches", state="accepted") == batches
    assert waiting.total("seed_batches_accepted_total") - before.total("seed_batches_accepted_total") == batches
    assert (
        waiting.total("seed_article_numbers_accepted_total") - before.total("seed_article_numbers_accepted_total")
    ) == numbers
    assert waiting.total("seed_batch_bytes_accepted_total") - before.total(
        "seed_batch_bytes_accepted_total"
    ) == dc.value("SELECT sum(body_bytes) FROM seed_batches")
    assert waiting("seed_accept_duration_seconds_count") - before("seed_accept_duration_seconds_count") == batches
    assert waiting.total("seed_batches_stored_total") == before.total("seed_batches_stored_total")
    assert sum(waiting("seed_ranges", group=group, state="done") for group in GROUPS) == ranges
    for name in tokens:
        assert waiting("seed_node_leased_ranges", node=name) == 0
        assert waiting("seed_node_last_seen_timestamp_seconds", node=name) > 0

    # The workers back: they store everything, and the gauges fall back.
    for name in INGEST_WORKERS:
        dc.start_worker(name)
    dc.wait_finished(timeout=120)
    wait_until(lambda: Scrape(dc, key)("seed_queue_depth", queue="ingest") == 0, 30, "the ingest queue to empty")
    reports = check_ground_truth(dc.engine, news.truths())
    articles = dc.value("SELECT sum(articles) FROM seed_ranges")
    assert articles == sum(len(truth.seen) for truth in news.truths())
    # Any of gunicorn's workers answers with the same sums.
    scrapes = [Scrape(dc, key) for _ in range(6)]
    after = scrapes[-1]
    assert len({s.total("seed_articles_stored_total") for s in scrapes}) == 1
    assert after("seed_oldest_unstored_batch_age_seconds") == 0
    assert after("seed_batches", state="accepted") == after("seed_batches", state="stored") == 0
    for group in GROUPS:
        stored = after("seed_articles_stored_total", group=group) - before("seed_articles_stored_total", group=group)
        assert stored == len(news.groups[group].seen), group
        assert after("seed_batches_stored_total", group=group) - before(
            "seed_batches_stored_total", group=group
        ) == dc.value(
            "SELECT count(*) FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id"
            " JOIN groups g ON g.id = r.group_id WHERE g.name = :g",
            g=group,
        )
        assert after("seed_ranges", group=group, state="done") == reports[group].ranges
    assert after.total("seed_articles_stored_total") - before.total("seed_articles_stored_total") == articles
    assert (
        after.total("seed_article_numbers_stored_total") - before.total("seed_article_numbers_stored_total")
    ) == numbers
    assert after.total("seed_batches_failed_total") == before.total("seed_batches_failed_total")
    assert after("seed_store_duration_seconds_count") - before("seed_store_duration_seconds_count") == batches
    assert after("seed_store_duration_seconds_sum") > before("seed_store_duration_seconds_sum")
    assert (
        after("seed_store_duration_seconds_bucket", le="+Inf") - before("seed_store_duration_seconds_bucket", le="+Inf")
    ) == batches
    assert after("seed_metrics_source_up", source="database") == after("seed_metrics_source_up", source="broker") == 1
