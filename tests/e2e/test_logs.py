"""The data center's logs of an end-to-end run with LOG_FORMAT=json: gunicorn (3 workers, HTTPS)
and a Celery worker, an edge node reading a group through the provider, the operator's and a
newznab client's requests with their keys (in headers, and in URLs where clients put them), and
wrong keys. Every line the API and the worker wrote is one JSON object with the time (UTC), the
level, the logger and the message; INFO lines are there, access lines say how long each request
took, the ingest task's result names its group and articles; and no node token, operator key or
API key of the run (right or wrong) appears in either log."""

from __future__ import annotations

import json
import re
import shutil
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine

from app.services.credentials import new_operator_key, new_token
from tests.e2e.conftest import (
    BATCH_CHUNKS,
    CHUNK_SIZE,
    FRENCH,
    LEASE_TIMEOUT,
    RANGE_SIZE,
    REQUEUE_AFTER,
    DataCenter,
    migrate,
)

pytestmark = pytest.mark.services

LOGS_DATABASE = "seed_e2e_logs"
LOGS_REDIS_DB = 2
WORKER = "logs-worker"
FIELDS = {"time", "level", "logger", "message"}


@pytest.fixture(scope="module")
def json_dc(postgres, redis_server, service_env) -> Iterator[DataCenter]:
    """A data center of its own (database, Redis database) whose processes log JSON lines."""
    directory = tempfile.mkdtemp(prefix="e2e-logs.")
    database_url = postgres.create_database(LOGS_DATABASE)
    redis_url = redis_server.url.rsplit("/", 1)[0] + f"/{LOGS_REDIS_DB}"
    env = {
        **service_env,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "CHUNK_SIZE": str(CHUNK_SIZE),
        "BATCH_CHUNKS": str(BATCH_CHUNKS),
        "RANGE_SIZE": str(RANGE_SIZE),
        "LEASE_TIMEOUT": str(LEASE_TIMEOUT),
        "BATCH_REQUEUE_AFTER": str(REQUEUE_AFTER),
        "FLASK_APP": "wsgi",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "INFO",
    }
    migrate(env)
    engine = create_engine(database_url, pool_pre_ping=True)
    center = DataCenter(env, engine, postgres, redis_server, directory)
    center.queues = {WORKER: "ingest,repair,control"}
    try:
        center.start()
        yield center
    finally:
        center.kill_edges()
        center.stop()
        engine.dispose()
        shutil.rmtree(directory, ignore_errors=True)


def request(dc: DataCenter, path: str, token: str | None = None) -> int:
    context = ssl.create_default_context(cafile=dc.api.cafile)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(dc.api.url + path, headers=headers), context=context, timeout=30
        ) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as refused:
        return refused.code


def json_lines(log: str, what: str) -> list[dict]:
    documents = []
    for number, line in enumerate(log.splitlines(), 1):
        try:
            document = json.loads(line)
        except ValueError:
            raise AssertionError(f"{what}, line {number} is not JSON: {line[:300]!r}") from None
        assert isinstance(document, dict) and document.keys() >= FIELDS, (what, number, document)
        moment = datetime.strptime(document["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        assert abs((datetime.now(timezone.utc) - moment).total_seconds()) < 3600, (what, document["time"])
        documents.append(document)
    assert documents, f"{what}: nothing logged"
    return documents


def test_an_e2e_run_logs_json_lines_and_no_secret(json_dc, news):
    dc = json_dc
    dc.add_groups(FRENCH)
    with news.provider() as proxy:
        dc.plan(proxy, FRENCH)
        token = dc.create_node("edge-logs")
        node = dc.edge("edge-logs", dc.node_env(token, proxy.port), "--exit-when-idle")
        assert node.wait(180) == 0, node.log()
    dc.wait_finished(sweep=True)
    operator_key = json.loads(dc.flask("operators", "create", "ops", "--json"))["key"]
    api_key = json.loads(dc.flask("apikeys", "create", "reader", "--json"))["key"]
    wrong = {"token": new_token(), "operator": new_operator_key(), "apikey": new_token("seedapi_")}

    assert request(dc, "/api/v1/seed/status", operator_key) == 200
    assert request(dc, "/api/v1/seed/status", token) == 200
    assert request(dc, "/api/v1/seed/status", wrong["operator"]) == 401
    assert request(dc, "/api/v1/seed/lease", wrong["token"]) in (401, 405)
    search = urllib.parse.urlencode({"t": "search", "q": "french", "apikey": api_key, "o": "json"})
    assert request(dc, f"/api?{search}") == 200
    assert request(dc, f"/api?t=search&q=x&apikey={wrong['apikey']}") == 200  # a newznab error document
    assert request(dc, f"/search?q=french&apikey={api_key}") == 200
    dc.call("control.ping")  # the worker logs a task of the control queue too

    api_log = dc.api.output()
    worker_log = dc.workers[WORKER].output()
    api_lines = json_lines(api_log, "the API's log")
    worker_lines = json_lines(worker_log, "the worker's log")
    for secret in (token, operator_key, api_key, *wrong.values()):
        assert secret not in api_log and secret not in worker_log, "a credential was logged"

    # INFO is kept under gunicorn; each request's duration is in its access line.
    assert {"gunicorn.error", "gunicorn.access", "app"} <= {d["logger"] for d in api_lines if d["level"] == "INFO"}
    access = [d for d in api_lines if d["logger"] == "gunicorn.access"]
    batches = [d for d in access if re.fullmatch(r"/api/v1/seed/ranges/\d+/batches", d["path"])]
    assert batches and all(d["method"] == "POST" and d["status"] in (200, 202) for d in batches)
    assert all(isinstance(d["duration_ms"], float) and re.search(r" \d+\.\d{6}s ", d["message"]) for d in access)
    assert any("apikey=[redacted]" in d["message"] and d["path"] == "/api" for d in access)

    # The worker: its start and its tasks as JSON (no banner), the ingest tasks' results with their figures.
    assert any(d["message"].endswith(" ready.") for d in worker_lines)
    stored = [d for d in worker_lines if re.match(r"Task ingest\.store_batch\[\S+\] succeeded", d["message"])]
    assert len(stored) == dc.value("SELECT count(*) FROM seed_batches")
    assert all(f"'group': '{FRENCH}'" in d["message"] and "'articles': " in d["message"] for d in stored)
    assert any(d.get("task") == "control.ping" or "control.ping" in d["message"] for d in worker_lines)
