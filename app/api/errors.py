"""Every error the API gives is JSON: {"error": code, "message": text} with the right status."""
from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from app.services.errors import ServiceError

log = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str):
    response = jsonify(error=code, message=message)
    response.status_code = status
    return response


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ServiceError)
    def service_error(exc: ServiceError):
        return error_response(exc.status, exc.code, exc.message)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        code = (exc.name or "error").lower().replace(" ", "_")
        response = error_response(exc.code or 500, code, exc.description or exc.name)
        headers = dict(exc.get_headers())
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in headers:
                response.headers[header] = headers[header]
        return response

    @app.errorhandler(Exception)
    def unexpected_error(exc: Exception):
        log.exception("unhandled error")
        return error_response(500, "internal_error", "internal server error")
