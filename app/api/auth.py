"""The node-token guard: `Authorization: Bearer <token>` of an enabled node, else 401."""

from __future__ import annotations

from functools import wraps

from flask import g, request

from app.api.errors import error_response
from app.db import get_engine
from app.services.nodes import authenticate_call


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def node_required(view):
    @wraps(view)
    def guarded(*args, **kwargs):
        token = bearer_token()
        if token is None:
            response = error_response(401, "unauthorized", "a node token is required (Authorization: Bearer ...)")
            response.headers["WWW-Authenticate"] = 'Bearer realm="seed"'
            return response
        with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            node = authenticate_call(connection, token)
        if node is None:
            response = error_response(401, "unauthorized", "unknown or disabled node token")
            response.headers["WWW-Authenticate"] = 'Bearer realm="seed", error="invalid_token"'
            return response
        g.node = node
        return view(*args, **kwargs)

    return guarded
