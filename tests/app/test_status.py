"""`flask seed status` (text and --json) against the catalog: two groups with several ranges and
batches stored the normal way (releases and files straddle batches, so that counts summed per
batch would be too high). Files, releases and posts equal counts of the catalog's tables; the
progress, the rate over the recent activity (after a pause too), the ETA and the oldest batch not
stored are what the rows say; times are UTC and say so; the text's numbers are right-aligned with
thousands separators. Also: estimated counts for a big group, and what the ingest task returns
(Flower shows it)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from app.db import session_scope
from app.services import leases
from app.services import status as status_service
from app.services.ingest import posts, store
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import make_batch
from tests.app.test_api import API, post_batch
from tests.fixtures.app import task_result
from tests.fixtures.queries import scalar
from tests.fixtures.waiting import wait_until

TEST = "alt.binaries.test"
OTHER = "alt.binaries.other"
# When the batches were accepted: hours ago, so that a rate "over the last minutes" would read 0.
PAUSE = timedelta(hours=3)


def store_and_join(batch_id: int) -> None:
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        posts.join_batch(s, batch_id)


def set_accepted_at(batch_id: int, moment: datetime) -> None:
    with session_scope() as s:
        s.execute(text("UPDATE seed_batches SET accepted_at = :t WHERE id = :id"), {"t": moment, "id": batch_id})


@pytest.fixture
def seeded(clean_db, monkeypatch):
    """alt.binaries.test: three ranges of 2,000 numbers, all leased; the first read whole in two
    batches (and done), the second half read (one batch). alt.binaries.other: one range with one
    batch stored and one accepted, not stored (accepted 20 minutes ago). The test group's batches
    came in three distinct minutes hours ago, the first of them a long while before the others;
    the rate is measured over the last RATE_MINUTES (2 here) minutes with batches."""
    monkeypatch.setattr(status_service, "RATE_MINUTES", 2)
    with session_scope() as s:
        test, other = make_group(s, TEST), make_group(s, OTHER)
        make_plan(s, test, [(BIG, BIG + 1999), (BIG + 2000, BIG + 3999), (BIG + 4000, BIG + 5999)])
        make_plan(s, other, [(BIG, BIG + 1999)])
        node, _ = make_node(s)
        granted = [leases.lease(s, node, max_leases=4) for _ in range(4)]
        held = {(g.group, g.first_id): g.range_id for g in granted}
    first, second = held[(TEST, BIG)], held[(TEST, BIG + 2000)]
    other_range = held[(OTHER, BIG)]
    # 15 articles a release (3 files of 5 parts): 1,000 is no multiple of 15, so a file and a
    # release straddle each pair of batches.
    spans = [(first, BIG, BIG + 999), (first, BIG + 1000, BIG + 1999), (second, BIG + 2000, BIG + 2499)]
    ids = [accept(node, range_id, make_batch(a, b, skip={BIG + 7})) for range_id, a, b in spans]
    for batch_id in ids:
        store_and_join(batch_id)
    with session_scope() as s:
        leases.finish(s, node, first)
    stored_other = accept(node, other_range, make_batch(BIG, BIG + 599, group=OTHER, release="Other.Post"))
    store_and_join(stored_other)
    waiting = accept(node, other_range, make_batch(BIG + 600, BIG + 1199, group=OTHER, release="Other.Post"))

    with session_scope() as s:
        now = s.execute(text("SELECT date_trunc('minute', now())")).scalar_one()
    recent = now - PAUSE
    set_accepted_at(ids[0], recent - timedelta(minutes=30))  # outside the last 2 minutes with batches
    set_accepted_at(ids[1], recent + timedelta(seconds=5))
    set_accepted_at(ids[2], recent + timedelta(minutes=1, seconds=40))
    set_accepted_at(stored_other, recent + timedelta(minutes=1, seconds=50))
    set_accepted_at(waiting, now - timedelta(minutes=20))
    return {
        "ids": ids,
        "waiting": waiting,
        "other_range": other_range,
        "last_test_batch": recent + timedelta(minutes=1, seconds=40),
    }


def catalog_counts(engine, group: str) -> dict:
    return {
        table: scalar(
            engine, f"SELECT count(*) FROM {table} WHERE group_id = (SELECT id FROM groups WHERE name = :g)", g=group
        )
        for table in ("files", "releases", "posts")
    }


def status_json(cli_runner) -> dict:
    result = cli_runner.invoke(args=["seed", "status", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_status_json_counts_the_catalog_not_the_batches(cli_runner, clean_db, seeded):
    data = status_json(cli_runner)
    groups = {g["group"]: g for g in data["groups"]}
    for name in (TEST, OTHER):
        counted = catalog_counts(clean_db, name)
        shown = groups[name]
        assert {k: shown[k] for k in counted} == counted and shown["counted"] == "exact"
        assert counted["files"] > 0 and counted["releases"] > 0 and counted["posts"] > 0
    # Summed per batch, the test group's files and releases would be more than there are: the
    # figures above are not those sums.
    per_batch = groups[TEST]["rules"][""]
    assert per_batch["files"] > groups[TEST]["files"] and per_batch["releases"] > groups[TEST]["releases"]
    assert groups[TEST]["articles"] == per_batch["fragments"] == 2500 - 1

    test = groups[TEST]
    assert (test["ranges"], test["planned"], test["leased"], test["done"]) == (3, 0, 2, 1)
    assert (test["span"], test["covered"], test["remaining"]) == (6000, 2500, 3500)
    assert test["percent_done"] == pytest.approx(41.67)
    # The rate: the last 2 minutes that saw a batch (the first batch came half an hour before
    # them), 1,000 + 500 article numbers over 120 s: 12.5 a second, three hours after the last
    # batch; the 3,500 numbers left take 280 s at that rate.
    assert (test["article_numbers_per_second"], test["rate_seconds"]) == (12.5, 120)
    assert test["eta_seconds"] == 280.0
    assert datetime.fromisoformat(test["last_batch_at"]) == seeded["last_test_batch"]
    assert datetime.fromisoformat(test["eta_at"]) == datetime.fromisoformat(data["as_of"]) + timedelta(seconds=280)
    # The whole seed's last 2 minutes with batches: the one 20 minutes ago (the other group's
    # batch not stored yet, 600 numbers) and the test group's last (500, and 600 of the other's).
    rates = data["rates"]
    assert (rates["article_numbers_per_second"], rates["rate_seconds"]) == (round(1700 / 120, 1), 120)
    assert 20 * 60 <= rates["idle_seconds"] < 25 * 60

    other = groups[OTHER]
    assert (other["span"], other["covered"], other["percent_done"]) == (2000, 1200, 60.0)
    oldest = data["batches"]["oldest_unstored"]
    assert (oldest["id"], oldest["range_id"], oldest["group"]) == (seeded["waiting"], seeded["other_range"], OTHER)
    assert 20 * 60 <= oldest["age_seconds"] < 25 * 60
    assert (data["batches"]["pending"], data["batches"]["joined"]) == (1, 4)
    # Every time is UTC and says so.
    for moment in (
        data["as_of"],
        test["last_batch_at"],
        oldest["accepted_at"],
        rates["last_batch_at"],
        *(n["last_seen_at"] for n in data["nodes"] if n["last_seen_at"]),
    ):
        assert moment.endswith("+00:00"), moment


def test_status_text_shows_the_same_figures_aligned(cli_runner, clean_db, seeded):
    data = status_json(cli_runner)
    result = cli_runner.invoke(args=["seed", "status"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert re.fullmatch(r"as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", lines[0])

    progress = table(lines, "group", "ranges")
    test = progress[TEST]
    assert (test["covered"], test["span"], test["% done"], test["numbers/s"]) == ("2,500", "6,000", "41.7 %", "12.5")
    assert test["ETA"] == "4 min" and test["last batch"].endswith(" UTC")
    assert progress[OTHER]["% done"] == "60.0 %"

    catalog = table(lines, "group", "articles")
    for name in (TEST, OTHER):
        counted = catalog_counts(clean_db, name)
        assert {k: catalog[name][k] for k in counted} == {k: f"{v:,}" for k, v in counted.items()}
    assert catalog[TEST]["articles"] == "2,499"

    # Numbers are right-aligned: each ends where its column's header ends.
    header = next(line for line in lines if line.startswith("group") and "articles" in line)
    row = next(line for line in lines if line.startswith(TEST) and line in lines[lines.index(header) :])
    for column in ("articles", "files", "releases", "posts"):
        end = header.index(column) + len(column)
        assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (column, header, row)

    waiting = seeded["waiting"]
    assert any(
        line.startswith(f"  oldest not stored: batch {waiting} (range {seeded['other_range']}, {OTHER}),")
        and " UTC, waiting 2" in line
        for line in lines
    ), result.output
    (rate,) = [line for line in lines if line.startswith("rate: ")]
    assert rate.startswith(
        f"rate: {data['rates']['article_numbers_per_second']:,.1f} article numbers/s over the"
        " last 2 min that saw batches; last batch "
    )
    assert rate.endswith(" UTC (20 min ago)")


def table(lines: list[str], first: str, second: str) -> dict[str, dict[str, str]]:
    """The rows of the text table whose header starts with `first` and `second`, by their first
    cell, each as {column: cell} (cells are split on two spaces or more; no cell is empty)."""
    start = next(i for i, line in enumerate(lines) if re.match(rf"{first}\s+{second}\b", line))
    headers = re.split(r"\s{2,}", lines[start].strip())
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("  "):
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(headers), (headers, cells)
        rows[cells[0]] = dict(zip(headers, cells))
    return rows


def test_a_group_too_big_to_count_shows_estimates_and_says_so(cli_runner, clean_db, seeded, monkeypatch):
    with clean_db.begin() as conn:
        for table_name in ("files", "releases", "posts"):
            conn.execute(text(f"ANALYZE {table_name}"))
    monkeypatch.setattr(status_service, "EXACT_COUNT_LIMIT", 0)
    groups = {g["group"]: g for g in status_json(cli_runner)["groups"]}
    for name in (TEST, OTHER):
        assert groups[name]["counted"] == "estimated"
        for table_name, count in catalog_counts(clean_db, name).items():
            # Fresh statistics: the planner's estimate is near the count.
            assert abs(groups[name][table_name] - count) <= max(2, count // 10), (name, table_name)
    output = cli_runner.invoke(args=["seed", "status"]).output
    assert f"~{groups[TEST]['files']:,}" in output and "~: the planner's estimate" in output


def test_an_empty_seed(cli_runner, clean_db):
    data = status_json(cli_runner)
    assert data["groups"] == [] and data["batches"]["oldest_unstored"] is None
    assert data["rates"]["last_batch_at"] is None and data["rates"]["article_numbers_per_second"] == 0.0
    output = cli_runner.invoke(args=["seed", "status"]).output
    assert "rate: no batch accepted yet" in output
    with session_scope() as s:
        make_group(s, TEST)
    (group,) = status_json(cli_runner)["groups"]
    assert (group["span"], group["percent_done"], group["eta_seconds"], group["files"]) == (0, None, None, 0)


def test_the_ingest_task_says_what_its_batch_brought(client, clean_db, celery_worker, celery_app):
    with session_scope() as s:
        (seed_range,) = make_plan(s, make_group(s, TEST), [(BIG, BIG + 1999)])
        _, token = make_node(s)
        range_id = seed_range.id
    auth = {"Authorization": f"Bearer {token}"}
    assert client.post(f"{API}/lease", headers=auth).status_code == 200
    assert post_batch(client, auth, range_id, make_batch(BIG, BIG + 999, skip={BIG + 3})).status_code == 202
    wait_until(lambda: scalar(clean_db, "SELECT state FROM seed_batches") == "joined", 60, "the batch joined")
    batch_id = scalar(clean_db, "SELECT id FROM seed_batches")
    kept = (
        scalar(clean_db, "SELECT files FROM rule_counts WHERE rule = ''"),
        scalar(clean_db, "SELECT releases FROM rule_counts WHERE rule = ''"),
    )
    # The first run's result went nowhere (results are not kept); a redelivery returns the same figures.
    result = task_result(celery_app, "ingest.store_batch", (batch_id,), worker=celery_worker, ignore_result=False)
    assert {k: result[k] for k in ("batch_id", "group", "range", "first", "last", "articles", "dropped", "state")} == {
        "batch_id": batch_id,
        "group": TEST,
        "range": range_id,
        "first": BIG,
        "last": BIG + 999,
        "articles": 999,
        "dropped": 0,
        "state": "already_stored",
    }
    assert (result["files"], result["releases"]) == kept and kept[0] > 0
    assert result["seconds"] >= result["store_seconds"] >= 0 and result["join_seconds"] >= 0


def test_housekeeping_tasks_send_no_events_ingest_does(celery_app):
    from celery.signals import beat_init

    celery_app.loader.import_default_modules()  # the task modules, as a worker imports them

    for name in ("leases.expire", "batches.requeue", "control.queue_depth", "plan.live"):
        assert celery_app.tasks[name].send_events is False, name
    for name in ("ingest.store_batch", "releases.repair", "plan.replan"):
        assert celery_app.tasks[name].send_events is True, name
    # Beat sends no "task-sent" for its schedule; the data center's other senders (the API, the
    # requeue sweep) do.
    assert celery_app.conf.task_send_sent_event is True

    class Beat:
        app = celery_app

    try:
        beat_init.send(sender=Beat())
        assert celery_app.conf.task_send_sent_event is False
    finally:
        celery_app.conf.task_send_sent_event = True


def test_status_times_are_utc_whatever_the_sessions_zone(clean_db, seeded):
    with session_scope() as s:
        # SET LOCAL: the zone ends with the transaction, not kept by the pooled connection for the next test.
        s.execute(text("SET LOCAL TIME ZONE 'America/New_York'"))
        data = status_service.seed_status(s).as_json()
    assert data["as_of"].utcoffset() == timedelta(0) and data["as_of"].tzinfo == timezone.utc
    (test,) = [g for g in data["groups"] if g["group"] == TEST]
    assert test["last_batch_at"] == seeded["last_test_batch"] and test["last_batch_at"].tzinfo == timezone.utc


def test_the_apis_status_is_the_clis(client, cli_runner, clean_db, seeded):
    """GET /api/v1/seed/status with an operator key answers the same figures as --json prints,
    times in ISO 8601 with their zone alike."""
    from app.services import operators

    with session_scope() as s:
        key = operators.create_key(s, "ops")[1]
    answer = client.get(f"{API}/status", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    served, printed = answer.get_json(), status_json(cli_runner)
    # What moves with the clock between the two looks.
    for data in (served, printed):
        data.pop("as_of")
        data["rates"].pop("idle_seconds")
        data["batches"]["oldest_unstored"].pop("age_seconds")
        for group in data["groups"]:
            group.pop("eta_at")
    assert served == printed
    assert served["groups"][0]["last_batch_at"].endswith("+00:00")
