"""One logging configuration for every data-center process: gunicorn (its error and access logs,
ops/gunicorn.conf.py), the Celery workers and beat (app/celery_app.py) and `flask seed`
(app/cli/__init__.py).

Each record is written to standard error as one line: its time in UTC (ISO 8601, to the
millisecond, with a Z), its level, its logger and its message, then the traceback when there is
one; with LOG_FORMAT=json, one JSON object a line with the same fields ("time", "level",
"logger", "message", and "exception" holding the traceback) and a few more where they exist: the
process id, the Celery task a line was logged in, and an access line's request figures.
LOG_LEVEL (default INFO) is the level of every logger; gunicorn's access log is written whatever
it is.

No credential reaches a log: every message and traceback is passed through :func:`redact` on its
way out, which blanks the values of credential-like query parameters (newznab clients send
`apikey=` in the URL, which the access log shows), of `Bearer`/`Basic` authorizations, of
passwords in URLs, and anything shaped like one of this system's node tokens, operator keys or
API keys wherever it appears. The access log's format names no request header, so an
Authorization header is never written in the first place.
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
import sys
from collections.abc import Mapping
from datetime import datetime, timezone

from app.config import Settings

REDACTED = "[redacted]"
# (pattern, replacement): the part a replacement keeps is the name of what is blanked.
_REDACTIONS = (
    # Query parameters that carry a credential: `?apikey=...`, `&token=...`.
    (
        re.compile(r"(?i)([?&;](?:apikey|api_key|key|token|access_token|password|passwd|secret)=)[^&\s\"';#]*"),
        rf"\1{REDACTED}",
    ),
    # An Authorization header's credentials, however the line shows the header.
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+"), rf"\1\2{REDACTED}"),
    # A password in a URL: scheme://user:password@host.
    (re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#\s@]*:)[^@/\s]+@"), rf"\1{REDACTED}@"),
    # This system's credentials (app/services/credentials.py: a prefix and 43 characters of
    # URL-safe base64) wherever they are, also where nothing names them.
    (re.compile(r"\b(seed(?:op|api)?_)[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])"), rf"\1{REDACTED}"),
)

# gunicorn's access lines (ops/gunicorn.conf.py's access_log_format): the remote address, the
# request line, the status, the bytes sent, the request's duration in seconds, the user agent.
ACCESS_LOG_FORMAT = '%(h)s "%(r)s" %(s)s %(b)s %(L)ss "%(a)s"'
ACCESS_LOGGER = "gunicorn.access"


def redact(text: str) -> str:
    """`text` with every credential it shows blanked (see the module's doc)."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def utc_time(created: float) -> str:
    """A record's time: UTC, ISO 8601, milliseconds, `Z`."""
    return datetime.fromtimestamp(created, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Formatter(logging.Formatter):
    """A record as one text line (and its traceback), or as one JSON object."""

    def __init__(self, json_lines: bool = False):
        super().__init__()
        self.json_lines = json_lines

    def format(self, record: logging.LogRecord) -> str:
        message = redact(record.getMessage())
        exception = None
        if record.exc_info:
            exception = self.formatException(record.exc_info)
        elif record.exc_text:
            exception = record.exc_text
        if record.stack_info:
            exception = f"{exception}\n{record.stack_info}" if exception else record.stack_info
        if exception is not None:
            exception = redact(exception)
        time = utc_time(record.created)
        if not self.json_lines:
            line = f"{time} {record.levelname} {record.name} [{record.process}] {message}"
            return f"{line}\n{exception}" if exception else line
        document = {
            "time": time,
            "level": record.levelname,
            "logger": record.name,
            "message": message,
            "process": record.process,
        }
        if record.name == ACCESS_LOGGER and isinstance(record.args, Mapping):
            document.update(_access_fields(record.args))
        document.update(_task_fields())
        if exception:
            document["exception"] = exception
        return json.dumps(document, default=str)


def _access_fields(atoms: Mapping) -> dict:
    """An access line's request as fields (gunicorn's atoms): what a log pipeline counts and
    charts without parsing the message. The query string is left out: it is in the message,
    redacted."""
    duration = atoms.get("D")  # microseconds
    status = str(atoms.get("s") or "")
    return {
        "remote": atoms.get("h"),
        "method": atoms.get("m"),
        "path": redact(str(atoms.get("U") or "")),
        "status": int(status) if status.isdigit() else status,
        "bytes": atoms.get("B"),
        "duration_ms": round(duration / 1000, 3) if isinstance(duration, int) else None,
    }


def _task_fields() -> dict:
    """The Celery task being run, when the line is logged in one (nothing in other processes)."""
    state = sys.modules.get("celery._state")
    task = state.get_current_task() if state is not None else None
    if task is None or task.request is None or task.request.id is None:
        return {}
    return {"task": task.name, "task_id": task.request.id}


class StderrHandler(logging.StreamHandler):
    """Writes to the standard error of the moment: a command run by a test's CLI runner, which
    swaps sys.stderr for each invocation, logs to the one in place, never to one closed since."""

    def __init__(self, level: int = logging.NOTSET):
        logging.Handler.__init__(self, level)

    @property
    def stream(self):
        return sys.stderr


def logging_config(settings: Settings) -> dict:
    """The configuration as logging.config.dictConfig takes it: the root logger and gunicorn's
    two (which do not propagate) write through the one handler and formatter."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"seed": {"()": Formatter, "json_lines": settings.log_format == "json"}},
        "handlers": {"stderr": {"()": StderrHandler, "formatter": "seed"}},
        "root": {"level": settings.log_level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": settings.log_level, "handlers": ["stderr"], "propagate": False},
            # The access log is the API's record of its requests: written whatever LOG_LEVEL.
            ACCESS_LOGGER: {"level": "INFO", "handlers": ["stderr"], "propagate": False},
        },
    }


def configure(settings: Settings) -> None:
    """Set up this process's logging (again: the last call wins). Python's warnings are logged
    too, so that they come out in the same shape."""
    logging.config.dictConfig(logging_config(settings))
    logging.captureWarnings(True)
