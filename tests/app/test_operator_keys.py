"""Operator keys on the real database: made and revoked with `flask seed operators`, stored only
hashed; with one, GET /api/v1/seed/status shows the whole seed, with a node token only what
concerns that node, with anything else 401."""

from __future__ import annotations

import json

import pytest
from flask import Flask
from sqlalchemy import text

from app.api.errors import register_error_handlers
from app.api.operator import scoped_status
from app.db import session_scope
from app.models import SeedBatch
from app.services import credentials, leases, operators
from app.services.nodes import set_enabled
from app.services.credentials import OPERATOR_KEY_PREFIX, hash_token
from tests.fixtures.queries import scalar
from tests.app.factories import BIG, make_group, make_node, make_plan

STATUS = "/api/v1/seed/status"
SECRET_ERROR = "bigint out of range in a batch of edge-b"


def bearer(secret: str) -> dict:
    return {"Authorization": f"Bearer {secret}"}


def create_key(cli_runner, name: str) -> str:
    result = cli_runner.invoke(args=["seed", "operators", "create", name, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["key"]


def test_operators_create_prints_a_key_once_that_is_stored_only_hashed(cli_runner, clean_db):
    key = create_key(cli_runner, "ops-1")
    assert key.startswith(OPERATOR_KEY_PREFIX) and len(key) >= 40
    other = create_key(cli_runner, "ops-2")
    assert other != key
    with clean_db.connect() as conn:
        dump = conn.execute(text("SELECT row_to_json(k)::text FROM operator_keys k")).scalars().all()
        stored = conn.execute(text("SELECT key_hash FROM operator_keys WHERE name = 'ops-1'")).scalar_one()
    assert len(dump) == 2 and not any(key in row or other in row for row in dump)
    assert bytes(stored) == hash_token(key)
    shown = cli_runner.invoke(args=["seed", "operators", "create", "ops-3"])
    assert shown.exit_code == 0 and "shown only this once" in shown.output
    assert shown.output.strip().splitlines()[-1].startswith(OPERATOR_KEY_PREFIX)


def test_operators_list_revoke_and_errors(cli_runner, clean_db):
    create_key(cli_runner, "ops-1")
    dup = cli_runner.invoke(args=["seed", "operators", "create", "ops-1"])
    assert dup.exit_code == 1 and "operator key name already in use: ops-1" in dup.output
    bad = cli_runner.invoke(args=["seed", "operators", "create", "bad name!"])
    assert bad.exit_code == 1 and "not an operator key name" in bad.output
    listed = json.loads(cli_runner.invoke(args=["seed", "operators", "list", "--json"]).output)
    assert [k["name"] for k in listed] == ["ops-1"] and "key" not in listed[0]
    table = cli_runner.invoke(args=["seed", "operators", "list"]).output
    assert table.splitlines()[0].split() == ["id", "name", "created_at", "last_used_at", "revoked_at"]
    assert listed[0]["revoked_at"] is None
    revoked = cli_runner.invoke(args=["seed", "operators", "revoke", "ops-1", "--json"])
    assert revoked.exit_code == 0, revoked.output
    first = json.loads(revoked.output)
    assert first["name"] == "ops-1" and first["revoked_at"] is not None
    # The row stays, revoked (its name is not given again); revoking again keeps the first time.
    (kept,) = json.loads(cli_runner.invoke(args=["seed", "operators", "list", "--json"]).output)
    assert (kept["name"], kept["revoked_at"]) == ("ops-1", first["revoked_at"])
    again = cli_runner.invoke(args=["seed", "operators", "revoke", "ops-1"])
    assert again.exit_code == 0 and "revoked operator key ops-1" in again.output
    assert (
        json.loads(cli_runner.invoke(args=["seed", "operators", "list", "--json"]).output)[0]["revoked_at"]
        == (first["revoked_at"])
    )
    reused = cli_runner.invoke(args=["seed", "operators", "create", "ops-1"])
    assert reused.exit_code == 1 and "operator key name already in use: ops-1" in reused.output
    unknown = cli_runner.invoke(args=["seed", "operators", "revoke", "ops-2"])
    assert unknown.exit_code == 1 and "no such operator key: ops-2" in unknown.output


@pytest.fixture
def status_client(flask_app, clean_db, clean_redis):
    """The status view as the API serves it (app.api.operator.scoped_status), on its URL."""
    app = Flask("status_under_test")
    app.config.update(SETTINGS=flask_app.config["SETTINGS"], TESTING=True)
    register_error_handlers(app)
    app.add_url_rule(STATUS, view_func=scoped_status, methods=["GET"])
    return app.test_client()


@pytest.fixture
def two_nodes(status_client):
    """edge-a and edge-b each hold a range; edge-b gave a third back as failed and has a failed batch."""
    with session_scope() as s:
        group = make_group(s)
        node_a, token_a = make_node(s, "edge-a")
        node_b, token_b = make_node(s, "edge-b")
        ranges = make_plan(s, group, [(BIG, BIG + 999), (BIG + 1000, BIG + 1999), (BIG + 2000, BIG + 2999)])
        ids = [r.id for r in ranges]
        held = {}
        for node in (node_a, node_b, node_b):
            granted = leases.lease(s, node, max_leases=6)
            held.setdefault(node.name, []).append(granted.range_id)
        leases.release(s, node_b, held["edge-b"][1], failure="the server answered 503 to OVER")
        s.add(
            SeedBatch(
                range_id=held["edge-b"][0],
                node_id=node_b.id,
                batch_from=BIG + 1000,
                batch_to=BIG + 1099,
                body=b"",
                content_type="application/x-msgpack",
                body_bytes=0,
                state="failed",
                attempts=5,
                error=SECRET_ERROR,
            )
        )
    return {"a": bearer(token_a), "b": bearer(token_b), "ranges": ids, "held": held}


def test_an_operator_key_sees_the_whole_status(status_client, two_nodes, cli_runner, clean_db):
    key = create_key(cli_runner, "ops-1")
    answer = status_client.get(STATUS, headers=bearer(key))
    assert answer.status_code == 200, answer.get_json()
    data = answer.get_json()
    assert data["scope"] == "operator"
    assert [n["name"] for n in data["nodes"]] == ["edge-a", "edge-b"]
    assert sorted((r["node"], r["id"]) for r in data["leased_ranges"]) == sorted(
        [("edge-a", two_nodes["held"]["edge-a"][0]), ("edge-b", two_nodes["held"]["edge-b"][0])]
    )
    assert [r["last_failure"] for r in data["failed_ranges"]] == ["edge-b: the server answered 503 to OVER"]
    assert [b["error"] for b in data["batches"]["failed_examples"]] == [SECRET_ERROR]
    with clean_db.connect() as conn:
        assert conn.execute(text("SELECT last_used_at IS NOT NULL FROM operator_keys")).scalar_one()
    # The CLI is an operator too: the same whole view.
    printed = json.loads(cli_runner.invoke(args=["seed", "status", "--json"]).output)
    assert printed["scope"] == "operator" and [n["name"] for n in printed["nodes"]] == ["edge-a", "edge-b"]
    assert printed["failed_ranges"] == json.loads(json.dumps(data["failed_ranges"]))


def test_a_node_token_sees_only_what_concerns_its_node(status_client, two_nodes):
    answer = status_client.get(STATUS, headers=two_nodes["a"])
    assert answer.status_code == 200
    data = answer.get_json()
    assert (data["scope"], data["node"]) == ("node", "edge-a")
    assert "nodes" not in data
    # The plan's totals, whoever holds its ranges.
    group = data["groups"][0]
    assert (group["ranges"], group["leased"], group["planned"]) == (3, 2, 1)
    assert (data["batches"]["failed"], data["batches"]["failed_examples"]) == (1, [])
    assert [r["id"] for r in data["leased_ranges"]] == two_nodes["held"]["edge-a"]
    assert data["failed_ranges"] == []
    # No other node's name, failure or batch error anywhere in the answer.
    shown = answer.get_data(as_text=True)
    assert "edge-b" not in shown and "the server answered" not in shown and SECRET_ERROR not in shown

    own = status_client.get(STATUS, headers=two_nodes["b"]).get_json()
    assert (own["scope"], own["node"]) == ("node", "edge-b")
    assert [r["id"] for r in own["leased_ranges"]] == two_nodes["held"]["edge-b"][:1]
    assert [r["last_failure"] for r in own["failed_ranges"]] == ["edge-b: the server answered 503 to OVER"]
    assert [b["error"] for b in own["batches"]["failed_examples"]] == [SECRET_ERROR]
    assert "edge-a" not in json.dumps(own)


def test_anything_else_gets_401(status_client, two_nodes, cli_runner):
    key = create_key(cli_runner, "ops-1")
    for headers in (
        {},
        bearer("seedop_not-a-key"),
        bearer("seed_not-a-token"),
        bearer("x" * 300),
        {"Authorization": f"Basic {key}"},
    ):
        answer = status_client.get(STATUS, headers=headers)
        assert answer.status_code == 401, headers
        assert answer.get_json()["error"] == "unauthorized"
        assert "WWW-Authenticate" in answer.headers
    assert cli_runner.invoke(args=["seed", "operators", "revoke", "ops-1"]).exit_code == 0
    assert status_client.get(STATUS, headers=bearer(key)).status_code == 401
    with session_scope() as s:
        set_enabled(s, "edge-a", False)
    assert status_client.get(STATUS, headers=two_nodes["a"]).status_code == 401


def test_a_keys_last_use_is_written_at_most_once_in_the_policys_interval(clean_db):
    """credentials.LAST_USE_SECONDS, for operator keys as for nodes: a look within it leaves the
    last use as it is, the first one after it writes it again; a revoked key is refused and its
    last use left alone."""
    with session_scope() as s:
        _, secret = operators.create_key(s, "ops-1")
    last_use = "SELECT last_used_at FROM operator_keys WHERE name = 'ops-1'"
    with session_scope() as s:
        assert operators.authenticate(s, secret) is not None
    first = scalar(clean_db, last_use)
    assert first is not None
    with session_scope() as s:
        assert operators.authenticate(s, secret) is not None
    assert scalar(clean_db, last_use) == first
    back = credentials.LAST_USE_SECONDS + 1
    with session_scope() as s:
        s.execute(text(f"UPDATE operator_keys SET last_used_at = last_used_at - interval '{back} seconds'"))
    with session_scope() as s:
        assert operators.authenticate(s, secret) is not None
    assert scalar(clean_db, last_use) > first
    with session_scope() as s:
        operators.revoke_key(s, "ops-1")
        s.execute(text("UPDATE operator_keys SET last_used_at = NULL"))
    with session_scope() as s:
        assert operators.authenticate(s, secret) is None
    assert scalar(clean_db, last_use) is None
