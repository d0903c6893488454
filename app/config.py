"""One Settings object, read from the environment; nothing else reads os.environ."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Mapping


class SettingsError(ValueError):
    """A setting from the environment is missing or malformed."""


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, got {value}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def _identifier(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name) or None
    if raw is not None and not all(part.isidentifier() for part in raw.split(",")):
        raise SettingsError(f"{name} must be comma-separated schema names, got {raw!r}")
    return raw


@dataclass(frozen=True)
class Settings:
    database_url: str = "postgresql+psycopg://localhost/seed"
    # A shared development database: each developer's tables live in their own schema.
    db_search_path: str | None = None
    redis_url: str = "redis://127.0.0.1:6379/0"
    lease_timeout: int = 900
    # Twice a node's own default (MAX_LEASES, 3): a node restarted after a crash still gets its
    # ranges while the leases of its last run wait out LEASE_TIMEOUT.
    max_leases_per_node: int = 6
    chunk_size: int = 20_000
    batch_chunks: int = 10
    range_size: int = 1_000_000
    plan_days: int = 30
    max_body_bytes: int = 64 * 1024 * 1024
    max_decoded_bytes: int = 256 * 1024 * 1024
    batch_requeue_after: int = 300
    batch_max_attempts: int = 5
    replan_minute: str = "17"
    replan_hour: str = "*/6"
    api_bind: str = "127.0.0.1:8080"
    api_workers: int = 2
    api_certfile: str | None = None
    api_keyfile: str | None = None
    nntp_host: str = "127.0.0.1"
    nntp_port: int = 119
    nntp_ssl: bool = False
    nntp_user: str | None = None
    nntp_password: str | None = field(default=None, repr=False)
    nntp_cafile: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        d = cls()
        return cls(
            database_url=env.get("DATABASE_URL") or d.database_url,
            db_search_path=_identifier(env, "DB_SEARCH_PATH"),
            redis_url=env.get("REDIS_URL") or d.redis_url,
            lease_timeout=_int(env, "LEASE_TIMEOUT", d.lease_timeout, 1),
            max_leases_per_node=_int(env, "MAX_LEASES_PER_NODE", d.max_leases_per_node, 1),
            chunk_size=_int(env, "CHUNK_SIZE", d.chunk_size, 1),
            batch_chunks=_int(env, "BATCH_CHUNKS", d.batch_chunks, 1),
            range_size=_int(env, "RANGE_SIZE", d.range_size, 1),
            plan_days=_int(env, "PLAN_DAYS", d.plan_days, 1),
            max_body_bytes=_int(env, "MAX_BODY_BYTES", d.max_body_bytes, 1),
            max_decoded_bytes=_int(env, "MAX_DECODED_BYTES", d.max_decoded_bytes, 1),
            batch_requeue_after=_int(env, "BATCH_REQUEUE_AFTER", d.batch_requeue_after, 1),
            batch_max_attempts=_int(env, "BATCH_MAX_ATTEMPTS", d.batch_max_attempts, 1),
            replan_minute=env.get("REPLAN_MINUTE") or d.replan_minute,
            replan_hour=env.get("REPLAN_HOUR") or d.replan_hour,
            api_bind=env.get("API_BIND") or d.api_bind,
            api_workers=_int(env, "API_WORKERS", d.api_workers, 1),
            api_certfile=env.get("API_CERTFILE") or None,
            api_keyfile=env.get("API_KEYFILE") or None,
            nntp_host=env.get("NNTP_HOST") or d.nntp_host,
            nntp_port=_int(env, "NNTP_PORT", d.nntp_port, 1),
            nntp_ssl=_bool(env, "NNTP_SSL", d.nntp_ssl),
            nntp_user=env.get("NNTP_USER") or None,
            nntp_password=env.get("NNTP_PASSWORD") or None,
            nntp_cafile=env.get("NNTP_CAFILE") or None,
        )

    def as_public_dict(self) -> dict:
        """Settings safe to show an operator (no secrets)."""
        hidden = {"nntp_password"}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}


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
