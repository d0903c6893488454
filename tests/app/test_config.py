"""Settings come from the environment, with clear errors for bad values."""
import pytest

from app.config import Settings, SettingsError


def test_defaults_need_nothing():
    s = Settings.from_env({})
    assert (s.chunk_size, s.batch_chunks, s.lease_timeout) == (20_000, 10, 900)


def test_values_are_read_and_checked():
    s = Settings.from_env({"DATABASE_URL": "postgresql+psycopg://h/db", "DB_SEARCH_PATH": "dev_ann",
                           "CHUNK_SIZE": "5000", "NNTP_SSL": "yes", "NNTP_PASSWORD": "secret"})
    assert (s.database_url, s.db_search_path, s.chunk_size, s.nntp_ssl) == (
        "postgresql+psycopg://h/db", "dev_ann", 5000, True)
    assert "nntp_password" not in s.as_public_dict()
    assert "secret" not in repr(s)


@pytest.mark.parametrize("env, message", [
    ({"CHUNK_SIZE": "many"}, "CHUNK_SIZE must be an integer"),
    ({"LEASE_TIMEOUT": "0"}, "LEASE_TIMEOUT must be at least 1"),
    ({"NNTP_SSL": "maybe"}, "NNTP_SSL must be a boolean"),
    ({"DB_SEARCH_PATH": "dev; drop table x"}, "DB_SEARCH_PATH must be comma-separated schema names"),
])
def test_bad_values_are_clear_errors(env, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)
