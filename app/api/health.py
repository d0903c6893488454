"""GET /healthz: the process is up and the database answers; "impl" tells whether the compiled
parts or their Python twins run (edge.digest.compiled.IMPL: "c" or "python")."""
from __future__ import annotations

from flask import Blueprint, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.db import get_engine
from edge.digest.compiled import IMPL

health = Blueprint("health", __name__)


@health.get("/healthz")
def healthz():
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        response = jsonify(status="error", database="unavailable", message=str(exc.__class__.__name__), impl=IMPL)
        response.status_code = 503
        return response
    return jsonify(status="ok", database="ok", impl=IMPL)
