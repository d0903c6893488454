"""A group's, a node's and a rule's life cycle through `flask seed ...` on the real database:
disable and enable, remove with everything of it, a node deleted with its leases given back,
rules switched off and on; and --json on every command that changes something."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select, text

from app.db import session_scope
from app.models import SeedRange
from app.services import grabs, leases
from app.services import nodes as node_service
from app.services.groups import get_group
from app.services.ingest import posts, store
from app.services.planner import groups_to_plan
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import make_batch
from tests.fixtures.queries import query, scalar

API = "/api/v1/seed"
A, B = "alt.binaries.test", "alt.binaries.other"

# Each table's rows of group :g, counted independently of the code under test.
GROUP_ROWS = {
    "groups": "SELECT count(*) FROM groups WHERE id = :g",
    "seed_plans": "SELECT count(*) FROM seed_plans WHERE group_id = :g",
    "seed_ranges": "SELECT count(*) FROM seed_ranges WHERE group_id = :g",
    "seed_batches": "SELECT count(*) FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id WHERE r.group_id = :g",
    "stored_fragments": "SELECT count(*) FROM stored_fragments s JOIN seed_batches b ON b.id = s.batch_id"
    " JOIN seed_ranges r ON r.id = b.range_id WHERE r.group_id = :g",
    "spool_chunks": "SELECT count(*) FROM spool_chunks s JOIN seed_ranges r ON r.id = s.range_id WHERE r.group_id = :g",
    **{
        t: f"SELECT count(*) FROM {t} WHERE group_id = :g"
        for t in (
            "files",
            "fragment_packs",
            "release_chunks",
            "releases",
            "release_posts",
            "post_grabs",
            "post_words",
            "rule_counts",
        )
    },
}


def rows_of(engine, group_id: int) -> dict[str, int]:
    return {table: scalar(engine, sql, g=group_id) for table, sql in GROUP_ROWS.items()}


def invoke(cli_runner, *args, input=None):
    return cli_runner.invoke(args=["seed", *args], input=input)


def ok_json(cli_runner, *args, input=None):
    """The one JSON document a changing command prints with --json (its stdout alone)."""
    result = invoke(cli_runner, *args, "--json", input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def refused(cli_runner, *args, message: str, input=None):
    """A clear error: exit 1, the message on stderr, nothing on stdout with --json."""
    result = invoke(cli_runner, *args, input=input)
    assert result.exit_code == 1, result.output
    assert message in result.stderr and "Traceback" not in result.output, result.output
    if "--json" in args:
        assert result.stdout == ""
    return result


def fill_group(name: str, node_name: str, *, finish: bool = True) -> dict:
    """A group with one range past 2^32 fetched by a node: a batch accepted, stored and joined
    (files, fragments, releases, release chunks, rule counts), one release joined into another's
    post, a grab and a spooled chunk; the range done unless `finish` is false (then still leased)."""
    first = BIG
    with session_scope() as s:
        group = make_group(s, name)
        node, _ = make_node(s, node_name)
        (seed_range,) = make_plan(s, group, [(first, first + 999)])
        leases.lease_range(s, node, seed_range.id)
        group_id, range_id = group.id, seed_range.id
    batch_id = accept(node, range_id, make_batch(first, first + 999, group=name))
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        posts.join_batch(s, batch_id)
    with session_scope() as s:
        keys = s.scalars(
            text("SELECT key FROM releases WHERE group_id = :g ORDER BY key LIMIT 2"), {"g": group_id}
        ).all()
        grabs.record(s, group_id, keys[0])
        s.execute(
            text("INSERT INTO release_posts (group_id, key, post_key) VALUES (:g, :k, :p) ON CONFLICT DO NOTHING"),
            {"g": group_id, "k": keys[1], "p": keys[0]},
        )
        s.execute(
            text(
                "INSERT INTO spool_chunks (range_id, chunk_from, chunk_to, lines, body) VALUES (:r, :a, :b, 1, '\\x00')"
            ),
            {"r": range_id, "a": first, "b": first + 99},
        )
        if finish:
            leases.finish(s, node, range_id)
    return {"id": group_id, "range_id": range_id, "node": node}


def partitions_of(engine, group_id: int) -> list[str]:
    return [
        r
        for (r,) in query(
            engine,
            # Not the store's temporary staging tables (pgcopy), which a pooled session keeps.
            "SELECT relname FROM pg_class WHERE relname ~ :p AND relpersistence <> 't' ORDER BY relname",
            p=f"_g{group_id}$",
        )
    ]


def shows_count(output: str, table: str, rows: int) -> bool:
    """Whether the table of counts printed has this line."""
    return re.search(rf"^ +{table} +{rows:,}$", output, re.M) is not None


# --- groups disable / enable -------------------------------------------------------------------


def test_disable_and_enable_round_trip_and_a_disabled_group_is_neither_planned_nor_leased(cli_runner, clean_db):
    assert ok_json(cli_runner, "groups", "add", A, B)[0]["active"] is True
    with session_scope() as s:
        (planned,) = make_plan(s, get_group(s, A), [(BIG, BIG + 999)])
        node, _ = make_node(s)
        planned_id = planned.id
    disabled = ok_json(cli_runner, "groups", "disable", A)
    assert (disabled["name"], disabled["active"], disabled["changed"]) == (A, False, True)
    again = invoke(cli_runner, "groups", "disable", A.upper())  # names are folded as on add
    assert again.exit_code == 0 and f"group {A} is already disabled" in again.output
    assert ok_json(cli_runner, "groups", "disable", A)["changed"] is False
    listed = {g["name"]: g["active"] for g in ok_json(cli_runner, "groups", "list")}
    assert listed == {A: False, B: True}
    table = invoke(cli_runner, "groups", "list").output.splitlines()
    assert [line.split()[1:3] for line in table[1:]] == [[B, "yes"], [A, "no"]]
    with session_scope() as s:
        assert groups_to_plan(s) == [B]
        assert leases.lease(s, node, max_leases=6) is None
    enabled = invoke(cli_runner, "groups", "enable", A)
    assert enabled.exit_code == 0 and f"enabled group {A}" in enabled.output
    assert ok_json(cli_runner, "groups", "enable", A)["changed"] is False
    with session_scope() as s:
        assert sorted(groups_to_plan(s)) == sorted([A, B])
        assert leases.lease(s, node, max_leases=6).range_id == planned_id
    # A group disabled while a node holds one of its ranges: the lease runs to its end.
    held = invoke(cli_runner, "groups", "disable", A)
    assert held.exit_code == 0 and held.output.strip() == f"disabled group {A} (1 leased ranges run to their end)"


@pytest.mark.parametrize("command", ["disable", "enable", "remove"])
def test_unknown_and_odd_group_names_are_clear_errors(cli_runner, clean_db, command):
    refused(cli_runner, "groups", command, "alt.binaries.ghost", message="no such group: alt.binaries.ghost")
    refused(cli_runner, "groups", command, "alt.binaries.*", "--json", message="not a newsgroup name")
    refused(cli_runner, "groups", command, "x'; DROP TABLE groups; --", message="not a newsgroup name")
    refused(cli_runner, "groups", command, "", message="not a newsgroup name")
    assert scalar(clean_db, "SELECT count(*) FROM pg_class WHERE relname = 'groups'") == 1


# --- groups remove -----------------------------------------------------------------------------


def test_remove_deletes_everything_of_the_group_and_nothing_else(cli_runner, clean_db):
    removed_group = fill_group(A, "edge-1")
    kept_group = fill_group(B, "edge-2")
    before = rows_of(clean_db, removed_group["id"])
    assert all(n > 0 for n in before.values()), before
    others = rows_of(clean_db, kept_group["id"])

    dry = ok_json(cli_runner, "groups", "remove", A, "--dry-run")
    assert (dry["group"], dry["removed"], dry["dry_run"], dry["leased_ranges"]) == (A, False, True, [])
    assert {t: dry["counts"][t] for t in GROUP_ROWS} == before
    # Tables not named here (added later, as a posts table) are counted too: the rows add up.
    assert dry["rows"] == sum(dry["counts"].values()) >= sum(before.values())
    assert dry["partitions"] == sorted(
        f"{t}_g{removed_group['id']}" for t in ("files", "fragment_packs", "release_chunks")
    )
    text_dry = invoke(cli_runner, "groups", "remove", A, "--dry-run")
    assert text_dry.exit_code == 0 and shows_count(text_dry.output, "fragment_packs", before["fragment_packs"])
    assert rows_of(clean_db, removed_group["id"]) == before  # a dry run deletes nothing

    # Asked, and answered no: nothing goes.
    no = invoke(cli_runner, "groups", "remove", A, input="n\n")
    assert no.exit_code == 1 and "Aborted" in no.output
    assert f"removing group {A} (id {removed_group['id']}) deletes" in no.output
    assert shows_count(no.output, "seed_batches", before["seed_batches"])
    assert rows_of(clean_db, removed_group["id"]) == before

    result = invoke(cli_runner, "groups", "remove", A, input="y\n")
    assert result.exit_code == 0, result.output
    assert f"removed group {A} (id {removed_group['id']}): {dry['rows']:,} rows" in result.output
    assert all(n == 0 for n in rows_of(clean_db, removed_group["id"]).values())
    assert partitions_of(clean_db, removed_group["id"]) == []
    assert rows_of(clean_db, kept_group["id"]) == others
    assert len(partitions_of(clean_db, kept_group["id"])) == 3
    # Every table with a group_id column is free of the group, whatever tables there are.
    tables = query(
        clean_db,
        "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " AND a.attname = 'group_id' JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')",
    )
    for (table,) in tables:
        assert scalar(clean_db, f'SELECT count(*) FROM "{table}" WHERE group_id = :g', g=removed_group["id"]) == 0
    # The nodes stay: only the group's rows went.
    assert scalar(clean_db, "SELECT count(*) FROM seed_nodes") == 2

    refused(cli_runner, "groups", "remove", A, "--yes", message=f"no such group: {A}")  # twice
    # The name can be added again, from scratch, with new partitions.
    readded = ok_json(cli_runner, "groups", "add", A)[0]
    assert readded["id"] != removed_group["id"] and len(partitions_of(clean_db, readded["id"])) == 3


def test_remove_is_refused_while_a_range_is_leased_unless_forced(cli_runner, clean_db):
    group = fill_group(A, "edge-1", finish=False)
    before = rows_of(clean_db, group["id"])
    result = refused(
        cli_runner,
        "groups",
        "remove",
        A,
        "--yes",
        message=f"group {A} has 1 leased ranges ({group['range_id']}): nodes are fetching them",
    )
    assert "--force" in result.stderr
    refused(cli_runner, "groups", "remove", A, "--yes", "--json", message="leased ranges")
    assert rows_of(clean_db, group["id"]) == before
    dry = invoke(cli_runner, "groups", "remove", A, "--dry-run")
    assert dry.exit_code == 0 and "would be refused without --force: 1 leased ranges" in dry.output
    assert ok_json(cli_runner, "groups", "remove", A, "--dry-run")["leased_ranges"] == [group["range_id"]]

    forced = ok_json(cli_runner, "groups", "remove", A, "--force", "--yes")
    assert forced["removed"] is True and forced["leased_ranges"] == [group["range_id"]]
    assert {t: forced["counts"][t] for t in GROUP_ROWS} == before
    assert all(n == 0 for n in rows_of(clean_db, group["id"]).values())
    # The node that held it is told the range is gone at its next call.
    with session_scope() as s:
        node = node_service.get_node(s, "edge-1")
        with pytest.raises(leases.NotFound):
            leases.heartbeat(s, node, group["range_id"])


def test_remove_waiting_too_long_on_a_batch_being_stored_changes_nothing(cli_runner, clean_db, monkeypatch):
    """A store of one of the group's batches holds its row: the removal gives up after its lock
    timeout with a clear message, all of it undone, and succeeds once the store is over."""
    from app.services import groups as group_service

    monkeypatch.setattr(group_service, "REMOVAL_LOCK_TIMEOUT", "300ms")
    group = fill_group(A, "edge-1")
    before = rows_of(clean_db, group["id"])
    with clean_db.connect() as store_connection:
        store_connection.execute(text("SELECT id FROM seed_batches FOR NO KEY UPDATE"))  # as the store holds it
        refused(cli_runner, "groups", "remove", A, "--yes", message="nothing was changed: try again")
        store_connection.rollback()
    assert rows_of(clean_db, group["id"]) == before
    assert ok_json(cli_runner, "groups", "remove", A, "--yes")["removed"] is True


def test_remove_covers_tables_added_later(cli_runner, clean_db):
    """A table with a group_id column, and one that only points at a range by a foreign key
    (NO ACTION: it would stop the delete), both found from the database's catalog."""
    group = fill_group(A, "edge-1")
    other = fill_group(B, "edge-2")
    with clean_db.begin() as conn:
        conn.execute(text("CREATE TABLE lifecycle_notes (group_id int NOT NULL, note text)"))
        conn.execute(
            text("CREATE TABLE lifecycle_range_notes (range_id bigint REFERENCES seed_ranges (id), note text)")
        )
        conn.execute(
            text("INSERT INTO lifecycle_notes VALUES (:a, 'a'), (:a, 'a2'), (:b, 'b')"),
            {"a": group["id"], "b": other["id"]},
        )
        conn.execute(
            text("INSERT INTO lifecycle_range_notes VALUES (:a, 'a'), (:b, 'b')"),
            {"a": group["range_id"], "b": other["range_id"]},
        )
    try:
        dry = ok_json(cli_runner, "groups", "remove", A, "--dry-run")
        assert (dry["counts"]["lifecycle_notes"], dry["counts"]["lifecycle_range_notes"]) == (2, 1)
        removed = ok_json(cli_runner, "groups", "remove", A, "--yes")
        assert (removed["counts"]["lifecycle_notes"], removed["counts"]["lifecycle_range_notes"]) == (2, 1)
        assert scalar(clean_db, "SELECT array_agg(note ORDER BY note) FROM lifecycle_notes") == ["b"]
        assert scalar(clean_db, "SELECT array_agg(note ORDER BY note) FROM lifecycle_range_notes") == ["b"]
    finally:
        with clean_db.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS lifecycle_notes, lifecycle_range_notes"))


# --- nodes delete ------------------------------------------------------------------------------


def test_deleting_a_node_gives_its_leased_ranges_back(cli_runner, clean_db):
    assert ok_json(cli_runner, "groups", "add", A)
    with session_scope() as s:
        node, token = make_node(s, "edge-1")
        make_node(s, "edge-2")
        ranges = make_plan(s, get_group(s, A), [(BIG, BIG + 1999), (BIG + 2000, BIG + 2999)])
        ids = [r.id for r in ranges]
        for range_id in ids:
            leases.lease_range(s, node, range_id)
    accept(node, ids[0], make_batch(BIG, BIG + 999))  # the first range is half fetched
    deleted = ok_json(cli_runner, "nodes", "delete", "edge-1")
    assert (deleted["name"], deleted["deleted"], deleted["released_ranges"]) == ("edge-1", True, ids)
    rows = scalar(
        clean_db, "SELECT json_agg(json_build_array(id, status, node_id, next_id) ORDER BY id) FROM seed_ranges"
    )
    assert rows == [[ids[0], "planned", None, BIG + 1000], [ids[1], "planned", None, BIG + 2000]]
    assert scalar(clean_db, "SELECT count(*) FROM seed_batches WHERE node_id IS NULL") == 1  # the batch stays
    with session_scope() as s:
        assert node_service.authenticate(s, token) is None
        granted = leases.lease(s, node_service.get_node(s, "edge-2"), max_leases=6)
        assert (granted.range_id, granted.next_id) == (ids[0], BIG + 1000)  # resumes where it stopped
    assert [n["name"] for n in ok_json(cli_runner, "nodes", "list")] == ["edge-2"]
    refused(cli_runner, "nodes", "delete", "edge-1", message="no such node: edge-1")  # twice
    refused(cli_runner, "nodes", "delete", "bad name!", "--json", message="not a node name")
    gone = invoke(cli_runner, "nodes", "delete", "edge-2")
    assert gone.exit_code == 0
    assert gone.output.strip() == f"deleted node edge-2; 1 leased ranges given back: {ids[0]}"


# --- rules enable / disable --------------------------------------------------------------------


def test_disabled_rules_are_not_handed_out_with_a_lease(cli_runner, client, clean_db):
    token = ok_json(cli_runner, "nodes", "create", "edge-1")["token"]
    auth = {"Authorization": f"Bearer {token}"}
    with session_scope() as s:
        make_plan(s, make_group(s, A), [(BIG, BIG + 999), (BIG + 1000, BIG + 1999), (BIG + 2000, BIG + 2999)])
    added = ok_json(cli_runner, "rules", "add", "no-spam", "--field", "poster", "--pattern", "spam@")
    assert added == {"name": "no-spam", "field": "poster", "pattern": "spam@", "action": "drop", "enabled": True}
    assert ok_json(cli_runner, "rules", "add", "other", "--field", "subject", "--pattern", "x")["enabled"] is True

    def lease_rules() -> list[str]:
        answer = client.post(f"{API}/lease", headers=auth)
        assert answer.status_code == 200, answer.data
        return [r["name"] for r in answer.get_json()["rules"]]

    assert lease_rules() == ["no-spam", "other"]
    disabled = ok_json(cli_runner, "rules", "disable", "no-spam")
    assert (disabled["enabled"], disabled["changed"]) == (False, True)
    assert lease_rules() == ["other"]
    again = invoke(cli_runner, "rules", "disable", "no-spam")
    assert again.exit_code == 0 and "rule no-spam is already disabled" in again.output
    assert [(r["name"], r["enabled"]) for r in ok_json(cli_runner, "rules", "list")] == [
        ("no-spam", False),
        ("other", True),
        ("inspected-executable", True),
    ]
    assert ok_json(cli_runner, "rules", "enable", "no-spam")["changed"] is True
    assert lease_rules() == ["no-spam", "other"]
    refused(cli_runner, "rules", "enable", "ghost", message="no such rule: ghost")
    refused(cli_runner, "rules", "disable", "executable", message="the executable rule is built into the digest")
    refused(cli_runner, "rules", "disable", "'; DROP TABLE seed_rules; --", "--json", message="no such rule")
    removed = ok_json(cli_runner, "rules", "remove", "other")
    assert (removed["name"], removed["removed"]) == ("other", True)
    refused(cli_runner, "rules", "remove", "other", message="no such rule: other")


# --- --json on every command that changes something --------------------------------------------


def test_every_changing_command_prints_one_json_document(cli_runner, clean_db):
    groups = ok_json(cli_runner, "groups", "add", A, B)
    assert [g["name"] for g in groups] == [A, B] and all(isinstance(g["id"], int) for g in groups)
    assert ok_json(cli_runner, "groups", "disable", B)["active"] is False
    assert ok_json(cli_runner, "groups", "enable", B)["active"] is True

    node = ok_json(cli_runner, "nodes", "create", "edge-1")
    assert node["name"] == "edge-1" and node["token"].startswith("seed_")
    assert (d := ok_json(cli_runner, "nodes", "disable", "edge-1"))["enabled"] is False and d["changed"] is True
    assert ok_json(cli_runner, "nodes", "enable", "edge-1")["enabled"] is True
    rotated = ok_json(cli_runner, "nodes", "token", "edge-1")
    assert (rotated["name"], rotated["id"]) == ("edge-1", node["id"]) and rotated["token"] != node["token"]
    assert ok_json(cli_runner, "token", "edge-1")["token"] != rotated["token"]

    assert ok_json(cli_runner, "rules", "add", "r1", "--field", "subject", "--pattern", "x")["name"] == "r1"
    assert ok_json(cli_runner, "rules", "disable", "r1")["enabled"] is False
    assert ok_json(cli_runner, "rules", "enable", "r1")["enabled"] is True
    assert ok_json(cli_runner, "rules", "remove", "r1")["removed"] is True

    operator = ok_json(cli_runner, "operators", "create", "alice")
    assert operator["name"] == "alice" and operator["key"].startswith("seedop_")
    revoked = ok_json(cli_runner, "operators", "revoke", "alice")
    assert (revoked["name"], revoked["id"], revoked["revoked"]) == ("alice", operator["id"], True)
    # Revoked, the key keeps its row (credentials' one policy): revoking it again changes nothing;
    # a key that is none is refused, with --json too.
    assert ok_json(cli_runner, "operators", "revoke", "alice")["revoked_at"] == revoked["revoked_at"]
    refused(cli_runner, "operators", "revoke", "bob", "--json", message="no such operator key: bob")

    apikey = ok_json(cli_runner, "apikeys", "create", "sonarr")
    assert apikey["name"] == "sonarr" and apikey["key"].startswith("seedapi_")
    assert ok_json(cli_runner, "apikeys", "revoke", "sonarr")["revoked_at"] is not None

    assert ok_json(cli_runner, "batches", "retry") == {"retried": [], "enqueued": 0}

    removed = ok_json(cli_runner, "groups", "remove", B, "--yes")
    assert (removed["group"], removed["removed"], removed["counts"]["groups"]) == (B, True, 1)
    deleted = ok_json(cli_runner, "nodes", "delete", "edge-1")
    assert (deleted["name"], deleted["released_ranges"]) == ("edge-1", [])
    # A refusal with --json is a message on stderr, never a document.
    refused(cli_runner, "groups", "add", A, "--json", message="group already exists")
    refused(cli_runner, "nodes", "create", "edge 1", "--json", message="not a node name")


def test_remove_asks_on_stderr_with_json(cli_runner, clean_db):
    assert ok_json(cli_runner, "groups", "add", A)
    result = invoke(cli_runner, "groups", "remove", A, "--json", input="y\n")
    assert result.exit_code == 0, result.output
    assert f"remove group {A} and all of the above?" in result.stderr
    assert json.loads(result.stdout)["removed"] is True
    with session_scope() as s:
        assert s.scalar(select(SeedRange.id)) is None
