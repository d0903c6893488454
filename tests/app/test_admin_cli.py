"""`flask seed groups ...` and `flask seed nodes ...` against the real database."""

import json

from sqlalchemy import text

from app.services.credentials import hash_token


def test_groups_add_and_list(cli_runner, clean_db):
    result = cli_runner.invoke(args=["seed", "groups", "add", "alt.binaries.test", "Alt.Binaries.E-Book.French"])
    assert result.exit_code == 0, result.output
    assert "added group alt.binaries.test" in result.output
    listed = cli_runner.invoke(args=["seed", "groups", "list", "--json"])
    names = [g["name"] for g in json.loads(listed.output)]
    assert names == ["alt.binaries.e-book.french", "alt.binaries.test"]
    with clean_db.connect() as conn:
        partitions = conn.execute(
            text(
                "SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent"
                " WHERE p.relname IN ('files', 'fragment_packs', 'release_chunks')"
            )
        ).scalar_one()
    assert partitions >= 6


def test_duplicate_and_bad_group_names_are_clear_errors(cli_runner, clean_db):
    assert cli_runner.invoke(args=["seed", "groups", "add", "alt.binaries.test"]).exit_code == 0
    dup = cli_runner.invoke(args=["seed", "groups", "add", "alt.binaries.new", "alt.binaries.test"])
    assert dup.exit_code == 1
    assert "group already exists: alt.binaries.test" in dup.output
    bad = cli_runner.invoke(args=["seed", "groups", "add", "alt.binaries.*"])
    assert bad.exit_code == 1 and "not a newsgroup name" in bad.output
    # A refused call changes nothing: the new name of the refused pair was not added.
    listed = json.loads(cli_runner.invoke(args=["seed", "groups", "list", "--json"]).output)
    assert [g["name"] for g in listed] == ["alt.binaries.test"]


def test_nodes_create_prints_a_token_that_is_stored_only_hashed(cli_runner, clean_db):
    result = cli_runner.invoke(args=["seed", "nodes", "create", "edge-1", "--json"])
    assert result.exit_code == 0, result.output
    token = json.loads(result.output)["token"]
    assert len(token) >= 40
    other = json.loads(cli_runner.invoke(args=["seed", "nodes", "create", "edge-2", "--json"]).output)["token"]
    assert other != token
    with clean_db.connect() as conn:
        dump = conn.execute(text("SELECT row_to_json(n)::text FROM seed_nodes n")).scalars().all()
        stored = conn.execute(text("SELECT token_hash FROM seed_nodes WHERE name = 'edge-1'")).scalar_one()
    assert not any(token in row or other in row for row in dump)
    assert bytes(stored) == hash_token(token)


def test_nodes_list_disable_enable_and_errors(cli_runner, clean_db):
    assert cli_runner.invoke(args=["seed", "nodes", "create", "edge-1"]).exit_code == 0
    dup = cli_runner.invoke(args=["seed", "nodes", "create", "edge-1"])
    assert dup.exit_code == 1 and "node already exists: edge-1" in dup.output
    assert cli_runner.invoke(args=["seed", "nodes", "create", "bad name!"]).exit_code == 1
    assert cli_runner.invoke(args=["seed", "nodes", "disable", "edge-1"]).exit_code == 0
    listed = json.loads(cli_runner.invoke(args=["seed", "nodes", "list", "--json"]).output)
    assert [(n["name"], n["enabled"]) for n in listed] == [("edge-1", False)]
    assert cli_runner.invoke(args=["seed", "nodes", "enable", "edge-1"]).exit_code == 0
    unknown = cli_runner.invoke(args=["seed", "nodes", "disable", "ghost"])
    assert unknown.exit_code == 1 and "no such node: ghost" in unknown.output
    table = cli_runner.invoke(args=["seed", "nodes", "list"]).output
    assert table.splitlines()[0].split()[:3] == ["id", "name", "enabled"]
