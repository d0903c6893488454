"""gunicorn settings for the API (`gunicorn -c ops/gunicorn.conf.py wsgi:app`), from app.config."""
from app.config import get_settings

_settings = get_settings()

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


def post_worker_init(worker):
    """Load the broker's transport (kombu's Redis transport and redis-py) and open the first
    database connections before the first request: the first batch a worker took would
    otherwise pay for the import (about a third of a second of CPU) and the connections while
    a node waits for its answer."""
    from app.celery_app import warm_broker_transport
    from app.db import warm_pool

    warm_broker_transport()
    warm_pool(2)
