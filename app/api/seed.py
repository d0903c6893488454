"""The node API under /api/v1/seed (contract: docs/api.md)."""

from __future__ import annotations

import json
import logging
from functools import wraps

from flask import Blueprint, Response, current_app, g, jsonify, request, stream_with_context
from sqlalchemy.exc import DBAPIError
from werkzeug.exceptions import RequestEntityTooLarge

from app.api.auth import node_required, node_required_counting_backlog
from app.api.operator import scoped_status
from app.api.errors import error_response
from app.config import Settings
from app.db import commit_unflushed, is_transient, session_scope
from app.services import inspections, leases, spool
from app.services.errors import NotFound, ServiceError
from app.services.ingest import accept as acceptance
from app.services.ingest.backlog import refuse_when_behind
from app.services.ingest.decode import check_body
from app.services.rules import applying
from app.tasks.ingest import enqueue_store

log = logging.getLogger(__name__)

seed_api = Blueprint("seed_api", __name__, url_prefix="/api/v1/seed")


MAX_CONTROL_BODY = 256 * 1024  # lease and release bodies are a few ids and a reason
MAX_RESULT_BODY = 4 * 1024 * 1024  # an inspection's result: up to 10,000 file names and an NFO
MAX_SKIP = 10_000
INT64_MAX = 2**63 - 1


class MalformedRequest(ServiceError):
    code = "malformed_request"


def _settings() -> Settings:
    return current_app.config["SETTINGS"]


def _json_object(limit: int = MAX_CONTROL_BODY) -> dict:
    """The request's JSON object. A body that does not say it is JSON is ignored, as these calls
    took no body before; a JSON body that is not an object is a 400."""
    if (request.mimetype or "").lower() != "application/json":
        return {}
    if (request.content_length or 0) > limit:
        raise MalformedRequest(f"body over {limit} bytes")
    # A chunked body says no length: one byte read past the limit tells it is longer.
    body = request.stream.read(limit + 1)
    if len(body) > limit:
        raise MalformedRequest(f"body over {limit} bytes")
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedRequest(f"body is not JSON: {exc}") from None
    except RecursionError:
        raise MalformedRequest("body is not JSON: nested too deep") from None
    if not isinstance(data, dict):
        raise MalformedRequest("body must be a JSON object")
    return data


def _skip_list(data: dict) -> list[int]:
    skip = data.get("skip", [])
    if (
        not isinstance(skip, list)
        or len(skip) > MAX_SKIP
        or not all(type(item) is int and 0 < item <= INT64_MAX for item in skip)
    ):
        raise MalformedRequest(f"skip must be a list of at most {MAX_SKIP} range ids")
    return skip


def _failure_text(data: dict) -> str | None:
    failure = data.get("failure")
    if failure is not None and (not isinstance(failure, str) or not failure.strip()):
        raise MalformedRequest("failure must be a non-empty string")
    return failure


def _batch_body() -> bytes:
    """The whole body, or 413 past MAX_CONTENT_LENGTH. Werkzeug refuses a longer Content-Length
    before reading, but stops a chunked body at the limit without a word: a byte left after the
    limit tells it was longer."""
    body = request.get_data(cache=False)
    limit = request.max_content_length
    if request.content_length is None and limit is not None and len(body) >= limit and request.input_stream.read(1):
        raise RequestEntityTooLarge(f"body over the {limit} byte limit")
    return body


def range_call(view, guard=node_required):
    """A call on one range, by a node (node_required). A range id past 64 bits names no range:
    404 unknown_range, as for any id the catalog does not hold, instead of a query the database
    cannot run."""

    @guard
    @wraps(view)
    def call(range_id: int):
        if range_id > INT64_MAX:
            raise NotFound(f"no such range: {range_id}", code="unknown_range")
        return view(range_id)

    return call


def batch_call(view):
    """A batch posted to a range (range_call), the batches waiting for the workers counted by the
    guard (g.batches_waiting)."""
    return range_call(view, guard=node_required_counting_backlog)


def _range_answer(status: str, seed_range, **extra):
    return jsonify(status=status, next_id=seed_range.next_id, **extra)


@seed_api.post("/lease")
@node_required
def lease():
    settings = _settings()
    skip = _skip_list(_json_object())
    with session_scope() as session:
        granted = leases.lease(
            session,
            g.node,
            max_leases=settings.max_leases_per_node,
            skip=skip,
            backfill_every=settings.lease_backfill_every,
            refuse_past=settings.store_backlog,
        )
    if granted is None:
        return Response(status=204)
    return jsonify(
        range={
            "id": granted.range_id,
            "group": granted.group,
            "first_id": granted.first_id,
            "last_id": granted.last_id,
            "next_id": granted.next_id,
            "spooled": granted.spooled,
        },
        chunk_size=settings.chunk_size,
        batch_chunks=settings.batch_chunks,
        lease_timeout=settings.lease_timeout,
        max_body_bytes=settings.max_body_bytes,
        rules=applying(granted.rules, granted.group),
    )


@seed_api.get("/ranges/<int:range_id>/chunks")
@range_call
def chunks(range_id: int):
    with session_scope() as session:
        leases.held_range(session, g.node, range_id)
        if not spool.has_chunks(session, range_id):
            return error_response(404, "not_spooled", f"range {range_id} has no spooled chunks")
    return Response(
        stream_with_context(spool.stream_frames(range_id)),
        mimetype=spool.CONTENT_TYPE,
    )


@seed_api.post("/ranges/<int:range_id>/batches")
@batch_call
def post_batch(range_id: int):
    settings = _settings()
    body = _batch_body()
    content_type = (request.mimetype or "").lower()
    content_encoding = (request.headers.get("Content-Encoding") or "").strip().lower()
    # While the workers are behind, nothing more is taken: answered before the body is decoded.
    refuse_when_behind(g.batches_waiting, settings.store_backlog, "batch")
    # Decode and check the whole batch before anything is stored: bad input changes nothing.
    header = check_body(body, content_type, content_encoding, settings.max_decoded_bytes)
    with session_scope() as session:
        accepted = acceptance.accept_batch(
            session,
            g.node,
            range_id,
            batch_from=header.batch_from,
            batch_to=header.batch_to,
            body=body,
            content_type=content_type,
            content_encoding=content_encoding,
            group=header.group,
            rules=header.rules,
        )
    if not accepted.created:
        return jsonify(status="already_accepted", batch_id=accepted.batch_id, next_id=accepted.next_id), 200
    # Only after the commit: a worker never looks for a batch that is not there yet.
    enqueue_store(accepted.batch_id)
    return jsonify(status="accepted", batch_id=accepted.batch_id, next_id=accepted.next_id), 202


@seed_api.post("/ranges/<int:range_id>/heartbeat")
@range_call
def heartbeat(range_id: int):
    with session_scope() as session:
        next_id = leases.touched(session, g.node, range_id)
        if next_id is None:
            commit_unflushed(session)
            next_id = leases.heartbeat(session, g.node, range_id).next_id
    return jsonify(status="leased", next_id=next_id, lease_timeout=_settings().lease_timeout)


@seed_api.post("/ranges/<int:range_id>/done")
@range_call
def done(range_id: int):
    with session_scope() as session:
        next_id = leases.finished(session, g.node, range_id)
        if next_id is None:
            commit_unflushed(session)
            next_id = leases.finish(session, g.node, range_id).next_id
    return jsonify(status="done", next_id=next_id)


@seed_api.post("/ranges/<int:range_id>/release")
@range_call
def release(range_id: int):
    failure = _failure_text(_json_object())
    with session_scope() as session:
        commit_unflushed(session)
        # "planned", or "done" for a range whose every batch was in (leases.release).
        released = leases.release(session, g.node, range_id, failure=failure)
        return _range_answer(released.status, released)


def inspection_call(view):
    """A call on one inspection, by a node; an id past 64 bits names none."""

    @node_required
    @wraps(view)
    def call(inspection_id: int):
        if inspection_id > INT64_MAX:
            raise NotFound(f"no such inspection: {inspection_id}", code="unknown_inspection")
        return view(inspection_id)

    return call


@seed_api.post("/inspections/lease")
@node_required
def lease_inspections():
    wanted = _json_object().get("max", 10)
    if type(wanted) is not int or not 1 <= wanted <= inspections.MAX_LEASE:
        raise MalformedRequest(f"max must be a whole number from 1 to {inspections.MAX_LEASE}")
    timeout = _settings().lease_timeout
    with session_scope() as session:
        leased = inspections.lease(session, g.node, wanted, timeout, _settings().inspect_settle)
    if not leased:
        return Response(status=204)
    return jsonify(
        inspections=[
            {"id": i.id, "group": i.group, "post_key": i.post_key, "name": i.name, "files": i.files} for i in leased
        ],
        lease_timeout=timeout,
        max_bytes=inspections.MAX_BYTES,
    )


@seed_api.post("/inspections/<int:inspection_id>/result")
@inspection_call
def inspection_result(inspection_id: int):
    if (request.mimetype or "").lower() != "application/json":
        raise inspections.MalformedResult("the result is a JSON object (Content-Type: application/json)")
    result = _json_object(MAX_RESULT_BODY)
    with session_scope() as session:
        stored = inspections.record(session, g.node, inspection_id, result)
    return jsonify(status="stored" if stored else "already_stored"), 200


@seed_api.post("/inspections/results")
@node_required
def inspection_results():
    """Several results in one call: {"results": [{"id": N, "result": {...}}, ...]}, each
    answered on its own (docs/api.md)."""
    if (request.mimetype or "").lower() != "application/json":
        raise MalformedRequest("the results are a JSON object (Content-Type: application/json)")
    items = _json_object(MAX_RESULT_BODY).get("results")
    if not isinstance(items, list) or not 1 <= len(items) <= inspections.MAX_LEASE:
        raise MalformedRequest(f"results must be a list of 1 to {inspections.MAX_LEASE} results")
    results: list[tuple[int, object]] = []
    for item in items:
        if not isinstance(item, dict) or type(item.get("id")) is not int or not 1 <= item["id"] <= INT64_MAX:
            raise MalformedRequest("each of results is an object with an inspection's id and its result")
        results.append((item["id"], item.get("result")))
    answers = _record_each(results)
    return jsonify(
        results=[{"id": a.id, "status": a.status, **({"message": a.message} if a.message else {})} for a in answers]
    )


def _record_each(results: list[tuple[int, object]]) -> list[inspections.Recorded]:
    """The results stored in one transaction; when PostgreSQL refuses it with an error that
    would come again, each in its own, one refused so answered alone (its lease lapses)."""
    try:
        with session_scope() as session:
            return inspections.record_many(session, g.node, results)
    except DBAPIError as exc:
        if is_transient(exc) or len(results) == 1:
            raise
        log.warning("inspection results refused together, stored one by one: %s", exc.orig)
    answers = []
    for inspection_id, result in results:
        try:
            with session_scope() as session:
                answers.extend(inspections.record_many(session, g.node, [(inspection_id, result)]))
        except DBAPIError as exc:
            if is_transient(exc):
                raise
            answers.append(
                inspections.Recorded(
                    inspection_id, "refused", f"{type(exc.orig).__name__}: {str(exc.orig).splitlines()[0][:200]}"
                )
            )
    return answers


@seed_api.post("/inspections/<int:inspection_id>/release")
@inspection_call
def inspection_release(inspection_id: int):
    with session_scope() as session:
        state = inspections.give_back(session, g.node, inspection_id)
    return jsonify(status=state)


# A node sees what concerns it; an operator key sees the whole picture (app/api/operator.py).
seed_api.add_url_rule("/status", view_func=scoped_status, methods=["GET"])
