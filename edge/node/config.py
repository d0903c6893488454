"""The edge node's settings: the environment, overridden by `edge run` flags, in one object.

Only COORDINATOR_URL and NODE_TOKEN are required; everything else has a default or a
placeholder. This is the only module of edge/ that reads os.environ. Secrets (NODE_TOKEN,
NNTP_PASSWORD) come from the environment only: a flag would show them in the process list.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BATCH_FORMATS = ("msgpack", "json")
PLACEHOLDER_NNTP_HOST = "news.example.net"


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it."""


@dataclass(frozen=True)
class EdgeConfig:
    coordinator_url: str
    node_token: str = field(repr=False)
    coordinator_cafile: str | None = None
    coordinator_timeout: float = 60.0
    # No answer from the coordinator for this long (while it is needed) stops the node (exit 4).
    coordinator_give_up: float = 3600.0
    nntp_host: str = PLACEHOLDER_NNTP_HOST
    nntp_port: int | None = None  # None: 563 with NNTP_SSL, else 119
    nntp_ssl: bool = True  # providers serve NNTPS; plain NNTP would send the password in clear
    nntp_starttls: bool = False
    nntp_cafile: str | None = None
    nntp_user: str | None = None
    nntp_password: str | None = field(default=None, repr=False)
    nntp_connections: int = 8
    nntp_compress: bool = True
    nntp_timeout: float = 30.0
    # Three: while the range digesting posts its last batch, the next has its chunks fetched and
    # digests, and a third is leased and fetched in turn (ranges of one or two batches; longer
    # ones digest batch after batch, their posts overlapping, see DigestTurns).
    max_leases: int = 3
    max_chunks_in_flight: int | None = None  # None: connections + 4
    # Worker processes digesting batches (edge/node/digestpool.py), as many ranges digesting at once;
    # 0: in the node's own process, one range at a time. None: a core is left to the reading
    # threads, the others digest (up to MAX_LEASES); on two cores or fewer, none (two digests
    # at once on a 2-core machine that also runs INN and the data center measured no faster
    # than one: docs/benchmarks.md).
    digest_processes: int | None = None
    batch_format: str = "msgpack"
    spool_dir: str | None = None
    spool_max_mb: int = 2048
    poll_interval: float = 30.0  # wait after "nothing to do" before asking again

    @property
    def chunks_in_flight(self) -> int:
        # Enough to keep every connection busy and the digest fed, no more (memory).
        return self.max_chunks_in_flight or self.nntp_connections + 4

    @property
    def digest_processes_or_default(self) -> int:
        if self.digest_processes is not None:
            return self.digest_processes
        cores = _cores()
        return 0 if cores <= 2 else min(cores - 1, self.max_leases)

    @property
    def nntp_port_or_default(self) -> int:
        return self.nntp_port or (563 if self.nntp_ssl else 119)


def _cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# -- parsing ---------------------------------------------------------------------------------

def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw.strip()


def _integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"must be an integer, got {raw!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise ValueError(f"must be {bounds}, got {value}")
        return value
    return parse


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"must be a number of seconds, got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"must be a positive number of seconds, got {raw!r}")
    return value


def _boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be a boolean (1/0, true/false), got {raw!r}")


def _readable_file(raw: str) -> str:
    path = Path(raw).expanduser()
    if not path.is_file() or not os.access(path, os.R_OK):
        raise ValueError(f"{raw!r} is not a readable file")
    return str(path)


def _url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"must be an https:// (or http://) URL with a host, got {raw!r}")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"has a bad port: {raw!r}") from None
    if parts.query or parts.fragment:
        raise ValueError(f"must not have a query or fragment: {raw!r}")
    return raw.strip().rstrip("/")


def _token(raw: str) -> str:
    token = raw.strip()
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        raise ValueError("must be the node token printed by `flask seed nodes create` (no spaces)")
    return token


def _batch_format(raw: str) -> str:
    value = raw.strip().lower()
    if value not in BATCH_FORMATS:
        raise ValueError(f"must be one of {', '.join(BATCH_FORMATS)}, got {raw!r}")
    return value


def _directory(raw: str) -> str:
    path = Path(raw).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot be made: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{raw!r} is not writable")
    return str(path)


@dataclass(frozen=True)
class Setting:
    env: str
    attr: str
    parse: Callable[[str], Any]
    help: str
    flag: bool = True  # False for secrets: environment only


SETTINGS = (
    Setting("COORDINATOR_URL", "coordinator_url", _url,
            "the coordinator, e.g. https://seed.example.net:8443 (required)"),
    Setting("NODE_TOKEN", "node_token", _token, "this node's token (required)", flag=False),
    Setting("COORDINATOR_CAFILE", "coordinator_cafile", _readable_file,
            "CA file that signs the coordinator's certificate (default: the system's CAs)"),
    Setting("COORDINATOR_TIMEOUT", "coordinator_timeout", _seconds, "seconds to wait for one HTTP answer"),
    Setting("COORDINATOR_GIVE_UP", "coordinator_give_up", _seconds,
            "seconds without any answer from the coordinator before the node gives up (exit 4)"),
    Setting("NNTP_HOST", "nntp_host", _text, "the Usenet server"),
    Setting("NNTP_PORT", "nntp_port", _integer(1, 65535), "its port (default 563 with TLS, else 119)"),
    Setting("NNTP_SSL", "nntp_ssl", _boolean, "NNTP over TLS (NNTPS)"),
    Setting("NNTP_STARTTLS", "nntp_starttls", _boolean, "plain connection upgraded with STARTTLS"),
    Setting("NNTP_CAFILE", "nntp_cafile", _readable_file, "CA file for the Usenet server's certificate"),
    Setting("NNTP_USER", "nntp_user", _text, "AUTHINFO user"),
    Setting("NNTP_PASSWORD", "nntp_password", str, "AUTHINFO password", flag=False),
    Setting("NNTP_CONNECTIONS", "nntp_connections", _integer(1, 256), "NNTP connections kept busy"),
    Setting("NNTP_COMPRESS", "nntp_compress", _boolean, "compression on the NNTP connection when offered"),
    Setting("NNTP_TIMEOUT", "nntp_timeout", _seconds, "seconds to wait for the Usenet server"),
    Setting("MAX_LEASES", "max_leases", _integer(1, 64), "ranges held at once with lines to digest (and one more while a range's last batch is posted)"),
    Setting("MAX_CHUNKS_IN_FLIGHT", "max_chunks_in_flight", _integer(1, 4096),
            "chunks fetched ahead of the digest (default: connections + 4); bounds memory"),
    Setting("DIGEST_PROCESSES", "digest_processes", _integer(0, 64),
            "worker processes digesting batches, as many ranges at once (0: in the node's process, one "
            "at a time; default: cores - 1 up to MAX_LEASES, 0 on two cores or fewer)"),
    Setting("BATCH_FORMAT", "batch_format", _batch_format, "batch encoding: msgpack or json"),
    Setting("SPOOL_DIR", "spool_dir", _directory,
            "directory keeping fetched chunks until their batch is accepted (survives a restart)"),
    Setting("SPOOL_MAX_MB", "spool_max_mb", _integer(1), "size cap of the spool directory in MiB"),
    Setting("POLL_INTERVAL", "poll_interval", _seconds, "seconds to wait when there is nothing to do"),
)


def flag_name(setting: Setting) -> str:
    return "--" + setting.attr.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag per setting that is not a secret; each overrides its environment variable (the metavar)."""
    defaults = {f.name: f.default for f in fields(EdgeConfig)}
    for setting in SETTINGS:
        if setting.flag:
            default = defaults.get(setting.attr)
            shown = "" if default is None or setting.attr == "coordinator_url" else f" (default {default})"
            parser.add_argument(flag_name(setting), dest=setting.attr, metavar=setting.env, default=None,
                                help=setting.help + shown)


def load_config(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> EdgeConfig:
    """The settings from the environment, each overridden by its flag when given."""
    env = os.environ if env is None else env
    flags = flags or {}
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        flag_value = flags.get(setting.attr) if setting.flag else None
        if flag_value is not None:
            raw, source = flag_value, flag_name(setting)
        else:
            raw, source = env.get(setting.env), setting.env
        if raw is None or raw == "":
            continue
        try:
            values[setting.attr] = setting.parse(str(raw))
        except ValueError as exc:
            raise ConfigError(f"{source} {exc}") from None
    missing = [s.env for s in SETTINGS if s.attr in ("coordinator_url", "node_token") and s.attr not in values]
    if missing:
        raise ConfigError(f"{' and '.join(missing)} must be set (see `edge run --help`)")
    if values.get("nntp_starttls"):
        if values.get("nntp_ssl"):
            raise ConfigError("NNTP_SSL and NNTP_STARTTLS exclude each other: NNTPS is TLS from the start")
        values["nntp_ssl"] = False  # STARTTLS: the plain port, upgraded
    if values.get("nntp_password") and not values.get("nntp_user"):
        raise ConfigError("NNTP_PASSWORD is set but NNTP_USER is not")
    return EdgeConfig(**values)
