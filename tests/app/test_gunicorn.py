"""The API under gunicorn over HTTPS: the certificate verifies with its CA file, a wrong one does not."""

import os
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.request

import pytest

from tests.fixtures.api_server import make_certificate
from tests.fixtures.postgres import REPO

# Where a worker's warming connects to nothing: ports nobody listens on.
NOWHERE = {"DATABASE_URL": "postgresql+psycopg://seed@127.0.0.1:1/none", "REDIS_URL": "redis://127.0.0.1:1/0"}


def python_says(code: str, **env: str) -> str:
    """What a Python process of its own prints running `code` in the repository, with `env` added
    to this one's environment."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, env={**os.environ, **env}
    )
    return out.stdout.strip()


def test_api_serves_https_that_verifies(api_server, clean_db):
    context = ssl.create_default_context(cafile=api_server.cafile)
    with urllib.request.urlopen(f"{api_server.url}/healthz", context=context, timeout=10) as response:
        assert response.status == 200
    request = urllib.request.Request(f"{api_server.url}/api/v1/seed/lease", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, context=context, timeout=10)
    assert refused.value.code == 401


def test_a_certificate_from_another_ca_is_refused(api_server):
    other_cert, _ = make_certificate(tempfile.mkdtemp(prefix="other-ca."), "other")
    context = ssl.create_default_context(cafile=other_cert)
    with pytest.raises(urllib.error.URLError) as failed:
        urllib.request.urlopen(f"{api_server.url}/healthz", context=context, timeout=10)
    assert isinstance(failed.value.reason, ssl.SSLCertVerificationError)


def healthz_over_tls(
    server, context: ssl.SSLContext, session: ssl.SSLSession | None
) -> tuple[bool, ssl.SSLSession | None]:
    """A request on a new connection offering `session`: whether it was resumed, and the session
    once the answer is read (TLS 1.3 sends its session tickets after the handshake)."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        tls = context.wrap_socket(raw, server_hostname="127.0.0.1", session=session)
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        return bool(tls.session_reused), tls.session


def test_a_client_coming_back_resumes_its_tls_session_until_the_certificate_changes(api_server):
    """ops/gunicorn.conf.py keeps one TLS context a worker (gunicorn's own factory makes one for
    every connection, which can resume no session): a client that comes back with its session
    resumes it, on whichever worker issued it. A certificate renewed in place (its file changed)
    is served from the next connection, in a new context, where the sessions of the old one
    resume no more."""
    context = ssl.create_default_context(cafile=api_server.cafile)
    _, first = healthz_over_tls(api_server, context, None)
    resumed = 0
    # 2 workers, each with its own session keys: the first session is offered every time, so that
    # each connection the worker that issued it takes resumes it. (Offering the last connection's
    # session instead resumed none in 20 when the workers took the connections in turn.)
    for _ in range(20):
        reused, session = healthz_over_tls(api_server, context, first)
        resumed += reused
    assert resumed > 0
    before = os.stat(api_server.cafile).st_mtime_ns
    os.utime(api_server.cafile, ns=(before + 1_000_000_000, before + 1_000_000_000))
    assert not any(healthz_over_tls(api_server, context, session)[0] for _ in range(6))


def test_the_broker_transport_is_loaded_before_the_first_request():
    """ops/gunicorn.conf.py warms each worker: the first batch does not pay for the import (and
    warming connects to nothing: the broker here is a port nobody listens on)."""
    code = (
        "import sys; from wsgi import app; from app.celery_app import warm_broker_transport;"
        " assert 'kombu.transport.redis' not in sys.modules; warm_broker_transport();"
        " print('kombu.transport.redis' in sys.modules)"
    )
    assert python_says(code, REDIS_URL=NOWHERE["REDIS_URL"]) == "True"


def test_a_worker_configures_the_orm_mappers_as_it_starts():
    """warm_pool configures the mappers (the first store or request would), even when the
    database does not answer (a port nobody listens on)."""
    code = (
        "from sqlalchemy import inspect; from app.models import SeedBatch; from app.db import warm_pool;"
        " assert not inspect(SeedBatch).configured; warm_pool(1); print(inspect(SeedBatch).configured)"
    )
    assert python_says(code, DATABASE_URL=NOWHERE["DATABASE_URL"]) == "True"


def test_a_worker_opens_its_database_connections_as_it_starts(engine, settings):
    """warm_pool (gunicorn's post_worker_init, Celery's worker_process_init): the connections are
    open in the pool before the first request; a database that does not answer is only said."""
    from app.config import Settings, override_settings
    from app.db import get_engine, reset_engine, warm_pool

    reset_engine()
    try:
        assert warm_pool(3) == 3
        assert get_engine().pool.checkedin() == 3  # open, waiting for the first request
        override_settings(Settings(database_url="postgresql+psycopg://seed@127.0.0.1:1/none"))
        reset_engine()
        assert warm_pool(2) == 0  # refused: logged, the worker starts all the same
    finally:
        override_settings(settings)
        reset_engine()


def test_a_worker_that_cannot_warm_up_still_starts(monkeypatch, caplog):
    """A database going down while a worker starts (its warm connections closed under it) must not
    fail the worker's boot: gunicorn would stop the whole API. The worker starts cold and says so."""
    import gc
    import logging
    import runpy

    from gunicorn import util

    import app.db

    def shut_down(connections):
        raise RuntimeError("terminating connection due to administrator command")

    monkeypatch.setattr(app.db, "warm_pool", shut_down)
    monkeypatch.setattr(util, "write_error", util.write_error)  # the hook replaces it: put it back after
    monkeypatch.setattr(gc, "freeze", lambda: None)  # not this process's objects (the test below)
    hooks = runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "..", "ops", "gunicorn.conf.py"))
    worker = type("Worker", (), {"log": logging.getLogger("test.gunicorn")})()
    with caplog.at_level(logging.WARNING, logger="test.gunicorn"):
        hooks["post_worker_init"](worker)
    assert "starts cold" in caplog.text and "administrator command" in caplog.text
    assert util.write_error is hooks["write_json_error"]


def test_a_workers_heartbeat_file_is_in_memory(api_server):
    """gunicorn's workers change a file's mode every turn of their loop to tell the arbiter they
    live: in /dev/shm (ops/gunicorn.conf.py, worker_tmp_dir), not on the disk's file system."""
    workers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:  # gone meanwhile
                continue
            if parent == api_server.proc.pid:
                workers.append(int(entry))
    assert workers
    for worker in workers:
        files = []
        for fd in os.listdir(f"/proc/{worker}/fd"):
            try:
                files.append(os.readlink(f"/proc/{worker}/fd/{fd}"))
            except OSError:
                continue
        assert any(name.startswith("/dev/shm/wgunicorn-") for name in files), files


def test_a_worker_freezes_what_it_loaded_as_it_starts():
    """post_worker_init ends with gc.freeze(): the app's objects, loaded as the worker started,
    are out of the garbage collector's sight, so that a full collection, which holds every thread
    of the worker, scans only what requests made since. Run as gunicorn runs the hook, in a process
    of its own (a freeze is for the rest of a process's life); its warming fails there (nothing
    listens on the ports), which it only says."""
    code = (
        "import gc, logging, runpy;"
        " hooks = runpy.run_path('ops/gunicorn.conf.py');"
        " assert gc.get_freeze_count() == 0;"
        " worker = type('Worker', (), {'log': logging.getLogger('worker')})();"
        " hooks['post_worker_init'](worker);"
        " print(gc.get_freeze_count())"
    )
    assert int(python_says(code, **NOWHERE)) > 10_000
