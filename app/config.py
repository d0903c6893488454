"""One Settings object, read from the environment; nothing else reads os.environ.

The parsers and the NNTP settings are the digest library's (edge/digest/settings.py), shared
with the edge node, so that both sides read a variable alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Mapping

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from edge.digest.settings import SettingsError  # noqa: F401 - what from_env raises, for its callers
from edge.digest.settings import NNTPSettings, integer, read, read_nntp_settings, text


DATABASE_SCHEME = "postgresql+psycopg"


def _database_url(raw: str) -> str:
    """A SQLAlchemy URL for psycopg 3. `postgres://` and `postgresql://` (libpq's and Heroku's
    spellings) are refused rather than translated: SQLAlchemy reads the first not at all and the
    second as psycopg2, which is not installed, and the operator should see the URL the data
    center really uses. The message never repeats the URL: it may hold a password."""
    url = raw.strip()
    scheme, sep, rest = url.partition("://")
    if not sep or not rest or any(c.isspace() for c in url):
        raise ValueError(f"must be a {DATABASE_SCHEME}://user@host/database URL")
    if scheme != DATABASE_SCHEME:
        raise ValueError(f"must start {DATABASE_SCHEME}:// (the driver the data center uses), not {scheme}://")
    return url


def shown_database_url(url: str) -> str:
    """The URL without its password, to name the database in a message or a log."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.partition("://")[0] + "://..."


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")


def _log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}, got {raw!r}")
    return level


def _log_format(raw: str) -> str:
    shape = raw.strip().lower()
    if shape not in LOG_FORMATS:
        raise ValueError(f"must be one of {', '.join(LOG_FORMATS)}, got {raw!r}")
    return shape


def _schema_names(raw: str) -> str:
    if not all(part.isidentifier() for part in raw.split(",")):
        raise ValueError(f"must be comma-separated schema names, got {raw!r}")
    return raw


@dataclass(frozen=True)
class Settings:
    database_url: str = "postgresql+psycopg://localhost/seed"
    # A streaming replica of database_url (a hot standby) that the catalog's reads go to: the
    # newznab API's searches, details and NZBs, the web page's search and NZB export. Writes,
    # leases, the store, and a read that must see its own write stay on the primary. None: all on
    # the primary.
    database_read_url: str | None = None
    # /readyz fails when the replica has not replayed what the primary wrote this many seconds ago.
    database_read_max_lag: int = 30
    # A shared development database: each developer's tables live in their own schema.
    db_search_path: str | None = None
    redis_url: str = "redis://127.0.0.1:6379/0"
    lease_timeout: int = 900
    # Inspections (app/services/inspections.py): a post is leased once the join has not changed
    # it for this many seconds, so that a post still being posted is read whole.
    inspect_settle: int = 120
    # Twice a node's own default (MAX_LEASES, 3): a node restarted after a crash still gets its
    # ranges while the leases of its last run wait out LEASE_TIMEOUT.
    max_leases_per_node: int = 6
    chunk_size: int = 20_000
    batch_chunks: int = 10
    range_size: int = 1_000_000
    plan_days: int = 30
    # Live planning (plan.live): how often beat runs it, in seconds, and how many of the newest
    # article numbers it keeps back while they may still be propagating. A number is planned
    # once it is LIVE_LAG below the high-water mark, or once the previous look at the group
    # (a planning period earlier) already saw it, whichever comes first: about one chunk, as
    # NNTmux keeps back, without holding a slow group's posts for days.
    live_plan_interval: int = 60
    live_lag: int = 20_000
    # While live ranges wait, one lease in this many looks at backfill first, so backfill keeps
    # a share of the nodes however much is posted (app/services/leases.py, docs/api.md).
    lease_backfill_every: int = 4
    max_body_bytes: int = 64 * 1024 * 1024
    max_decoded_bytes: int = 256 * 1024 * 1024
    batch_requeue_after: int = 300
    # Backpressure (app/services/ingest/backlog.py): with this many batches accepted and not yet
    # stored and joined, leases and new batches are answered 429 busy until the workers catch
    # up (0: never). A hundred batches are minutes of work at a node's batch size (200,000
    # articles), seconds at a thousand.
    store_backlog: int = 100
    batch_max_attempts: int = 5
    replan_minute: str = "17"
    replan_hour: str = "*/6"
    api_bind: str = "127.0.0.1:8080"
    api_workers: int = 2
    api_certfile: str | None = None
    api_keyfile: str | None = None
    # Every data-center process logs alike (app/logs.py): gunicorn, the Celery workers and beat,
    # and `flask seed`. "json" writes one JSON object a line, for a log pipeline.
    log_level: str = "INFO"
    log_format: str = "text"
    # The same NNTP settings as an edge node's, from the same variables with the same defaults
    # (NNTPS to news.example.net until NNTP_HOST says otherwise): edge/digest/settings.py.
    nntp: NNTPSettings = field(default_factory=NNTPSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        d = cls()

        def count(name: str, default: int) -> int:
            return read(env, name, integer(1), default)

        return cls(
            database_url=read(env, "DATABASE_URL", _database_url, d.database_url),
            database_read_url=read(env, "DATABASE_READ_URL", _database_url),
            database_read_max_lag=count("DATABASE_READ_MAX_LAG", d.database_read_max_lag),
            db_search_path=read(env, "DB_SEARCH_PATH", _schema_names),
            redis_url=read(env, "REDIS_URL", text, d.redis_url),
            lease_timeout=count("LEASE_TIMEOUT", d.lease_timeout),
            inspect_settle=read(env, "INSPECT_SETTLE", integer(0), d.inspect_settle),
            max_leases_per_node=count("MAX_LEASES_PER_NODE", d.max_leases_per_node),
            chunk_size=count("CHUNK_SIZE", d.chunk_size),
            batch_chunks=count("BATCH_CHUNKS", d.batch_chunks),
            range_size=count("RANGE_SIZE", d.range_size),
            plan_days=count("PLAN_DAYS", d.plan_days),
            live_plan_interval=count("LIVE_PLAN_INTERVAL", d.live_plan_interval),
            live_lag=read(env, "LIVE_LAG", integer(0), d.live_lag),
            lease_backfill_every=count("LEASE_BACKFILL_EVERY", d.lease_backfill_every),
            max_body_bytes=count("MAX_BODY_BYTES", d.max_body_bytes),
            max_decoded_bytes=count("MAX_DECODED_BYTES", d.max_decoded_bytes),
            batch_requeue_after=count("BATCH_REQUEUE_AFTER", d.batch_requeue_after),
            store_backlog=read(env, "STORE_BACKLOG", integer(0), d.store_backlog),
            batch_max_attempts=count("BATCH_MAX_ATTEMPTS", d.batch_max_attempts),
            replan_minute=read(env, "REPLAN_MINUTE", text, d.replan_minute),
            replan_hour=read(env, "REPLAN_HOUR", text, d.replan_hour),
            api_bind=read(env, "API_BIND", text, d.api_bind),
            api_workers=count("API_WORKERS", d.api_workers),
            api_certfile=read(env, "API_CERTFILE", text),
            api_keyfile=read(env, "API_KEYFILE", text),
            log_level=read(env, "LOG_LEVEL", _log_level, d.log_level),
            log_format=read(env, "LOG_FORMAT", _log_format, d.log_format),
            nntp=read_nntp_settings(env),
        )

    def as_public_dict(self) -> dict:
        """Settings safe to show an operator (no secrets)."""
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["database_url"] = shown_database_url(self.database_url)
        if self.database_read_url is not None:
            shown["database_read_url"] = shown_database_url(self.database_read_url)
        shown["nntp"] = self.nntp.public_dict()
        return shown


_settings: Settings | None = None


def get_settings() -> Settings:
    global _settings
    if _settings is None:
        _settings = Settings.from_env()
    return _settings


def override_settings(settings: Settings | None) -> None:
    """Replace the process's settings (tests, or a factory given explicit settings)."""
    global _settings
    _settings = settings
