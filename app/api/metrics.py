"""GET /metrics: the Prometheus exposition (app.metrics' counters, app.services.gauges' gauges), for operators only: an operator key as
`Authorization: Bearer <key>`, anything else 401 (the counters tell the seed's whole state, as the
operator's status does)."""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.auth import bearer_token
from app.api.errors import error_response
from app.db import session_scope
from app.services import gauges, operators

metrics_api = Blueprint("metrics_api", __name__)


@metrics_api.get("/metrics")
def scrape():
    secret = bearer_token()
    if secret is None:
        return _unauthorized("an operator key is required (Authorization: Bearer ...)", 'Bearer realm="seed"')
    with session_scope() as session:
        key = operators.authenticate(session, secret)
    if key is None:
        return _unauthorized("unknown operator key", 'Bearer realm="seed", error="invalid_token"')
    body, content_type = gauges.exposition()
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-store"})


def _unauthorized(message: str, challenge: str):
    response = error_response(401, "unauthorized", message)
    response.headers["WWW-Authenticate"] = challenge
    return response
