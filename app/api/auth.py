"""The node-token guard: `Authorization: Bearer <token>` of an enabled node, else 401."""
from __future__ import annotations

from functools import wraps

from flask import g, request
from sqlalchemy import text

from app.api.errors import error_response
from app.db import session_scope
from app.services.nodes import authenticate


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
        with session_scope() as session:
            node = authenticate(session, token)
            if node is not None:
                # Last contact, written at most every 10 s per node to keep the hot path cheap.
                session.execute(
                    text("UPDATE seed_nodes SET last_seen_at = now() WHERE id = :id"
                         " AND (last_seen_at IS NULL OR last_seen_at < now() - interval '10 seconds')"),
                    {"id": node.id},
                )
        if node is None:
            response = error_response(401, "unauthorized", "unknown or disabled node token")
            response.headers["WWW-Authenticate"] = 'Bearer realm="seed", error="invalid_token"'
            return response
        g.node = node
        return view(*args, **kwargs)

    return guarded
