"""HTTP API: health, the node API under /api/v1/seed, the newznab API at /api, and the web page (app.web)."""

from flask import Flask

from app.api.errors import register_error_handlers
from app.api.health import health
from app.api.newznab import newznab
from app.api.seed import seed_api
from app.web import web


def register_api(app: Flask) -> None:
    register_error_handlers(app)
    app.register_blueprint(health)
    app.register_blueprint(seed_api)
    app.register_blueprint(newznab)
    app.register_blueprint(web)
