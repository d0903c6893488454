"""The data center: Flask API, Celery tasks, admin commands, over PostgreSQL."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from flask import Flask

from app.config import Settings, SettingsError, get_settings, override_settings
from edge.digest.compiled import IMPL as COMPILED_IMPL

log = logging.getLogger(__name__)

# A process that cannot start because of its settings exits with this (as an edge node does).
EXIT_SETTINGS = 2


def create_app(settings: Settings | None = None) -> Flask:
    if settings is not None:
        override_settings(settings)
    try:
        settings = get_settings()
    except SettingsError as exc:
        # The processes made from this factory (`flask seed`, `celery -A app.worker`) stop with
        # one line naming the variable, not a traceback through the import that made the app.
        print(f"{_program()}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_SETTINGS) from None

    app = Flask(__name__)
    app.config["SETTINGS"] = settings
    # The API takes gzip bodies up to this size as sent; the decoded cap is checked while inflating.
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes

    from app.api import register_api
    from app.celery_app import celery_init_app
    from app.cli import seed

    register_api(app)
    from app.api.metrics import metrics_api  # GET /metrics (docs/monitoring.md)

    app.register_blueprint(metrics_api)
    celery_init_app(app)
    app.cli.add_command(seed)
    log.info("compiled parts: %s (SEED_IMPL)", COMPILED_IMPL)
    return app


def _program() -> str:
    """The command's name as typed (`flask`, `celery`), also when run as `python -m celery`."""
    path = Path(sys.argv[0] if sys.argv and sys.argv[0] else "seed")
    return path.parent.name if path.name == "__main__.py" else path.name
