"""/healthz, /livez, /readyz and JSON errors."""

import dataclasses

import pytest

from app.api.health import COMPILED_PARTS, MIGRATIONS
from edge.digest.compiled import IMPL
from tests.fixtures.waiting import wait_until


def test_healthz_checks_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {
        "status": "ok",
        "database": "ok",
        "impl": IMPL,
        "compiled": dict.fromkeys(COMPILED_PARTS, IMPL == "c"),
    }


def test_healthz_tells_which_implementation_of_the_compiled_parts_runs(client):
    """ops/setup builds every compiled part (or stops): with SEED_IMPL unset they all run, with
    SEED_IMPL=python none does."""
    body = client.get("/healthz").get_json()
    assert body["impl"] == IMPL in ("c", "python")
    assert set(body["compiled"]) == {"edge.digest._overview", "app.services._copyrows", "app.services._msgcolumns"}
    assert all(built == (IMPL == "c") for built in body["compiled"].values()), body


def test_unknown_path_is_a_json_error(client):
    response = client.get("/nope")
    assert response.status_code == 404
    body = response.get_json()
    assert body["error"] == "not_found" and body["message"]


def test_wrong_method_is_a_json_405(client):
    response = client.post("/healthz")
    assert response.status_code == 405
    assert response.get_json()["error"] == "method_not_allowed"
    assert "GET" in response.headers["Allow"]


# /livez and /readyz: unauthenticated, for orchestrators.


def test_livez_answers_without_looking_at_anything(client):
    response = client.get("/livez")
    assert response.status_code == 200 and response.get_json() == {"status": "ok"}


def test_readyz_lists_its_checks_when_ready(client):
    from app.api.health import migrations_head

    response = client.get("/readyz")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["status"] == "ok"
    # The replica's check is there because the tests' app reads from one (DATABASE_READ_URL).
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok",
        "redis": "ok",
        "migrations": "ok",
        "replica": "ok",
    }
    assert 0 <= body["checks"]["replica"]["lag_seconds"] < 30
    assert body["checks"]["migrations"]["revision"] == body["checks"]["migrations"]["head"] == migrations_head()
    assert migrations_head() == sorted(p.name for p in (MIGRATIONS / "versions").glob("[0-9]*.py"))[-1].split("_")[0]


def not_ready(response, failed: str, *words: str) -> dict:
    assert response.status_code == 503, response.get_json()
    body = response.get_json()
    assert (body["status"], body["error"]) == ("unavailable", "not_ready")
    assert body["checks"][failed]["status"] == "failed"
    assert body["message"].startswith(f"{failed}: ") or f"; {failed}: " in body["message"]
    for word in words:
        assert word in body["checks"][failed]["message"], body
    return body


def test_readyz_is_503_with_the_reason_while_redis_is_down(client, redis_server, celery_worker, celery_app):
    redis_server.stop()
    try:
        body = not_ready(client.get("/readyz"), "redis", "ConnectionError")
        assert body["checks"]["database"]["status"] == body["checks"]["migrations"]["status"] == "ok"
        assert client.get("/livez").status_code == 200
    finally:
        redis_server.start()
    assert client.get("/readyz").status_code == 200
    celery_worker.wait_ready(celery_app)


def test_readyz_is_503_with_the_reason_while_postgresql_is_down(client, postgres, clean_db):
    from app.db import reset_engine

    postgres.run("stop")
    try:
        body = not_ready(client.get("/readyz"), "database", "OperationalError")
        assert body["checks"]["migrations"] == {
            "status": "failed",
            "message": "not checked: the database is unavailable",
        }
        assert body["checks"]["redis"]["status"] == "ok"
        assert client.get("/livez").status_code == 200
    finally:
        postgres.run("start")
        reset_engine()
        clean_db.dispose()
    # Ready again once the replica streams from the restarted primary (its WAL receiver connects
    # again on its own, within seconds).
    assert wait_until(
        lambda: client.get("/readyz").status_code == 200,
        timeout=60,
        what=lambda: f"ready again: {client.get('/readyz').get_json()}",
    )


@pytest.fixture
def database_at(postgres, settings):
    """The app on a database of its own, migrated to the given revision (None: not at all)."""
    from alembic import command

    from app.config import override_settings
    from app.db import reset_engine
    from tests.app.test_migrations import alembic_config

    def at(revision: str | None) -> None:
        url = postgres.create_database("seed_readyz_check")
        override_settings(dataclasses.replace(settings, database_url=url))
        reset_engine()
        if revision is not None:
            command.upgrade(alembic_config(), revision)
        reset_engine()

    try:
        yield at
    finally:
        override_settings(settings)
        reset_engine()


def test_readyz_is_503_while_the_schema_is_behind_the_code(client, database_at):
    from app.api.health import migrations_head

    head = migrations_head()
    older = f"{int(head) - 1:04d}"
    database_at(older)
    body = not_ready(client.get("/readyz"), "migrations", f"revision {older}", f"needs {head}", "alembic upgrade head")
    assert (body["checks"]["migrations"]["revision"], body["checks"]["migrations"]["head"]) == (older, head)
    assert body["checks"]["database"]["status"] == "ok"
    database_at(None)
    not_ready(client.get("/readyz"), "migrations", "no schema")
