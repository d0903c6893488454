"""The node API under /api/v1/seed (contract: docs/api.md)."""
from __future__ import annotations

import logging

from flask import Blueprint, Response, current_app, g, jsonify, request, stream_with_context

from app.api.auth import node_required
from app.api.errors import error_response
from app.config import Settings
from app.db import session_scope
from app.services import batches as batch_service
from app.services import orchestrator, spool
from app.services import status as status_service
from app.services.rules import active_rules

log = logging.getLogger(__name__)

seed_api = Blueprint("seed_api", __name__, url_prefix="/api/v1/seed")


def _settings() -> Settings:
    return current_app.config["SETTINGS"]


@seed_api.post("/lease")
@node_required
def lease():
    settings = _settings()
    with session_scope() as session:
        granted = orchestrator.lease(session, g.node, max_leases=settings.max_leases_per_node)
        if granted is None:
            return Response(status=204)
        rules = active_rules(session, granted.group)
    return jsonify(
        range={
            "id": granted.range_id, "group": granted.group, "first_id": granted.first_id,
            "last_id": granted.last_id, "next_id": granted.next_id, "spooled": granted.spooled,
        },
        chunk_size=settings.chunk_size,
        batch_chunks=settings.batch_chunks,
        lease_timeout=settings.lease_timeout,
        max_body_bytes=settings.max_body_bytes,
        rules=rules,
    )


@seed_api.get("/ranges/<int:range_id>/chunks")
@node_required
def chunks(range_id: int):
    with session_scope() as session:
        orchestrator.held_range(session, g.node, range_id)
        if not spool.has_chunks(session, range_id):
            return error_response(404, "not_spooled", f"range {range_id} has no spooled chunks")
    return Response(
        stream_with_context(spool.stream_frames(range_id)),
        mimetype=spool.CONTENT_TYPE,
    )


@seed_api.post("/ranges/<int:range_id>/batches")
@node_required
def post_batch(range_id: int):
    settings = _settings()
    body = request.get_data(cache=False)
    content_type = (request.mimetype or "").lower()
    content_encoding = (request.headers.get("Content-Encoding") or "").strip().lower()
    # Decode and check the whole batch before anything is stored: bad input changes nothing.
    header = batch_service.check_body(body, content_type, content_encoding, settings.max_decoded_bytes)
    with session_scope() as session:
        accepted = orchestrator.accept_batch(
            session, g.node, range_id, batch_from=header.batch_from, batch_to=header.batch_to,
            body=body, content_type=content_type, content_encoding=content_encoding, group=header.group,
        )
    if not accepted.created:
        return jsonify(status="already_accepted", batch_id=accepted.batch_id, next_id=accepted.next_id), 200
    # Only after the commit: a worker never looks for a batch that is not there yet.
    batch_service.enqueue_store(accepted.batch_id)
    return jsonify(status="accepted", batch_id=accepted.batch_id, next_id=accepted.next_id), 202


@seed_api.post("/ranges/<int:range_id>/heartbeat")
@node_required
def heartbeat(range_id: int):
    with session_scope() as session:
        seed_range = orchestrator.heartbeat(session, g.node, range_id)
        next_id = seed_range.next_id
    return jsonify(status="leased", next_id=next_id, lease_timeout=_settings().lease_timeout)


@seed_api.post("/ranges/<int:range_id>/done")
@node_required
def done(range_id: int):
    with session_scope() as session:
        seed_range = orchestrator.finish(session, g.node, range_id)
        next_id = seed_range.next_id
    return jsonify(status="done", next_id=next_id)


@seed_api.post("/ranges/<int:range_id>/release")
@node_required
def release(range_id: int):
    with session_scope() as session:
        seed_range = orchestrator.release(session, g.node, range_id)
        next_id = seed_range.next_id
    return jsonify(status="planned", next_id=next_id)


@seed_api.get("/status")
@node_required
def status():
    with session_scope() as session:
        return jsonify(status_service.seed_status(session))
