"""Settings come from the environment, with clear errors for bad values."""

import pytest

from app.config import Settings, SettingsError, shown_database_url
from edge.digest.settings import NNTPSettings, TLSMode


def test_defaults_need_nothing():
    s = Settings.from_env({})
    assert (s.chunk_size, s.batch_chunks, s.lease_timeout) == (20_000, 10, 900)
    assert (s.live_plan_interval, s.live_lag, s.lease_backfill_every) == (60, 20_000, 4)


def test_live_planning_settings():
    s = Settings.from_env({"LIVE_PLAN_INTERVAL": "5", "LIVE_LAG": "0", "LEASE_BACKFILL_EVERY": "1"})
    assert (s.live_plan_interval, s.live_lag, s.lease_backfill_every) == (5, 0, 1)


def test_the_store_backlog_bound():
    assert Settings.from_env({}).store_backlog == 100
    assert Settings.from_env({"STORE_BACKLOG": "0"}).store_backlog == 0  # no bound
    assert Settings.from_env({"STORE_BACKLOG": "8"}).store_backlog == 8


def test_values_are_read_and_checked():
    s = Settings.from_env(
        {
            "DATABASE_URL": "postgresql+psycopg://h/db",
            "DB_SEARCH_PATH": "dev_ann",
            "CHUNK_SIZE": "5000",
            "NNTP_SSL": "yes",
            "NNTP_USER": "me",
            "NNTP_PASSWORD": "secret",
        }
    )
    assert (s.database_url, s.db_search_path, s.chunk_size, s.nntp.tls) == (
        "postgresql+psycopg://h/db",
        "dev_ann",
        5000,
        TLSMode.IMPLICIT,
    )
    assert "password" not in s.as_public_dict()["nntp"] and "secret" not in str(s.as_public_dict())
    assert "secret" not in repr(s)


def test_nntp_settings_are_the_edges():
    """The same variables as an edge node's, with the same defaults: NNTPS unless NNTP_SSL=0."""
    assert Settings.from_env({}).nntp == NNTPSettings()
    assert Settings.from_env({}).nntp.address == "news.example.net:563"
    s = Settings.from_env(
        {
            "NNTP_HOST": "127.0.0.1",
            "NNTP_PORT": "1119",
            "NNTP_SSL": "0",
            "NNTP_COMPRESS": "no",
            "NNTP_TIMEOUT": "5",
            "NNTP_USER": "me",
            "NNTP_PASSWORD": "secret",
        }
    )
    assert s.nntp == NNTPSettings(
        host="127.0.0.1", port=1119, tls=TLSMode.NONE, user="me", password="secret", compress=False, timeout=5.0
    )
    assert Settings.from_env({"NNTP_STARTTLS": "1"}).nntp.tls is TLSMode.STARTTLS


@pytest.mark.parametrize(
    "env, message",
    [
        ({"CHUNK_SIZE": "many"}, "CHUNK_SIZE must be an integer"),
        ({"LEASE_TIMEOUT": "0"}, "LEASE_TIMEOUT must be at least 1"),
        ({"NNTP_SSL": "maybe"}, "NNTP_SSL must be a boolean"),
        ({"NNTP_PORT": "70000"}, "NNTP_PORT must be between 1 and 65535, got 70000"),
        ({"NNTP_SSL": "1", "NNTP_STARTTLS": "1"}, "NNTP_SSL and NNTP_STARTTLS exclude each other"),
        ({"NNTP_PASSWORD": "secret"}, "NNTP_PASSWORD is set but NNTP_USER is not"),
        ({"DB_SEARCH_PATH": "dev; drop table x"}, "DB_SEARCH_PATH must be comma-separated schema names"),
        ({"LEASE_TIMEOUT": "abc"}, "LEASE_TIMEOUT must be an integer, got 'abc'"),
        ({"LIVE_LAG": "-1"}, "LIVE_LAG must be at least 0, got -1"),
        ({"STORE_BACKLOG": "-5"}, "STORE_BACKLOG must be at least 0, got -5"),
        ({"STORE_BACKLOG": "lots"}, "STORE_BACKLOG must be an integer"),
        ({"LIVE_PLAN_INTERVAL": "0"}, "LIVE_PLAN_INTERVAL must be at least 1"),
        ({"LEASE_BACKFILL_EVERY": "often"}, "LEASE_BACKFILL_EVERY must be an integer"),
        (
            {"DATABASE_URL": "postgres://me:secret@db/seed"},
            r"DATABASE_URL must start postgresql\+psycopg:// \(the driver the data center uses\), not postgres://$",
        ),
        ({"DATABASE_URL": "postgresql://db/seed"}, r"DATABASE_URL must start postgresql\+psycopg://"),
        (
            {"DATABASE_URL": "db.example.net/seed"},
            r"DATABASE_URL must be a postgresql\+psycopg://user@host/database URL",
        ),
        (
            {"DATABASE_READ_URL": "postgres://me:secret@replica/seed"},
            r"DATABASE_READ_URL must start postgresql\+psycopg://",
        ),
        ({"DATABASE_READ_MAX_LAG": "0"}, "DATABASE_READ_MAX_LAG must be at least 1"),
    ],
)
def test_bad_values_are_clear_errors(env, message):
    with pytest.raises(SettingsError, match=message) as error:
        Settings.from_env(env)
    assert "secret" not in str(error.value)


def test_the_database_password_is_never_shown():
    s = Settings.from_env(
        {
            "DATABASE_URL": "postgresql+psycopg://me:secret@db.example.net:5433/seed",
            "DATABASE_READ_URL": "postgresql+psycopg://me:secret@replica.example.net/seed",
        }
    )
    assert s.database_url == "postgresql+psycopg://me:secret@db.example.net:5433/seed"
    assert s.as_public_dict()["database_url"] == "postgresql+psycopg://me:***@db.example.net:5433/seed"
    assert s.as_public_dict()["database_read_url"] == "postgresql+psycopg://me:***@replica.example.net/seed"
    assert Settings.from_env({}).database_read_url is None
    assert shown_database_url("postgresql+psycopg://db.example.net/seed") == "postgresql+psycopg://db.example.net/seed"
