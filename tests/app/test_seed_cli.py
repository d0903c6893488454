"""The operator's `flask seed ...` commands on real services: range, spool, status, token,
rules, batches retry, the store bench (and bench/store.py run alone); and a poison batch that
shows in status."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select, text

from app.db import session_scope
from app.models import SeedBatch
from app.services import leases
from app.services.groups import get_group
from app.services.ingest import accept as acceptance
from app.services.ingest import lifecycle, store
from app.services.credentials import hash_token
from edge.digest.batch import BatchFormatError
from edge.digest.settings import NNTPSettings, TLSMode
from simnews.generator import Config, generate
from tests.app.factories import BIG, make_group, make_node, make_plan

STORE_BENCH = Path(__file__).resolve().parents[2] / "bench" / "store.py"


@pytest.fixture
def posted_range(inn, fresh_group, cli_runner, flask_app):
    """A fresh INN group of 3,000 generated articles, added and planned as one range."""
    articles = list(generate(3_000, Config(groups=(fresh_group,), namespace=fresh_group)))
    assert inn.post(articles) == 3_000
    settings = flask_app.config["SETTINGS"]
    flask_app.config["SETTINGS"] = dataclasses.replace(
        settings,
        nntp=NNTPSettings(host=inn.host, port=inn.reader_port, tls=TLSMode.NONE),
        chunk_size=400,
        batch_chunks=3,
    )
    assert cli_runner.invoke(args=["seed", "groups", "add", fresh_group]).exit_code == 0
    with session_scope() as s:
        (seed_range,) = make_plan(s, get_group(s, fresh_group), [(1, 3_000)])
        range_id = seed_range.id
    try:
        yield range_id, {a.message_id: a.truth for a in articles}
    finally:
        flask_app.config["SETTINGS"] = settings


def test_range_runs_in_the_data_center_into_the_tables(cli_runner, posted_range, clean_db):
    range_id, truth = posted_range
    result = cli_runner.invoke(args=["seed", "range", str(range_id), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["next_id"] == 3_001 and summary["batches"] == 3  # 8 chunks of 400, 3 per batch
    with clean_db.connect() as conn:
        stored = conn.execute(text("SELECT message_id FROM fragments_with_ids")).scalars().all()
        dropped = conn.execute(
            text("SELECT coalesce(sum(fragments), 0) FROM rule_counts WHERE rule = 'executable'")
        ).scalar_one()
        status = conn.execute(text("SELECT status, next_id FROM seed_ranges")).one()
    kept = {m for m, t in truth.items() if not t.is_flood}
    assert len(stored) == len(set(stored)) and set(stored) == kept
    assert dropped == sum(t.is_flood for t in truth.values()) > 0
    assert tuple(status) == ("done", 3_001)
    again = cli_runner.invoke(args=["seed", "range", str(range_id)])
    assert again.exit_code == 1 and "is done" in again.output


def test_spool_then_stream(cli_runner, posted_range, clean_db):
    range_id, truth = posted_range
    result = cli_runner.invoke(args=["seed", "spool", str(range_id), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"range_id": range_id, "spooled": True, "lines": 3000}
    with clean_db.connect() as conn:
        chunks = conn.execute(text("SELECT chunk_from, chunk_to, lines FROM spool_chunks ORDER BY chunk_from")).all()
        spooled = conn.execute(text("SELECT spooled FROM seed_ranges")).scalar_one()
    assert [c.chunk_from for c in chunks] == list(range(1, 3_001, 400)) and sum(c.lines for c in chunks) == 3_000
    assert spooled is True


def test_status_token_and_rules(cli_runner, clean_db):
    assert cli_runner.invoke(args=["seed", "groups", "add", "alt.binaries.test"]).exit_code == 0
    created = json.loads(cli_runner.invoke(args=["seed", "nodes", "create", "edge-1", "--json"]).output)
    rotated = json.loads(cli_runner.invoke(args=["seed", "token", "edge-1", "--json"]).output)
    assert rotated["token"] != created["token"]
    with clean_db.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM seed_nodes")).scalar_one()
    assert bytes(stored) == hash_token(rotated["token"])
    assert cli_runner.invoke(args=["seed", "token", "ghost"]).exit_code == 1

    added = cli_runner.invoke(
        args=[
            "seed",
            "rules",
            "add",
            "no-spam",
            "--field",
            "poster",
            "--pattern",
            "spam@",
            "--groups",
            "alt.binaries.*",
        ]
    )
    assert added.exit_code == 0, added.output
    bad = cli_runner.invoke(args=["seed", "rules", "add", "broken", "--field", "subject", "--pattern", "(unclosed"])
    assert bad.exit_code == 1 and "bad pattern" in bad.output
    assert (
        cli_runner.invoke(args=["seed", "rules", "add", "no-spam", "--field", "poster", "--pattern", "x"]).exit_code
        == 1
    )
    listed = json.loads(cli_runner.invoke(args=["seed", "rules", "list", "--json"]).output)
    assert listed == [
        {
            "name": "no-spam",
            "field": "poster",
            "pattern": "spam@",
            "action": "drop",
            "groups": "alt.binaries.*",
            "enabled": True,
        },
        {
            "name": "inspected-executable",
            "field": "flag",
            "pattern": "executable",
            "action": "drop",
            "groups": None,
            "enabled": True,
            "builtin": True,
            "posts_dropped": 0,
        },
    ]

    status = cli_runner.invoke(args=["seed", "status"])
    assert status.exit_code == 0 and "alt.binaries.test" in status.output and "edge-1" in status.output
    data = json.loads(cli_runner.invoke(args=["seed", "status", "--json"]).output)
    assert data["groups"][0]["group"] == "alt.binaries.test" and data["batches"]["failed"] == 0
    assert cli_runner.invoke(args=["seed", "rules", "remove", "no-spam"]).exit_code == 0
    assert cli_runner.invoke(args=["seed", "rules", "remove", "no-spam"]).exit_code == 1


def test_a_poison_batch_stops_after_its_attempts_shows_in_status_and_can_be_retried(
    cli_runner, clean_db, clean_redis, no_task_left
):
    # clean_redis and no_task_left: the store task the retry enqueues, and the worker's retries of
    # it, should not reach a later test (one that does finds no batch of its id: clean_db keeps
    # the batches' ids going).
    assert cli_runner.invoke(args=["seed", "groups", "add", "alt.binaries.test"]).exit_code == 0
    with session_scope() as s:
        node, _ = make_node(s)
        (seed_range,) = make_plan(s, get_group(s, "alt.binaries.test"), [(1, 100)])
        leases.lease(s, node, max_leases=1)
        accepted = acceptance.accept_batch(
            s,
            node,
            seed_range.id,
            batch_from=1,
            batch_to=100,
            body=b"\x93not a batch",
            content_type="application/msgpack",
            content_encoding="",
        )
    for _ in range(3):
        with session_scope() as s:
            with pytest.raises(BatchFormatError):
                store.store_batch(s, accepted.batch_id)
        with session_scope() as s:
            state = lifecycle.record_failure(s, accepted.batch_id, "BatchFormatError: undecodable", 3)
    assert state == "failed"
    data = json.loads(cli_runner.invoke(args=["seed", "status", "--json"]).output)
    assert data["batches"]["failed"] == 1
    assert data["batches"]["failed_examples"][0]["error"] == "BatchFormatError: undecodable"
    assert "failed batch" in cli_runner.invoke(args=["seed", "status"]).output
    retried = cli_runner.invoke(args=["seed", "batches", "retry"])
    assert retried.exit_code == 0 and "1 failed batches back to accepted" in retried.output
    with session_scope() as s:
        row = s.scalar(select(SeedBatch))
        assert (row.state, row.attempts) == ("accepted", 0)


@pytest.mark.parametrize("catalog", [[], ["--catalog", "3000"]], ids=["empty catalog", "catalog of 3000 files"])
def test_store_bench_reports_and_leaves_nothing_behind(cli_runner, clean_db, catalog):
    result = cli_runner.invoke(args=["seed", "bench", "--store", "--articles", "30000", "--rounds", "2", *catalog])
    assert result.exit_code == 0, result.output
    _assert_store_bench_figures(result.output, clean_db)


def test_store_bench_runs_as_a_script(service_env, clean_db):
    result = subprocess.run(
        [sys.executable, str(STORE_BENCH), "--articles", "30000", "--rounds", "1"],
        env=service_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("digesting 30000 generated articles")
    _assert_store_bench_figures(result.stdout, clean_db)


def _assert_store_bench_figures(output: str, clean_db) -> None:
    figures = json.loads(output.strip().splitlines()[-1])
    assert figures["batches"] == 1 and figures["fragments"] > 20_000 and figures["release_chunks"] > 100
    # store_seconds is printed to the millisecond: the figure agrees with it up to that rounding
    # (a store of some 30 ms made a 1% tolerance fail on a fast machine).
    assert figures["ms_per_release_chunk"] == pytest.approx(
        1000 * figures["store_seconds"] / figures["release_chunks"],
        abs=1000 * 0.0005 / figures["release_chunks"] + 1e-4,
    )
    with clean_db.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM groups")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM releases")).scalar_one() == 0
        assert (
            conn.execute(text("SELECT count(*) FROM pg_class WHERE relname LIKE 'bench_raw_fragments%'")).scalar_one()
            == 0
        )


def test_status_shows_a_range_that_failed_on_a_node(cli_runner, clean_db):
    with session_scope() as session:
        group = make_group(session)
        node, _ = make_node(session)
        (failed, _) = make_plan(session, group, [(BIG + 1000, BIG + 1999), (BIG, BIG + 999)])
        leases.lease(session, node, max_leases=1)
        leases.release(session, node, failed.id, failure="Refused: 413 batch_too_large")
        failed_id = failed.id
    status = cli_runner.invoke(args=["seed", "status"])
    assert status.exit_code == 0, status.output
    assert (
        f"range {failed_id} (alt.binaries.test, {BIG + 1000:,}-{BIG + 1999:,}, planned) failed once on a"
        " node; last: edge-1: Refused: 413 batch_too_large"
    ) in status.output
    (shown,) = json.loads(cli_runner.invoke(args=["seed", "status", "--json"]).output)["failed_ranges"]
    assert (shown["id"], shown["failures"], shown["next_id"]) == (failed_id, 1, BIG + 1000)
