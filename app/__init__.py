"""The data center: Flask API, Celery tasks, admin commands, over PostgreSQL."""
from __future__ import annotations

import logging

from flask import Flask

from app.config import Settings, get_settings, override_settings
from edge.digest.compiled import IMPL as COMPILED_IMPL

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> Flask:
    if settings is not None:
        override_settings(settings)
    settings = get_settings()

    app = Flask(__name__)
    app.config["SETTINGS"] = settings
    # The API takes gzip bodies up to this size as sent; the decoded cap is checked while inflating.
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes

    from app.api import register_api
    from app.celery_app import celery_init_app
    from app.cli import seed

    register_api(app)
    celery_init_app(app)
    app.cli.add_command(seed)
    log.info("compiled parts: %s (SEED_IMPL)", COMPILED_IMPL)
    return app
