"""An operator's mistake in the data center's settings, or a database that cannot be used, is one
line on stderr naming what to set, not a traceback: exit 2 for a setting, 1 for a service. The
real commands (`flask seed ...`, `celery -A app.worker worker`) run as subprocesses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fixtures.ports import free_port
from tests.fixtures.postgres import REPO

PASSWORD = "hunter2"


def run(argv: list[str], env: dict[str, str], **changes: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *argv], env={**env, **changes}, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    """The only line of stderr (and no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


FLASK = ["flask", "seed", "groups", "list"]
CELERY = ["celery", "-A", "app.worker", "worker", "-Q", "control", "-c", "1", "--without-gossip", "--without-mingle"]
GUNICORN = ["gunicorn", "-c", "ops/gunicorn.conf.py", "wsgi:app"]


@pytest.mark.parametrize("argv", [FLASK, CELERY, GUNICORN], ids=["flask", "celery", "gunicorn"])
@pytest.mark.parametrize(
    "changes, message",
    [
        ({"LEASE_TIMEOUT": "abc"}, "LEASE_TIMEOUT must be an integer, got 'abc'"),
        (
            {"DATABASE_URL": f"postgres://seed:{PASSWORD}@127.0.0.1:5432/seed"},
            "DATABASE_URL must start postgresql+psycopg:// (the driver the data center uses), not postgres://",
        ),
        (
            {"DATABASE_URL": "postgresql://127.0.0.1/seed"},
            "DATABASE_URL must start postgresql+psycopg:// (the driver the data center uses), not postgresql://",
        ),
    ],
    ids=["lease_timeout", "postgres_scheme", "psycopg2_scheme"],
)
def test_a_bad_setting_is_one_line_and_exit_2(service_env, argv, changes, message):
    result = run(argv, service_env, **changes)
    assert result.returncode == 2, result.stderr
    assert one_line(result) == f"{argv[0]}: {message}"
    assert PASSWORD not in result.stderr + result.stdout


def test_an_unreachable_postgresql_is_one_line_and_exit_1(service_env):
    port = free_port()
    result = run(FLASK, service_env, DATABASE_URL=f"postgresql+psycopg://seed:{PASSWORD}@127.0.0.1:{port}/seed")
    assert result.returncode == 1, result.stderr
    line = one_line(result)
    assert line.startswith(f"Error: the database postgresql+psycopg://seed:***@127.0.0.1:{port}/seed cannot be used:")
    assert "DATABASE_URL" in line and PASSWORD not in result.stderr + result.stdout


def test_an_unknown_database_is_one_line_and_exit_1(service_env, postgres):
    url = postgres.url("no_such_database")
    result = run(["flask", "seed", "status"], service_env, DATABASE_URL=url)
    assert result.returncode == 1, result.stderr
    line = one_line(result)
    assert f"the database {url} cannot be used" in line
    assert 'database "no_such_database" does not exist' in line


def test_a_command_on_a_good_database_still_runs(service_env, clean_db):
    result = run(["flask", "seed", "operators", "list", "--json"], service_env)
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, "[]", "")
