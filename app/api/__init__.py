"""HTTP API: health, and the node API under /api/v1/seed."""
from flask import Flask

from app.api.errors import register_error_handlers
from app.api.health import health


def register_api(app: Flask) -> None:
    register_error_handlers(app)
    app.register_blueprint(health)
