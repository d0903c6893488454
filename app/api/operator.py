"""The operator-key guard, and the status call it scopes: an operator key sees the whole seed,
a node token what concerns its node, anything else gets 401 (app.api.auth)."""

from __future__ import annotations

import json
from datetime import date
from functools import wraps

from flask import Response, g

from app.api.auth import bearer_token, node_required
from app.db import session_scope
from app.services import operators
from app.services import status as status_service


def node_or_operator_required(view):
    """`Authorization: Bearer <operator key>` sets g.operator; else the node-token guard runs
    (g.node, or 401)."""
    as_node = node_required(view)

    @wraps(view)
    def guarded(*args, **kwargs):
        secret = bearer_token()
        if secret is not None:
            with session_scope() as session:
                key = operators.authenticate(session, secret)
            if key is not None:
                g.operator = key
                return view(*args, **kwargs)
        return as_node(*args, **kwargs)

    return guarded


@node_or_operator_required
def scoped_status():
    """GET /api/v1/seed/status: the whole status for an operator key, the node's own view for a
    node token."""
    with session_scope() as session:
        data = status_service.status_for(session, None if "operator" in g else g.node).as_json()
    # As `flask seed status --json` writes it: times in ISO 8601 with their zone (UTC), where
    # Flask's own encoder would write an HTTP date.
    return Response(json.dumps(data, default=_iso), mimetype="application/json")


def _iso(value):
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
