"""gunicorn settings for the API (`gunicorn -c ops/gunicorn.conf.py wsgi:app`), from app.config."""

import gc
import json
import os
import ssl
import sys
import threading

from gunicorn import util
from gunicorn.http import message
from gunicorn.http.errors import LimitRequestLine

from app.config import SettingsError, get_settings
from app.logs import ACCESS_LOG_FORMAT, logging_config

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
# Each worker tells the arbiter it lives by changing a file's mode, every turn of its loop: on a
# disk's file system that writes the inode's change each time, in memory less (gunicorn's own
# advice): 3.7% of the API's busy samples under bench/catalog.py's 4 clients on /tmp's disk, 2.5% on
# /dev/shm (py-spy).
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
# HTTPS when a certificate is configured (nodes verify it); plain HTTP behind a TLS proxy otherwise.
certfile = _settings.api_certfile
keyfile = _settings.api_keyfile
# One TLS context a worker, made again only when the certificate or key file changes (a renewed
# certificate is served from the next connection, as with gunicorn's own factory): that factory
# makes a context for every connection, reading the key and the system's CA store each time,
# which more than doubles the server's CPU a handshake (bench/tls.py).
_contexts: dict[tuple[int, ...], ssl.SSLContext] = {}


def ssl_context(conf, default_ssl_context_factory):
    files = tuple(os.stat(path).st_mtime_ns if path else 0 for path in (conf.certfile, conf.keyfile))
    context = _contexts.get(files)
    if context is None:
        context = default_ssl_context_factory()
        _contexts.clear()
        _contexts[files] = context
    return context


# gunicorn's error and access logs, and every logger of the app, through the one configuration
# (app/logs.py): standard error, LOG_FORMAT and LOG_LEVEL; a logging configuration turns the access
# log on. Each access line ends with the request's duration; its request line has credentials in
# the query string blanked, and no header is in it.
logconfig_dict = logging_config(_settings)
access_log_format = ACCESS_LOG_FORMAT
# Each worker opens its own database pool after the fork (app.db makes the engine lazily per pid).
preload_app = False


# The start of the request line gunicorn last refused as too long, in this thread: a newznab
# client's URL under /api is answered as a newznab error (its clients read nothing else), any
# other in the API's JSON. gunicorn refuses such a line before it has a path; its start is enough.
_refused = threading.local()


def _remembering_long_lines(read_line):
    def read_line_remembered(self, unreader, buf, limit=0):
        try:
            return read_line(self, unreader, buf, limit)
        except LimitRequestLine:
            _refused.start = bytes(buf[:256])
            raise

    return read_line_remembered


def write_json_error(sock, status_int, reason, mesg):
    """gunicorn's own answer to a request it refuses before the app sees it (a request line or a
    header too large, a malformed request), in the API's error format instead of an HTML page; a
    request line too long for a path under /api as a newznab error (app.api.newznab)."""
    from app.api.newznab import NewznabError, error_document, serves

    start, _refused.start = getattr(_refused, "start", b""), b""
    path = start.split(b" ")[1].split(b"?")[0] if start.count(b" ") >= 1 else b""
    if status_int == 414 and path and serves(path.decode("latin-1")):
        body, media_type = error_document(NewznabError(201, "the URL is too long"), b"o=json" in start.lower())
    else:
        code = "internal_error" if status_int == 500 else reason.lower().replace(" ", "_")
        body, media_type = json.dumps({"error": code, "message": mesg or reason}).encode(), "application/json"
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: {media_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
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
    message.Request.read_line = _remembering_long_lines(message.Request.read_line)
    # Warming only saves the first requests some time. A hook that raises is a worker that
    # failed to boot, and gunicorn then stops the whole API: a database going down while a
    # worker starts must not do that (its requests get 503 until it is back).
    try:
        warm_broker_transport()
        warm_pool(2)
    except Exception as exc:  # noqa: BLE001 - see above
        worker.log.warning("warming the worker failed, it starts cold: %s: %s", type(exc).__name__, exc)
    # What the worker loaded lives as long as it does: out of the garbage collector's sight, a full
    # collection scans only what requests made since. With the app's 125,000 objects in sight, one
    # held the GIL, and every request of the worker, for 73 - 78 ms (gc.collect(2) in a process
    # that had served 50 searches; 0.13 ms frozen).
    gc.freeze()


def child_exit(server, worker):
    """A worker gone (ended, restarted, killed): with Prometheus's multiprocess mode
    (PROMETHEUS_MULTIPROC_DIR, app/metrics.py), its live gauges' files are marked dead so that
    /metrics stops adding up its values. The variable is prometheus_client's own (it reads it
    itself), not a setting of app.config; prometheus_client is imported only when it is set."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from app.metrics import mark_process_dead  # files named by host and pid (app/metrics.py)

        mark_process_dead(worker.pid)
