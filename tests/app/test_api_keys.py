"""API keys on the real database: made, listed and revoked with `flask seed apikeys`, stored only
hashed; holder() knows an active key and nothing else (a revoked key, a node token, an operator
key, a near miss); record_use() counts requests and NZB downloads."""
from __future__ import annotations

import json
import threading

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from app.config import Settings, override_settings
from app.db import reset_engine, session_scope
from app.services import apikeys, operators, tokens
from app.services.apikeys import API_KEY_PREFIX
from app.services.errors import ServiceError
from app.services.nodes import authenticate as node_holder
from app.services.tokens import OPERATOR_KEY_PREFIX, TOKEN_PREFIX, hash_token
from tests.app.factories import make_node
from tests.app.test_migrations import alembic_config

COLUMNS = ["id", "name", "created_at", "last_used_at", "revoked_at", "grabs", "api_hits"]


def seed(cli_runner, *args: str):
    return cli_runner.invoke(args=["seed", "apikeys", *args])


def create_key(cli_runner, name: str) -> str:
    result = seed(cli_runner, "create", name, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["key"]


def listed(cli_runner) -> dict[str, dict]:
    result = seed(cli_runner, "list", "--json")
    assert result.exit_code == 0, result.output
    return {row["name"]: row for row in json.loads(result.output)}


def test_create_prints_a_key_once_that_is_stored_only_hashed(cli_runner, clean_db):
    key = create_key(cli_runner, "sonarr")
    assert key.startswith(API_KEY_PREFIX) and len(key) >= len(API_KEY_PREFIX) + 43
    # Neither a node token's nor an operator key's prefix: a key says what it is.
    assert not key.startswith((TOKEN_PREFIX, OPERATOR_KEY_PREFIX))
    other = create_key(cli_runner, "radarr")
    assert other != key
    with clean_db.connect() as conn:
        dump = conn.execute(text("SELECT row_to_json(k)::text FROM api_keys k")).scalars().all()
        stored = conn.execute(text("SELECT key_hash FROM api_keys WHERE name = 'sonarr'")).scalar_one()
    secret_part = key[len(API_KEY_PREFIX):]
    assert len(dump) == 2 and not any(secret_part in row or other in row for row in dump)
    assert bytes(stored) == hash_token(key)

    shown = seed(cli_runner, "create", "nzbhydra")
    assert shown.exit_code == 0 and "shown only this once" in shown.output
    last = shown.output.strip().splitlines()[-1]
    assert last.startswith(API_KEY_PREFIX)
    # The key is shown that once: the list, for people or scripts, never has it.
    table = seed(cli_runner, "list").output
    as_json = seed(cli_runner, "list", "--json").output
    for secret in (key, other, last):
        assert secret not in table and secret not in as_json
    assert all("key" not in row and "key_hash" not in row for row in listed(cli_runner).values())


def test_create_json_list_and_revoke(cli_runner, clean_db):
    created = seed(cli_runner, "create", "sonarr", "--json")
    assert created.exit_code == 0
    row = json.loads(created.output)
    assert sorted(row) == sorted(COLUMNS + ["key"])
    assert (row["name"], row["grabs"], row["api_hits"], row["last_used_at"], row["revoked_at"]) == (
        "sonarr", 0, 0, None, None)
    create_key(cli_runner, "radarr")

    keys = listed(cli_runner)
    assert list(keys) == ["radarr", "sonarr"] and all(sorted(r) == sorted(COLUMNS) for r in keys.values())
    table = seed(cli_runner, "list").output.splitlines()
    assert table[0].split() == COLUMNS
    assert [line.split()[1] for line in table[1:]] == ["radarr", "sonarr"]

    revoked = seed(cli_runner, "revoke", "sonarr")
    assert revoked.exit_code == 0 and "revoked API key sonarr" in revoked.output
    keys = listed(cli_runner)
    # A revoked key stays in the list, with the time it stopped working.
    assert keys["sonarr"]["revoked_at"] is not None and keys["radarr"]["revoked_at"] is None
    again = seed(cli_runner, "revoke", "sonarr", "--json")
    assert again.exit_code == 0
    assert json.loads(again.output)["revoked_at"] == keys["sonarr"]["revoked_at"]
    by_json = json.loads(seed(cli_runner, "revoke", "radarr", "--json").output)
    assert (by_json["name"], sorted(by_json)) == ("radarr", sorted(COLUMNS))
    assert by_json["revoked_at"] is not None


def test_cli_errors(cli_runner, clean_db):
    create_key(cli_runner, "sonarr")
    dup = seed(cli_runner, "create", "sonarr")
    assert dup.exit_code == 1 and "API key name already in use: sonarr" in dup.output
    for bad in ("bad name!", "", "-dash-first", "x" * 65, "naïve", "a/b"):
        # "--": a name that starts with a dash reaches the service, which refuses it.
        result = seed(cli_runner, "create", "--", bad)
        assert result.exit_code == 1 and "not an API key name" in result.output, bad
    assert list(listed(cli_runner)) == ["sonarr"]
    assert seed(cli_runner, "create", "x" * 64).exit_code == 0

    unknown = seed(cli_runner, "revoke", "lidarr")
    assert unknown.exit_code == 1 and "no such API key: lidarr" in unknown.output
    unknown_json = seed(cli_runner, "revoke", "lidarr", "--json")
    assert unknown_json.exit_code == 1 and "no such API key: lidarr" in unknown_json.output
    # A revoked key's name stays taken: its counts are read under it.
    assert seed(cli_runner, "revoke", "sonarr").exit_code == 0
    reused = seed(cli_runner, "create", "sonarr")
    assert reused.exit_code == 1 and "already in use" in reused.output


def test_bad_names_are_refused_by_the_service(db_session):
    for bad in ("bad name!", "", ".dot-first", "x" * 65, "tab\there"):
        with pytest.raises(ServiceError) as refused:
            apikeys.create_key(db_session, bad)
        assert refused.value.code == "bad_api_key_name"
    assert apikeys.list_keys(db_session) == []


def test_holder_knows_an_active_key_and_nothing_else(db_session):
    key_row, key = apikeys.create_key(db_session, "sonarr")
    _, other_key = apikeys.create_key(db_session, "radarr")
    _, node_token = make_node(db_session, "edge-1")
    _, operator_key = operators.create_key(db_session, "ops-1")

    assert apikeys.holder(db_session, key) is key_row
    assert apikeys.holder(db_session, other_key).name == "radarr"
    # The other credentials are not API keys, and an API key is neither of them.
    assert apikeys.holder(db_session, node_token) is None
    assert apikeys.holder(db_session, operator_key) is None
    assert node_holder(db_session, key) is None
    assert operators.authenticate(db_session, key) is None

    body = key[len(API_KEY_PREFIX):]
    last = "A" if key[-1] != "A" else "B"
    near_misses = [
        key[:-1], key + "x", key[:-1] + last, " " + key, key + "\n", key.upper(), key.swapcase(),
        TOKEN_PREFIX + body, OPERATOR_KEY_PREFIX + body, body, API_KEY_PREFIX, "", "x" * 300,
        key + "x" * (tokens.MAX_CREDENTIAL_LENGTH - len(key) + 1),
    ]
    for miss in near_misses:
        assert miss != key
        assert apikeys.holder(db_session, miss) is None, miss


def test_holder_compares_in_constant_time(db_session, monkeypatch):
    """The key is found by its hash, and the stored hash compared with hmac.compare_digest."""
    _, key = apikeys.create_key(db_session, "sonarr")
    compared = []
    real = tokens.hmac.compare_digest

    def watched(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(tokens.hmac, "compare_digest", watched)
    assert apikeys.holder(db_session, key) is not None
    assert compared == [(hash_token(key), hash_token(key))]


def test_a_revoked_key_stops_working_at_once(cli_runner, clean_db):
    key = create_key(cli_runner, "sonarr")
    with session_scope() as s:
        assert apikeys.holder(s, key).name == "sonarr"
    assert seed(cli_runner, "revoke", "sonarr").exit_code == 0
    with session_scope() as s:
        assert apikeys.holder(s, key) is None
    # Revoked again, still refused; another key is untouched.
    other = create_key(cli_runner, "radarr")
    assert seed(cli_runner, "revoke", "sonarr").exit_code == 0
    with session_scope() as s:
        assert apikeys.holder(s, key) is None
        assert apikeys.holder(s, other).name == "radarr"


def test_record_use_counts_hits_and_grabs(db_session):
    key_row, key = apikeys.create_key(db_session, "sonarr")
    other_row, _ = apikeys.create_key(db_session, "radarr")
    assert (key_row.api_hits, key_row.grabs, key_row.last_used_at) == (0, 0, None)
    for grab in (False, True, False, True, True):
        apikeys.record_use(db_session, apikeys.holder(db_session, key), grab=grab)
    assert (key_row.api_hits, key_row.grabs) == (5, 3)
    assert key_row.last_used_at is not None
    assert (other_row.api_hits, other_row.grabs, other_row.last_used_at) == (0, 0, None)
    stored = db_session.execute(text("SELECT api_hits, grabs FROM api_keys WHERE name = 'sonarr'")).one()
    assert tuple(stored) == (5, 3)


def test_record_use_loses_no_count_under_concurrent_requests(cli_runner, clean_db):
    key = create_key(cli_runner, "sonarr")
    threads, each = 4, 25
    failures = []

    def requests() -> None:
        try:
            for i in range(each):
                with session_scope() as s:
                    apikeys.record_use(s, apikeys.holder(s, key), grab=i % 5 == 0)
        except Exception as exc:  # reported below: an assert in a thread would go unseen
            failures.append(exc)

    workers = [threading.Thread(target=requests) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    row = listed(cli_runner)["sonarr"]
    assert (row["api_hits"], row["grabs"]) == (threads * each, threads * each // 5)
    assert row["last_used_at"] is not None
    table = seed(cli_runner, "list").output.splitlines()
    assert table[1].split()[-2:] == [str(threads * each // 5), str(threads * each)]


def test_0013_adds_the_table_and_takes_it_away(postgres, settings):
    url = postgres.create_database("seed_migration_0013")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    try:
        command.upgrade(alembic_config(), "0013")
        columns = {c["name"]: c for c in inspect(engine).get_columns("api_keys")}
        assert list(columns) == COLUMNS[:2] + ["key_hash"] + COLUMNS[2:]
        assert {c for c in columns if columns[c]["nullable"]} == {"last_used_at", "revoked_at"}
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO api_keys (name, key_hash) VALUES ('a', '\\x01')"))
            assert tuple(conn.execute(text("SELECT grabs, api_hits FROM api_keys")).one()) == (0, 0)
        uniques = {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints("api_keys")}
        assert uniques == {("name",), ("key_hash",)}
        command.downgrade(alembic_config(), "-1")
        assert "api_keys" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()
