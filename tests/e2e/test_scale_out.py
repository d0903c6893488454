"""End to end, scaled out as in production: the operator's `flask seed` commands, gunicorn with 3
workers over HTTPS, two Celery workers on the ingest queue and one on repair/control, two
`edge run` nodes on both groups through a provider with holes. The catalog equals the ground
truth, and releases split across batches and ranges come out whole."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import text

from tests.e2e.conftest import FRENCH, GROUPS, PS2
from tests.e2e.truth import check_ground_truth

pytestmark = pytest.mark.services


def test_two_nodes_on_both_groups_store_exactly_the_ground_truth(dc, news):
    dc.flask("groups", "add", FRENCH, PS2)
    tokens = {
        name: json.loads(dc.flask("nodes", "create", name, "--json"))["token"] for name in ("edge-paris", "edge-lyon")
    }
    with news.provider() as proxy:
        planned = json.loads(
            dc.flask("plan", "--days", "3650", "--json", NNTP_HOST="127.0.0.1", NNTP_PORT=str(proxy.port), NNTP_SSL="0")
        )
        assert sorted((p["group"], p["first_id"], p["last_id"]) for p in planned) == sorted(
            (g, news.groups[g].low, news.groups[g].high) for g in GROUPS
        )
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(120) == 0, node.log()
    dc.wait_finished()

    reports = check_ground_truth(dc.engine, news.truths())
    for group in GROUPS:
        # The test proves something only if releases really were split.
        assert reports[group].releases_over_batches > 0 and reports[group].releases_over_ranges > 0, reports[group]
    # Scaled out: both nodes worked, both ingest workers stored batches.
    done = {node.name: {e["range"] for e in node.named("done")} for node in nodes}
    assert all(done.values()) and not set.intersection(*done.values()), done
    assert sum(map(len, done.values())) == sum(r.ranges for r in reports.values())
    for name in ("e2e-ingest-1", "e2e-ingest-2"):
        stored = re.findall(r"Task ingest\.store_batch\[\S+\] succeeded", dc.workers[name].output())
        assert stored, f"{name} stored no batch"
    # What the operator sees agrees.
    status = {g["group"]: g for g in dc.status()["groups"]}
    for group in GROUPS:
        truth = news.groups[group]
        assert status[group]["done"] == status[group]["ranges"] == reports[group].ranges
        assert status[group]["articles"] == len(truth.seen)
        assert status[group]["missing"] == len(truth.hidden)
        assert status[group]["rules"]["executable"]["fragments"] == len(truth.floods)
        assert status[group]["rules"][""]["fragments"] == len(truth.kept)

    # The check is not vacuous: a catalog spoiled in the usual ways fails it (rolled back).
    spoilers = {
        "articles lost": "UPDATE fragment_packs SET file_keys = file_keys[2:], articles = articles[2:],"
        " parts = parts[2:], bytes = bytes[2:], host_ids = host_ids[2:], message_locals = message_locals[2:]"
        " WHERE (SELECT min(article) FROM fragments) = ANY(articles)",
        "stored more than once": "INSERT INTO fragment_packs SELECT * FROM fragment_packs"
        " WHERE (SELECT max(article) FROM fragments) = ANY(articles)",
        "missing articles": "UPDATE seed_ranges SET missing = missing + 1 WHERE id = 1",
        "the executable rule counts": "UPDATE rule_counts SET fragments = fragments + 1"
        " WHERE rule = 'executable' AND range_id = 2",
        "parts_seen": "UPDATE releases SET parts_seen = parts_seen - 1"
        " WHERE key = (SELECT min(key) FROM releases WHERE parts_seen > 1)",
        "not all joined": "UPDATE seed_batches SET state = 'stored' WHERE id = 3",
    }
    with dc.engine.connect() as conn:
        transaction = conn.begin()
        for statement in spoilers.values():
            conn.execute(text(statement))
        with pytest.raises(AssertionError) as spoiled:
            check_ground_truth(conn, news.truths())
        transaction.rollback()
    for words in spoilers:
        assert words in str(spoiled.value), words
