"""gunicorn settings for the API (`gunicorn -c ops/gunicorn.conf.py wsgi:app`), from app.config."""
import json

from gunicorn import util

import sys

from app.config import SettingsError, get_settings

try:
    _settings = get_settings()
except SettingsError as exc:
    # One line naming the variable, exit 2, as `flask seed` and the workers do, not gunicorn's
    # traceback through this file.
    print(f"gunicorn: {exc}", file=sys.stderr)
    raise SystemExit(2) from None

bind = _settings.api_bind
workers = _settings.api_workers
worker_class = "gthread"
threads = 4
# Batches are up to 64 MiB as sent: give slow links time to upload one.
timeout = 300
graceful_timeout = 30
keepalive = 30
# HTTPS when a certificate is configured (nodes verify it); plain HTTP behind a TLS proxy otherwise.
certfile = _settings.api_certfile
keyfile = _settings.api_keyfile
accesslog = "-"
errorlog = "-"
# Each worker opens its own database pool after the fork (app.db makes the engine lazily per pid).
preload_app = False


def write_json_error(sock, status_int, reason, mesg):
    """gunicorn's own answer to a request it refuses before the app sees it (a request line or a
    header too large, a malformed request), in the API's error format instead of an HTML page."""
    code = "internal_error" if status_int == 500 else reason.lower().replace(" ", "_")
    body = json.dumps({"error": code, "message": mesg or reason}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    util.write_nonblock(sock, head + body)


def post_worker_init(worker):
    """Have the worker refuse requests in JSON (write_json_error), load the broker's transport
    (kombu's Redis transport and redis-py) and open the first database connections before the
    first request: the first batch a worker took would otherwise pay for the import (about a
    third of a second of CPU) and the connections while a node waits for its answer."""
    from app.celery_app import warm_broker_transport
    from app.db import warm_pool

    # The worker writes its refusals with gunicorn.util.write_error, which has no setting.
    util.write_error = write_json_error
    # Warming only saves the first requests some time. A hook that raises is a worker that
    # failed to boot, and gunicorn then stops the whole API: a database going down while a
    # worker starts must not do that (its requests get 503 until it is back).
    try:
        warm_broker_transport()
        warm_pool(2)
    except Exception as exc:  # noqa: BLE001 - see above
        worker.log.warning("warming the worker failed, it starts cold: %s: %s", type(exc).__name__, exc)
