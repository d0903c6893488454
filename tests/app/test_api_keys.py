"""API keys on the real database: made, listed, limited and revoked with `flask seed apikeys`,
stored only hashed; holder() knows an active key and nothing else (a revoked key, a node token, an
operator key, a near miss); use() counts requests and NZB downloads per UTC day and refuses them
past the key's limits, race-free; record_use() counts without refusing."""

from __future__ import annotations

import json
import math
import threading
from datetime import date, datetime, timedelta, timezone

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import Settings, override_settings
from app.db import reset_engine, session_scope
from app.models import ApiKey
from app.services import apikeys, credentials, operators
from app.services.apikeys import LimitReached, Usage
from app.services.errors import NotFound, ServiceError
from app.services.nodes import authenticate as node_holder
from app.services.credentials import API_KEY_PREFIX, OPERATOR_KEY_PREFIX, TOKEN_PREFIX, hash_token
from tests.app.factories import make_node
from tests.app.test_migrations import alembic_config
from tests.fixtures.waiting import wait_until

COLUMNS = [
    "id",
    "name",
    "created_at",
    "last_used_at",
    "revoked_at",
    "grabs",
    "api_hits",
    "requests_today",
    "requests_per_day",
    "grabs_today",
    "grabs_per_day",
]


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
    secret_part = key[len(API_KEY_PREFIX) :]
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
        "sonarr",
        0,
        0,
        None,
        None,
    )
    # No limits unless asked for, and no use yet.
    assert [row[c] for c in COLUMNS[-4:]] == [0, None, 0, None]
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

    body = key[len(API_KEY_PREFIX) :]
    last = "A" if key[-1] != "A" else "B"
    near_misses = [
        key[:-1],
        key + "x",
        key[:-1] + last,
        " " + key,
        key + "\n",
        key.upper(),
        key.swapcase(),
        TOKEN_PREFIX + body,
        OPERATOR_KEY_PREFIX + body,
        body,
        API_KEY_PREFIX,
        "",
        "x" * 300,
        key + "x" * (credentials.MAX_CREDENTIAL_LENGTH - len(key) + 1),
    ]
    for miss in near_misses:
        assert miss != key
        assert apikeys.holder(db_session, miss) is None, miss


def test_holder_compares_in_constant_time(db_session, monkeypatch):
    """The key is found by its hash, and the stored hash compared with hmac.compare_digest."""
    _, key = apikeys.create_key(db_session, "sonarr")
    compared = []
    real = credentials.hmac.compare_digest

    def watched(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(credentials.hmac, "compare_digest", watched)
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
    # The totals, then today's use and the limits: none were set.
    assert table[1].split()[-6:] == [
        str(threads * each // 5),
        str(threads * each),
        str(threads * each),
        "unlimited",
        str(threads * each // 5),
        "unlimited",
    ]


def test_0013_adds_the_table_and_takes_it_away(postgres, settings):
    url = postgres.create_database("seed_migration_0013")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    try:
        command.upgrade(alembic_config(), "0013")
        columns = {c["name"]: c for c in inspect(engine).get_columns("api_keys")}
        assert list(columns) == COLUMNS[:2] + ["key_hash"] + COLUMNS[2:7]  # the limits came with 0017
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


def today(session, name: str) -> Usage:
    [(_, usage)] = apikeys.list_usage(session, name)
    return usage


def test_limits_are_set_at_creation_changed_and_cleared(cli_runner, clean_db):
    created = seed(cli_runner, "create", "sonarr", "--requests-per-day", "100", "--grabs-per-day", "20", "--json")
    assert created.exit_code == 0, created.output
    row = json.loads(created.output)
    assert [row[c] for c in COLUMNS[-4:]] == [0, 100, 0, 20]
    shown = seed(cli_runner, "create", "radarr", "--grabs-per-day", "5")
    assert shown.exit_code == 0 and "(id 2; unlimited requests a day, 5 grabs a day)" in shown.output

    # A limit not given stays as it was.
    changed = seed(cli_runner, "limit", "sonarr", "--requests-per-day", "500")
    assert changed.exit_code == 0, changed.output
    assert changed.output.strip() == "API key sonarr: 500 requests a day, 20 grabs a day (UTC)"
    cleared = seed(cli_runner, "limit", "sonarr", "--grabs-per-day", "none", "--json")
    assert cleared.exit_code == 0, cleared.output
    row = json.loads(cleared.output)
    assert sorted(row) == sorted(COLUMNS) and (row["requests_per_day"], row["grabs_per_day"]) == (500, None)
    both = seed(cli_runner, "limit", "sonarr", "--requests-per-day", " Unlimited ", "--grabs-per-day", "1000000000")
    assert both.output.strip() == "API key sonarr: unlimited requests a day, 1000000000 grabs a day (UTC)"
    keys = listed(cli_runner)
    assert [(keys[n]["requests_per_day"], keys[n]["grabs_per_day"]) for n in ("radarr", "sonarr")] == [
        (None, 5),
        (None, 10**9),
    ]

    # Today's use next to the limits, in the JSON list and in the table.
    with session_scope() as s:
        key_row = s.scalars(select(ApiKey).where(ApiKey.name == "radarr")).one()
        for grab in (True, False, True):
            apikeys.use(s, key_row, grab=grab)
    row = listed(cli_runner)["radarr"]
    assert [row[c] for c in COLUMNS[-6:]] == [2, 3, 3, None, 2, 5]
    table = seed(cli_runner, "list").output.splitlines()
    assert table[0].split() == COLUMNS
    assert table[1].split()[1] == "radarr" and table[1].split()[-6:] == ["2", "3", "3", "unlimited", "2", "5"]
    # A revoked key's limits can still be read and changed: its row stays.
    assert seed(cli_runner, "revoke", "radarr").exit_code == 0
    again = seed(cli_runner, "limit", "radarr", "--requests-per-day", "7", "--json")
    assert again.exit_code == 0 and json.loads(again.output)["requests_per_day"] == 7


def test_bad_limits_on_the_command_line_say_what_is_wrong(cli_runner, clean_db):
    create_key(cli_runner, "sonarr")
    cases = [
        ("0", "0 is out of range: a limit is 1 to 1000000000 a day, or 'none' for unlimited"),
        ("-1", "'-1' is not a whole number or 'none' (unlimited)"),
        ("1000000001", "1000000001 is out of range"),
        ("abc", "'abc' is not a whole number"),
        ("1.5", "'1.5' is not a whole number"),
        ("1_000", "'1_000' is not a whole number"),
        ("+5", "'+5' is not a whole number"),
        ("\u0663", "is not a whole number"),
        ("", "'' is not a whole number"),
    ]
    for value, says in cases:
        for option in ("--requests-per-day", "--grabs-per-day"):
            for command_ in (("create", "radarr"), ("limit", "sonarr")):
                result = seed(cli_runner, *command_, f"{option}={value}", "--json")
                assert result.exit_code == 2, (value, result.output)
                assert f"Invalid value for '{option}'" in result.output and says in result.output, result.output
                # A usage error, not a crash: click's SystemExit, no traceback.
                assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    nothing = seed(cli_runner, "limit", "sonarr")
    assert (
        nothing.exit_code == 2 and "give --requests-per-day N|none, --grabs-per-day N|none, or both" in nothing.output
    )
    unknown = seed(cli_runner, "limit", "lidarr", "--requests-per-day", "5", "--json")
    assert unknown.exit_code == 1 and "no such API key: lidarr" in unknown.output
    # Nothing was made or changed by the refused commands.
    keys = listed(cli_runner)
    assert list(keys) == ["sonarr"] and (keys["sonarr"]["requests_per_day"], keys["sonarr"]["grabs_per_day"]) == (
        None,
        None,
    )


def test_bad_limits_are_refused_by_the_service_and_the_database(db_session):
    for bad in (0, -1, 10**9 + 1, True, 1.5, "5"):
        for limit in ("requests_per_day", "grabs_per_day"):
            with pytest.raises(ServiceError) as refused:
                apikeys.create_key(db_session, "radarr", **{limit: bad})
            assert refused.value.code == "bad_api_key_limit" and "1 to 1000000000" in refused.value.message
    assert apikeys.list_keys(db_session) == []
    key_row, _ = apikeys.create_key(db_session, "sonarr", requests_per_day=10**9, grabs_per_day=1)
    with pytest.raises(ServiceError):
        apikeys.set_limits(db_session, "sonarr", grabs_per_day=0)
    assert (key_row.requests_per_day, key_row.grabs_per_day) == (10**9, 1)
    with pytest.raises(NotFound):
        apikeys.set_limits(db_session, "lidarr", requests_per_day=1)
    # A write that goes around the service meets the CHECK: a day's first request always fits.
    for column in ("requests_per_day", "grabs_per_day"):
        for bad in (0, 10**9 + 1):
            with pytest.raises(IntegrityError), db_session.begin_nested():
                db_session.execute(text(f"UPDATE api_keys SET {column} = :v"), {"v": bad})


def test_use_refuses_at_exactly_the_limit_and_counts_nothing_then(db_session):
    key_row, key = apikeys.create_key(db_session, "sonarr", requests_per_day=3)
    other_row, _ = apikeys.create_key(db_session, "radarr", requests_per_day=3)
    assert today(db_session, "sonarr") == Usage(0, 0, 3, None, None, None)
    seen = [apikeys.use(db_session, apikeys.holder(db_session, key), grab=False) for _ in range(3)]
    first = db_session.execute(text("SELECT now()")).scalar_one()
    assert seen == [Usage(n, 0, 3, None, first, None) for n in (1, 2, 3)]
    frees = db_session.execute(
        text(
            "SELECT extract(epoch FROM date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day'"
            " - (now() AT TIME ZONE 'UTC'))"
        )
    ).scalar_one()
    for grab in (False, True, False):
        with pytest.raises(LimitReached) as refused:
            apikeys.use(db_session, key_row, grab=grab)
        assert (refused.value.kind, refused.value.code, refused.value.status) == (
            "requests",
            "request_limit_reached",
            429,
        )
        assert 0 < refused.value.retry_after <= 86400 and refused.value.retry_after == max(1, math.ceil(frees))
        assert refused.value.usage == seen[-1]
        assert refused.value.message.startswith("the API key's limit of 3 requests a day (UTC) is reached")
    # The refusals counted nothing: neither today's use nor the totals.
    assert (key_row.api_hits, key_row.grabs) == (3, 0) and today(db_session, "sonarr") == seen[-1]
    stored = db_session.execute(text("SELECT api_hits, grabs FROM api_keys WHERE name = 'sonarr'")).one()
    assert tuple(stored) == (3, 0)
    # Another key's limit is its own.
    assert apikeys.use(db_session, other_row, grab=True) == Usage(1, 1, 3, None, first, first)


def test_grabs_are_limited_apart_from_requests(db_session):
    key_row, _ = apikeys.create_key(db_session, "sonarr", requests_per_day=5, grabs_per_day=2)
    first = apikeys.use(db_session, key_row, grab=False)
    assert (first.requests, first.grabs, first.grabs_oldest) == (1, 0, None)
    grabbed = apikeys.use(db_session, key_row, grab=True)
    assert (grabbed.requests, grabbed.grabs, grabbed.grabs_max) == (2, 1, 2)
    assert grabbed.grabs_oldest == grabbed.requests_oldest == first.requests_oldest
    assert apikeys.use(db_session, key_row, grab=True).grabs == 2
    with pytest.raises(LimitReached) as refused:
        apikeys.use(db_session, key_row, grab=True)
    assert (refused.value.kind, refused.value.code) == ("grabs", "grab_limit_reached")
    assert refused.value.usage == Usage(3, 2, 5, 2, first.requests_oldest, first.requests_oldest)
    assert "limit of 2 NZB downloads a day (UTC)" in refused.value.message
    # Searches still pass: only downloads are at their limit.
    assert [apikeys.use(db_session, key_row, grab=False).requests for _ in range(2)] == [4, 5]
    # At both limits, the requests' is the one told.
    for grab in (True, False):
        with pytest.raises(LimitReached) as both:
            apikeys.use(db_session, key_row, grab=grab)
        assert both.value.kind == "requests" and both.value.usage == Usage(
            5, 2, 5, 2, first.requests_oldest, first.requests_oldest
        )
    assert (key_row.api_hits, key_row.grabs) == (5, 2)


def test_a_changed_limit_applies_to_the_next_request(db_session):
    key_row, _ = apikeys.create_key(db_session, "sonarr", grabs_per_day=1)
    for _ in range(4):
        apikeys.use(db_session, key_row, grab=False)
    # Lowered below today's use: refused until the day ends.
    apikeys.set_limits(db_session, "sonarr", requests_per_day=2)
    with pytest.raises(LimitReached) as refused:
        apikeys.use(db_session, key_row, grab=False)
    assert (refused.value.usage.requests, refused.value.usage.requests_max) == (4, 2)
    apikeys.set_limits(db_session, "sonarr", requests_per_day=5)
    assert apikeys.use(db_session, key_row, grab=False).requests == 5
    with pytest.raises(LimitReached):
        apikeys.use(db_session, key_row, grab=False)
    # The limit set in the database is the one checked, not the one the caller's copy was loaded with.
    db_session.execute(text("UPDATE api_keys SET requests_per_day = NULL WHERE name = 'sonarr'"))
    assert key_row.requests_per_day == 5
    usage = apikeys.use(db_session, key_row, grab=True)
    assert (usage.requests, usage.requests_max, usage.grabs, usage.grabs_max) == (6, None, 1, 1)
    assert key_row.requests_per_day is None
    # KEEP leaves the other limit alone.
    apikeys.set_limits(db_session, "sonarr", requests_per_day=100)
    assert (key_row.requests_per_day, key_row.grabs_per_day) == (100, 1)


def test_a_new_utc_day_starts_at_zero(db_session):
    key_row, _ = apikeys.create_key(db_session, "sonarr", requests_per_day=2, grabs_per_day=1)
    db_session.execute(
        text(
            "INSERT INTO api_key_days (key_id, day, requests, grabs, first_request, first_grab)"
            " VALUES (:k, (now() AT TIME ZONE 'UTC')::date - 1, 2, 1, now() - interval '1 day', now() - interval '1 day')"
        ),
        {"k": key_row.id},
    )
    # Yesterday's use, at both limits, is not today's.
    assert today(db_session, "sonarr") == Usage(0, 0, 2, 1, None, None)
    now = db_session.execute(text("SELECT now()")).scalar_one()
    assert apikeys.use(db_session, key_row, grab=True) == Usage(1, 1, 2, 1, now, now)
    rows = db_session.execute(
        text("SELECT day, requests, grabs FROM api_key_days WHERE key_id = :k ORDER BY day"), {"k": key_row.id}
    ).all()
    # Yesterday's row stays as it was, a history of use; today's is the UTC date.
    assert [(r.requests, r.grabs) for r in rows] == [(2, 1), (1, 1)]
    assert rows[1].day == now.astimezone(timezone.utc).date() == rows[0].day + timedelta(days=1)


def test_retry_after_counts_whole_seconds_to_the_next_utc_midnight():
    day, utc = date(2026, 12, 5), timezone.utc
    assert apikeys.retry_after(day, datetime(2026, 12, 5, tzinfo=utc)) == 86400
    assert apikeys.retry_after(day, datetime(2026, 12, 5, 12, 0, 0, 500000, tzinfo=utc)) == 43200
    assert apikeys.retry_after(day, datetime(2026, 12, 5, 23, 59, 59, 1, tzinfo=utc)) == 1
    assert apikeys.retry_after(day, datetime(2026, 12, 5, 23, 59, 59, 999999, tzinfo=utc)) == 1
    # The instant counts, not the zone it is written in: 18:00 at UTC-5 is 23:00 UTC.
    assert apikeys.retry_after(day, datetime(2026, 12, 5, 18, 0, tzinfo=timezone(timedelta(hours=-5)))) == 3600


def test_record_use_counts_into_today_and_never_refuses(db_session):
    key_row, _ = apikeys.create_key(db_session, "reader", requests_per_day=1, grabs_per_day=1)
    for grab in (True, True, False):
        apikeys.record_use(db_session, key_row, grab=grab)
    assert (key_row.api_hits, key_row.grabs) == (3, 2)
    assert (today(db_session, "reader").requests, today(db_session, "reader").grabs) == (3, 2)
    # What it counted is today's use, which use() checks.
    with pytest.raises(LimitReached):
        apikeys.use(db_session, key_row, grab=False)


def _backend_pid(session: Session) -> int:
    return session.execute(text("SELECT pg_backend_pid()")).scalar_one()


@pytest.mark.parametrize("counted_before", [0, 1], ids=["first-of-the-day", "row-there"])
@pytest.mark.parametrize("first_ends", ["commit", "rollback"])
def test_two_requests_at_the_limit_less_one_do_not_both_pass(clean_db, counted_before, first_ends):
    """The first request's count holds the day's row (or its insert) locked until it ends; the
    second waits on it, then is checked against what the first left: refused after a commit,
    counted after a rollback."""
    engine = clean_db
    with Session(engine) as s, s.begin():
        key_row, _ = apikeys.create_key(s, "sonarr", requests_per_day=counted_before + 1)
        key_id = key_row.id
        for _ in range(counted_before):
            apikeys.use(s, key_row, grab=False)
    first = Session(engine)
    first_pid = _backend_pid(first)
    assert apikeys.use(first, first.get_one(ApiKey, key_id), grab=False).requests == counted_before + 1
    second_pid: list[int] = []
    outcome: dict[str, object] = {}

    def second() -> None:
        try:
            with Session(engine) as s, s.begin():
                second_pid.append(_backend_pid(s))
                outcome["usage"] = apikeys.use(s, s.get_one(ApiKey, key_id), grab=False)
        except LimitReached as exc:
            outcome["refused"] = exc
        except Exception as exc:  # reported below: an assert in a thread would go unseen
            outcome["error"] = exc

    def waits_on_the_first() -> bool:
        with engine.connect() as conn:
            return (
                bool(second_pid)
                and first_pid
                in conn.execute(text("SELECT pg_blocking_pids(:pid)"), {"pid": second_pid[0]}).scalar_one()
            )

    worker = threading.Thread(target=second)
    worker.start()
    try:
        wait_until(waits_on_the_first, timeout=30, what=lambda: f"the second request to wait on the first ({outcome})")
        assert outcome == {}
    finally:
        if first_ends == "commit":
            first.commit()
        else:
            first.rollback()
        first.close()
        worker.join(timeout=30)
    assert not worker.is_alive() and "error" not in outcome, outcome
    with engine.connect() as conn:
        counts = tuple(
            conn.execute(
                text("SELECT d.requests, k.api_hits FROM api_key_days d JOIN api_keys k ON k.id = d.key_id")
            ).one()
        )
    assert counts == (counted_before + 1, counted_before + 1)
    if first_ends == "commit":
        refused = outcome["refused"]
        assert isinstance(refused, LimitReached) and refused.kind == "requests"
        assert refused.usage.requests == counted_before + 1 and set(outcome) == {"refused"}
    else:
        usage = outcome["usage"]
        assert isinstance(usage, Usage) and usage.requests == counted_before + 1 and set(outcome) == {"usage"}


@pytest.mark.parametrize("grab", [False, True], ids=["requests", "grabs"])
def test_many_requests_racing_pass_exactly_the_limit(clean_db, grab):
    engine = clean_db
    limit, threads, each = 10, 5, 6
    with Session(engine) as s, s.begin():
        key_row, _ = apikeys.create_key(s, "sonarr", **{"grabs_per_day" if grab else "requests_per_day": limit})
        key_id = key_row.id
    start = threading.Barrier(threads)
    passed: list[int] = []
    refused: list[str] = []
    failures: list[Exception] = []

    def requests() -> None:
        try:
            start.wait(timeout=30)
            for _ in range(each):
                try:
                    with Session(engine) as s, s.begin():
                        usage = apikeys.use(s, s.get_one(ApiKey, key_id), grab=grab)
                    passed.append(usage.grabs if grab else usage.requests)
                except LimitReached as exc:
                    refused.append(exc.kind)
        except Exception as exc:  # reported below: an assert in a thread would go unseen
            failures.append(exc)

    workers = [threading.Thread(target=requests) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert failures == [] and not any(w.is_alive() for w in workers)
    # Each count seen once, the limit exactly: no two requests passed on one count.
    assert sorted(passed) == list(range(1, limit + 1))
    assert refused == ["grabs" if grab else "requests"] * (threads * each - limit)
    with engine.connect() as conn:
        stored = tuple(conn.execute(text("SELECT api_hits, grabs FROM api_keys")).one())
    assert stored == (limit, limit if grab else 0)


def test_0017_adds_the_limits_and_the_days_and_takes_them_away(postgres, settings):
    url = postgres.create_database("seed_migration_0017")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    try:
        command.upgrade(alembic_config(), "0016")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO api_keys (name, key_hash, api_hits, grabs) VALUES ('old', '\\x01', 7, 3)"))
        command.upgrade(alembic_config(), "0017")
        columns = [c["name"] for c in inspect(engine).get_columns("api_keys")]
        assert columns == COLUMNS[:2] + ["key_hash"] + COLUMNS[2:7] + ["requests_per_day", "grabs_per_day"]
        with engine.begin() as conn:
            # An existing key stays unlimited, its totals kept.
            assert tuple(
                conn.execute(text("SELECT requests_per_day, grabs_per_day, api_hits, grabs FROM api_keys")).one()
            ) == (None, None, 7, 3)
            for column in ("requests_per_day", "grabs_per_day"):
                for bad in (0, 10**9 + 1):
                    with pytest.raises(IntegrityError), conn.begin_nested():
                        conn.execute(text(f"UPDATE api_keys SET {column} = :v"), {"v": bad})
            conn.execute(text("UPDATE api_keys SET requests_per_day = 1000000000, grabs_per_day = 1"))
            conn.execute(
                text(
                    "INSERT INTO api_key_days (key_id, day, requests, grabs, first_request)"
                    " SELECT id, current_date, 1, 0, now() FROM api_keys"
                )
            )
        assert inspect(engine).get_pk_constraint("api_key_days")["constrained_columns"] == ["key_id", "day"]
        command.downgrade(alembic_config(), "0016")
        assert "api_key_days" not in inspect(engine).get_table_names()
        assert [c["name"] for c in inspect(engine).get_columns("api_keys")] == columns[:-2]
        with engine.connect() as conn:
            assert tuple(conn.execute(text("SELECT name, api_hits, grabs FROM api_keys")).one()) == ("old", 7, 3)
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def test_a_request_counted_does_not_wait_for_the_disk(clean_db):
    """apikeys.use: the transaction that counts commits without a WAL flush (synchronous_commit
    off for it alone), set by the counting statement itself; the next transaction is as before."""
    with session_scope() as s:
        key, _ = apikeys.create_key(s, "prowlarr")
    with session_scope() as s:
        s.execute(text("SET LOCAL synchronous_commit = on"))
        apikeys.use(s, key, grab=False)
        assert s.execute(text("SHOW synchronous_commit")).scalar_one() == "off"
    with session_scope() as s:
        s.execute(text("SET LOCAL synchronous_commit = on"))
        assert s.execute(text("SHOW synchronous_commit")).scalar_one() == "on"
        apikeys.record_use(s, key, grab=True)
        assert s.execute(text("SHOW synchronous_commit")).scalar_one() == "off"
        assert apikeys.list_usage(s, "prowlarr")[0][1].grabs == 1
