"""The data center's one logging configuration (app/logs.py): the line's fields in text and in
JSON, LOG_LEVEL and LOG_FORMAT read and checked, credentials blanked wherever they would show
(the real credentials the services make), `flask seed` logging through it, and gunicorn for real
with LOG_FORMAT=json: its error and access logs as JSON lines, INFO kept, each request's duration,
no key of a request in the log."""

from __future__ import annotations

import json
import logging
import re
import ssl
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.config import Settings, SettingsError
from app.logs import REDACTED, Formatter, StderrHandler, configure, logging_config, redact
from app.services import apikeys, credentials, operators
from app.services.credentials import new_operator_key, new_token
from tests.fixtures.api_server import start_api, stop_api

TEXT_LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (\w+) (\S+) \[(\d+)\] (.*)")


def record(message: str, *args, name: str = "app.test", level: int = logging.INFO, exc_info=None):
    return logging.LogRecord(name, level, __file__, 1, message, args, exc_info)


def test_a_text_line_has_the_time_in_utc_the_level_the_logger_and_the_message():
    line = Formatter().format(record("stored %d articles", 1_000, level=logging.WARNING))
    time, level, logger, pid, message = TEXT_LINE.fullmatch(line).groups()
    assert (level, logger, message) == ("WARNING", "app.test", "stored 1000 articles") and int(pid) > 0


def test_a_json_line_has_the_same_fields_and_the_traceback():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = record("it failed", level=logging.ERROR, exc_info=sys.exc_info())
    line = Formatter(json_lines=True).format(failed)
    assert "\n" not in line
    document = json.loads(line)
    assert {k: document[k] for k in ("level", "logger", "message")} == {
        "level": "ERROR",
        "logger": "app.test",
        "message": "it failed",
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", document["time"])
    assert document["exception"].startswith("Traceback") and "ValueError: boom" in document["exception"]
    plain = json.loads(Formatter(json_lines=True).format(record("fine")))
    assert "exception" not in plain and "task" not in plain


def test_an_access_line_carries_the_requests_figures():
    atoms = {
        "h": "10.0.0.1",
        "r": "GET /api?t=search&q=x&apikey=seedapi_secret HTTP/1.1",
        "s": "200",
        "b": "512",
        "B": 512,
        "m": "GET",
        "U": "/api",
        "q": "t=search&q=x&apikey=seedapi_secret",
        "a": "Sonarr",
        "D": 12_345,
        "L": "0.012345",
        "{authorization}i": "Bearer seed_notlogged",
    }
    access = logging.LogRecord(
        "gunicorn.access", logging.INFO, __file__, 1, '%(h)s "%(r)s" %(s)s %(b)s %(L)ss "%(a)s"', (atoms,), None
    )
    document = json.loads(Formatter(json_lines=True).format(access))
    assert (
        document["message"] == f'10.0.0.1 "GET /api?t=search&q=x&apikey={REDACTED} HTTP/1.1" 200 512 0.012345s "Sonarr"'
    )
    assert {k: document[k] for k in ("remote", "method", "path", "status", "bytes", "duration_ms")} == {
        "remote": "10.0.0.1",
        "method": "GET",
        "path": "/api",
        "status": 200,
        "bytes": 512,
        "duration_ms": 12.345,
    }
    assert "seedapi_secret" not in json.dumps(document) and "notlogged" not in json.dumps(document)


@pytest.mark.parametrize(
    "secret",
    [new_token(), new_operator_key(), new_token(credentials.API_KEY_PREFIX), new_token(credentials.TOKEN_PREFIX)],
)
def test_the_systems_credentials_are_blanked_wherever_they_show(secret):
    for shown in (
        f"token {secret} refused",
        f"GET /search?q=a&apikey={secret}&page=2 HTTP/1.1",
        f"Authorization: Bearer {secret}",
        f"('{secret}',)",
        f"key={secret}",
    ):
        assert secret not in redact(shown) and REDACTED in redact(shown), shown
    assert redact("GET /search?q=a&apikey=x&page=2").endswith(f"apikey={REDACTED}&page=2")


def test_other_credentials_are_blanked_and_the_rest_kept():
    assert redact("redis://:hunter2@127.0.0.1:6379/0") == f"redis://:{REDACTED}@127.0.0.1:6379/0"
    assert redact("postgresql+psycopg://seed:pw@db/seed") == f"postgresql+psycopg://seed:{REDACTED}@db/seed"
    assert redact("Authorization: Basic dXNlcjpwYXNz") == f"Authorization: Basic {REDACTED}"
    assert redact("/api?t=get&id=123&token=abc") == f"/api?t=get&id=123&token={REDACTED}"
    # Names that merely start like a credential stay: a constraint, a table, a node's name.
    kept = 'duplicate key value violates unique constraint "seed_ranges_group_id_first_id_key"; node seed_paris'
    assert redact(kept) == kept


def test_log_settings_are_read_and_checked():
    assert (Settings.from_env({}).log_level, Settings.from_env({}).log_format) == ("INFO", "text")
    read = Settings.from_env({"LOG_LEVEL": "debug", "LOG_FORMAT": "JSON"})
    assert (read.log_level, read.log_format) == ("DEBUG", "json")
    with pytest.raises(
        SettingsError, match=r"^LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'"
    ):
        Settings.from_env({"LOG_LEVEL": "loud"})
    with pytest.raises(SettingsError, match=r"^LOG_FORMAT must be one of text, json, got 'xml'"):
        Settings.from_env({"LOG_FORMAT": "xml"})


def test_one_configuration_for_the_root_and_gunicorns_loggers(capsys):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure(Settings(log_level="WARNING", log_format="json"))
        logging.getLogger("app.anything").info("not written")
        logging.getLogger("app.anything").warning("written %s", "Bearer seed_abc")
        logging.getLogger("gunicorn.access").info("an access line")
        lines = capsys.readouterr().err.splitlines()
        assert [json.loads(line)["message"] for line in lines] == [f"written Bearer {REDACTED}", "an access line"]
        config = logging_config(Settings())
        assert config["loggers"]["gunicorn.error"]["handlers"] == config["root"]["handlers"] == ["stderr"]
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_flask_seed_logs_through_the_configuration(cli_runner):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        result = cli_runner.invoke(args=["seed", "groups", "list"])
        assert result.exit_code == 0, result.output
        (handler,) = [h for h in root.handlers if isinstance(h, StderrHandler)]
        assert isinstance(handler.formatter, Formatter) and root.level == logging.INFO
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_gunicorn_logs_json_lines_with_durations_and_no_key(service_env, clean_db):
    """The API under gunicorn with LOG_FORMAT=json: every line of its output is a JSON object
    with the fields; INFO lines are there (a worker's start, the access log); each access line
    has the request's duration; the operator key, the API key and a node token sent with the
    requests (in the header, or in the URL where a client puts it) are nowhere."""
    from app.db import session_scope

    with session_scope() as s:
        operator_key = operators.create_key(s, "ops")[1]
        api_key = apikeys.create_key(s, "reader")[1]
    wrong_token = new_token()
    directory = tempfile.mkdtemp(prefix="api-logs.")
    server = start_api({**service_env, "LOG_FORMAT": "json"}, directory, workers=1)
    try:
        context = ssl.create_default_context(cafile=server.cafile)

        def get(path: str, token: str | None = None) -> int:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(server.url + path, headers=headers), context=context, timeout=30
                ) as response:
                    return response.status
            except urllib.error.HTTPError as refused:
                return refused.code

        assert get("/api/v1/seed/status", operator_key) == 200
        assert get("/api/v1/seed/status", wrong_token) == 401
        assert get(f"/api?t=search&q=x&apikey={api_key}&o=json") == 200
        assert get(f"/search?q=x&apikey={api_key}") == 200
        assert get(f"/search?q=x&apikey={wrong_token}") == 401
    finally:
        stop_api(server)
    output = server.output()
    documents = [json.loads(line) for line in output.splitlines()]  # every line is one JSON object
    for document in documents:
        assert {"time", "level", "logger", "message"} <= document.keys(), document
    for secret in (operator_key, api_key, wrong_token):
        assert secret not in output
    access = [d for d in documents if d["logger"] == "gunicorn.access"]
    assert [(d["method"], d["path"], d["status"]) for d in access if d["path"] != "/healthz"] == [
        ("GET", "/api/v1/seed/status", 200),
        ("GET", "/api/v1/seed/status", 401),
        ("GET", "/api", 200),
        ("GET", "/search", 200),
        ("GET", "/search", 401),
    ]
    assert all(d["duration_ms"] >= 0 and re.search(r" \d+\.\d{6}s ", d["message"]) for d in access)
    assert any(f"apikey={REDACTED}" in d["message"] for d in access)
    infos = {d["logger"] for d in documents if d["level"] == "INFO"}
    assert {"gunicorn.error", "gunicorn.access", "app"} <= infos, infos


def test_gunicorns_child_exit_marks_a_workers_live_gauges_dead(tmp_path, monkeypatch):
    """ops/gunicorn.conf.py's child_exit: with PROMETHEUS_MULTIPROC_DIR, a gone worker's live
    gauge files are removed (app.metrics.mark_process_dead); without it, nothing."""
    import runpy
    from types import SimpleNamespace

    hooks = runpy.run_path(str(Path(__file__).resolve().parents[2] / "ops" / "gunicorn.conf.py"))
    assert hooks["logconfig_dict"]["root"]["handlers"] == ["stderr"]
    from app.metrics import process_identifier

    # Files are named by host and pid (app/metrics.py), as the hook marks them.
    gone = tmp_path / f"gauge_livesum_{process_identifier(4242)}.db"
    alive = tmp_path / f"gauge_livesum_{process_identifier(4343)}.db"
    gone.write_bytes(b"")
    alive.write_bytes(b"")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    hooks["child_exit"](None, SimpleNamespace(pid=4242))
    assert gone.exists()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    hooks["child_exit"](None, SimpleNamespace(pid=4242))
    assert not gone.exists() and alive.exists()
