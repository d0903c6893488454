"""The node-token guard: `Authorization: Bearer <token>` of an enabled node, else 401."""

from __future__ import annotations

from functools import wraps

from flask import g, request

from app.api.errors import error_response
from app.config import get_settings
from app.db import autocommit_driver_connection
from app.services.nodes import authenticate_call


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def node_required(view):
    """The guard: g.node is the caller's node, else 401."""
    return _guarded(view, counting_backlog=False)


def node_required_counting_backlog(view):
    """The guard of a call refused while the data center is behind (a batch): g.batches_waiting
    is also the batches waiting for the workers, counted up to STORE_BACKLOG in the token's own
    statement, so that the call's transaction need not count them (nor be open while the body is
    decoded)."""
    return _guarded(view, counting_backlog=True)


def _guarded(view, counting_backlog: bool):
    @wraps(view)
    def guarded(*args, **kwargs):
        token = bearer_token()
        if token is None:
            response = error_response(401, "unauthorized", "a node token is required (Authorization: Bearer ...)")
            response.headers["WWW-Authenticate"] = 'Bearer realm="seed"'
            return response
        bound = get_settings().store_backlog if counting_backlog else 0
        with autocommit_driver_connection() as connection:
            caller = authenticate_call(connection, token, bound)
        if caller is None:
            response = error_response(401, "unauthorized", "unknown or disabled node token")
            response.headers["WWW-Authenticate"] = 'Bearer realm="seed", error="invalid_token"'
            return response
        g.node, g.batches_waiting = caller
        return view(*args, **kwargs)

    return guarded
