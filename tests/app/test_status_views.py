"""One status, every view: the web page, `flask seed status --json`, its text, the API and
/metrics show the same figures of the seed (app.services.status is their one read model), each
equal to what the tables hold; and no look at the status reads every batch ever accepted."""

from __future__ import annotations

import re

from sqlalchemy import select, text

from app.db import session_scope
from app.models import SeedNode
from app.models.ranges import RANGE_STATUSES
from app.services import status as status_service
from tests.app.factories import BIG, accept, make_node
from tests.app.overview import make_batch
from tests.app.test_metrics import sample, scrape
from tests.app import test_status
from tests.app.test_status import OTHER, TEST, status_json
from tests.app.test_web import log_in, page
from tests.fixtures.queries import query


# test_status' batches and ranges: two groups, a range done, batches joined and one waiting.
seeded = test_status.seeded


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def failed_batch(other_range: int) -> int:
    """A batch of the other group's range that gave up after its attempts."""
    with session_scope() as s:
        node = s.scalars(select(SeedNode)).one()
    batch_id = accept(node, other_range, make_batch(BIG + 1200, BIG + 1399, group=OTHER, release="Other.Post"))
    with session_scope() as s:
        s.execute(
            text("UPDATE seed_batches SET state = 'failed', attempts = 3, error = 'x' WHERE id = :b"), {"b": batch_id}
        )
    return batch_id


def test_the_page_the_cli_the_api_and_the_metrics_show_the_same_figures(
    client,
    cli_runner,
    clean_db,
    seeded,
    operator_key,
):
    failed_batch(seeded["other_range"])
    with session_scope() as s:
        make_node(s, "edge-idle")  # a node that holds nothing
    truth_ranges = {
        (group, status): count
        for group, status, count in query(
            clean_db,
            "SELECT g.name, r.status, count(*) FROM seed_ranges r JOIN groups g ON g.id = r.group_id GROUP BY 1, 2",
        )
    }
    truth_batches = dict(query(clean_db, "SELECT state, count(*) FROM seed_batches GROUP BY state"))
    truth_leases = dict(
        query(
            clean_db,
            "SELECT n.name, count(r.id) FROM seed_nodes n"
            " LEFT JOIN seed_ranges r ON r.node_id = n.id AND r.status = 'leased' GROUP BY n.name",
        )
    )

    printed = status_json(cli_runner)
    served = client.get("/api/v1/seed/status", headers={"Authorization": f"Bearer {operator_key}"}).get_json()
    samples = scrape(client, operator_key)
    log_in(client, operator_key)
    shown = page(client.get("/"))
    text_lines = cli_runner.invoke(args=["seed", "status"]).output.splitlines()

    for name in (TEST, OTHER):
        truth = {status: truth_ranges.get((name, status), 0) for status in RANGE_STATUSES}
        (cli,) = [g for g in printed["groups"] if g["group"] == name]
        (api,) = [g for g in served["groups"] if g["group"] == name]
        (row,) = [r for r in shown.rows("groups") if r and r[0] == name]
        (line,) = [ln.split() for ln in text_lines if ln.startswith(name + " ")][:1]
        views = {
            "cli": {s: cli[s] for s in ("planned", "leased", "done")} | {"expired": cli["expired_ranges"]},
            "api": {s: api[s] for s in ("planned", "leased", "done")} | {"expired": api["expired_ranges"]},
            "metrics": {s: sample(samples, "seed_ranges", group=name, state=s) for s in RANGE_STATUSES},
            # The page shows planned, leased and done (cells 1, 3, 5); the text also the expired.
            "page": {"planned": number(row[1]), "leased": number(row[3]), "done": number(row[5])},
            "text": dict(zip(("planned", "leased", "done", "expired"), map(number, line[2:6]))),
        }
        for view, figures in views.items():
            assert figures == {s: truth[s] for s in figures}, (name, view, figures, truth)
    assert sum(truth_ranges.values()) == 4 and truth_ranges[(TEST, "done")] == 1

    batches = {
        "accepted": truth_batches.get("accepted", 0),
        "stored": truth_batches.get("stored", 0),
        "joined": truth_batches.get("joined", 0),
        "failed": truth_batches.get("failed", 0),
    }
    assert batches == {"accepted": 1, "stored": 0, "joined": 4, "failed": 1}
    summary = re.search(
        r"batches: (\S+) waiting, (\S+) stored, (\S+) joined, (\S+) failed", " ".join(shown.by_id["summary"].split())
    )
    assert summary is not None, shown.by_id["summary"]
    (text_batches,) = [ln for ln in text_lines if ln.startswith("batches: ")]
    counted = re.fullmatch(r"batches: (\S+) done, (\S+) to store, (\S+) to join, (\S+) failed", text_batches)
    assert counted is not None, text_batches
    for view, figures in {
        "cli": [printed["batches"][k] for k in ("pending", "stored", "joined", "failed")],
        "api": [served["batches"][k] for k in ("pending", "stored", "joined", "failed")],
        "page": [number(n) for n in summary.groups()],
        "text": [number(counted[2]), number(counted[3]), number(counted[1]), number(counted[4])],
    }.items():
        assert figures == list(batches.values()), (view, figures)
    assert [sample(samples, "seed_batches", state=s) for s in ("accepted", "stored", "failed")] == [1, 0, 1]

    assert truth_leases == {"edge-1": 3, "edge-idle": 0}
    for name, leases in truth_leases.items():
        (cli_node,) = [n for n in printed["nodes"] if n["name"] == name]
        (row,) = [r for r in shown.rows("nodes") if r and r[0] == name]
        assert cli_node["leases"] == number(row[2]) == sample(samples, "seed_node_leased_ranges", node=name) == leases


def batches_read(session) -> int:
    """Rows of seed_batches and entries of its indexes this transaction has read so far."""
    return session.scalar(
        text(
            "SELECT pg_stat_get_xact_tuples_returned('seed_batches'::regclass)"
            " + coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)"
            " FROM pg_index WHERE indrelid = 'seed_batches'::regclass"
        )
    )


def test_no_look_at_the_status_reads_every_batch(clean_db, seeded, monkeypatch):
    """20,000 batches joined long ago beside the seeded ones: the operator's and a node's status
    and the gauges' overview each read a few dozen batches, not the table (the rate looks among
    the latest 50 here)."""
    monkeypatch.setattr(status_service, "RATE_BATCHES", 50)
    filler = 20_000
    with session_scope() as s:
        s.execute(
            text(
                "INSERT INTO seed_batches (range_id, batch_from, batch_to, content_type, body_bytes, state, accepted_at)"
                " SELECT :r, :base + 10 * n, :base + 10 * n + 9, 'application/msgpack', 0, 'joined',"
                " now() - interval '30 days' + n * interval '1 second' FROM generate_series(0, :n - 1) n"
            ),
            {"r": seeded["other_range"], "base": BIG + 100_000, "n": filler},
        )
        s.execute(
            text("UPDATE seed_ranges SET batches = batches + :n WHERE id = :r"),
            {"n": filler, "r": seeded["other_range"]},
        )
        s.execute(text("ANALYZE seed_batches"))
    looks = {
        "operator": status_service.seed_status,
        "node": lambda s: status_service.node_status(s, s.scalars(select(SeedNode)).one()),
        "overview": status_service.overview,
    }
    for look, read in looks.items():
        with session_scope() as s:
            before = batches_read(s)
            figures = read(s)
            seen = batches_read(s) - before
        assert seen < 200, (look, seen)
    assert figures.batches.joined == 4 + filler  # counted all the same (the overview's)


def test_the_rate_leaves_out_the_minute_its_batch_limit_cut(clean_db, seeded, monkeypatch):
    """With RATE_BATCHES = 3 the latest three batches are the other group's waiting one (20 minutes
    ago), its stored one and the test group's last (one minute, hours ago): that minute may hold
    more batches than were taken, so it is left out, and the seed's rate is the waiting batch's
    minute alone (600 numbers in 60 s); the test group, with nothing left, shows no rate."""
    monkeypatch.setattr(status_service, "RATE_BATCHES", 3)
    with session_scope() as s:
        figures = status_service.seed_status(s)
    assert (figures.rate.article_numbers_per_second, figures.rate.rate_seconds) == (10.0, 60)
    (test,) = [g for g in figures.groups if g.name == TEST]
    assert (test.rate.article_numbers_per_second, test.rate.last_batch_at) == (0.0, None)
    monkeypatch.setattr(status_service, "RATE_BATCHES", 1_000)  # all five: both minutes, as before
    with session_scope() as s:
        figures = status_service.seed_status(s)
    assert (figures.rate.article_numbers_per_second, figures.rate.rate_seconds) == (round(1700 / 120, 1), 120)
