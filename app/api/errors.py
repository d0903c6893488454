"""Every error the API gives is JSON: {"error": code, "message": text} with the right status; under
the newznab API's /api, a newznab error with the right status instead (app.api.newznab.http_error)."""

from __future__ import annotations

import logging

import psycopg
from flask import Flask, has_request_context, jsonify, request
from gunicorn.http.errors import ParseException as UnreadableRequest
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException

from app.api import newznab
from app.services.errors import ServiceError

log = logging.getLogger(__name__)

# How long a client is told to wait when the database does not answer: about what a restart or a
# failover of PostgreSQL takes.
UNAVAILABLE_RETRY_AFTER = 10


def error_response(status: int, code: str, message: str):
    response = jsonify(error=code, message=message)
    response.status_code = status
    return response


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ServiceError)
    def service_error(exc: ServiceError):
        response = error_response(exc.status, exc.code, exc.message)
        if exc.retry_after is not None:
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        # Under /api a newznab client asks, and reads newznab errors only.
        if has_request_context() and newznab.serves(request.path):
            return newznab.http_error(exc)
        code = (exc.name or "error").lower().replace(" ", "_")
        response = error_response(exc.code or 500, code, exc.description or exc.name)
        headers = dict(exc.get_headers())
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in headers:
                response.headers[header] = headers[header]
        return response

    # gunicorn parses a chunked body as the app reads it: a chunk it cannot parse (its size no
    # number, its end missing) is raised into the app, and is the client's mistake.
    @app.errorhandler(UnreadableRequest)
    def unreadable_request(exc: UnreadableRequest):
        return error_response(400, "bad_request", f"unreadable request: {exc}")

    # A database that cannot be reached, drops the connection or has no connection to spare is
    # the data center's passing trouble, not the request's: 503, and the client tries again.
    # Any other database error is a fault of ours (500).
    @app.errorhandler(DBAPIError)
    def database_error(exc: DBAPIError):
        if isinstance(exc, OperationalError) or exc.connection_invalidated:
            return _unavailable("the database is unavailable", exc.orig or exc)
        return _internal_error()

    @app.errorhandler(psycopg.OperationalError)
    def raw_database_error(exc: psycopg.OperationalError):
        return _unavailable("the database is unavailable", exc)

    @app.errorhandler(PoolTimeout)
    def pool_timeout(exc: PoolTimeout):
        return _unavailable("the database has no connection free", exc)

    @app.errorhandler(Exception)
    def unexpected_error(exc: Exception):
        return _internal_error()


def _unavailable(what: str, exc: BaseException):
    lines = str(exc).strip().splitlines()
    log.warning("%s: %s", what, lines[0] if lines else type(exc).__name__)
    response = error_response(503, "unavailable", f"{what}; try again later")
    response.headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    return response


def _internal_error():
    log.exception("unhandled error")
    return error_response(500, "internal_error", "internal server error")
