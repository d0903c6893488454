"""Errors the services raise; the API maps them to statuses, the CLI to ClickException."""


class ServiceError(Exception):
    """A request the service refuses; `code` is a stable machine-readable name."""

    status = 400
    code = "bad_request"
    retry_after: int | None = None  # seconds, sent as Retry-After (a refusal that passes)

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"
