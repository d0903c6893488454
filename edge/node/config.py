"""The edge node's settings: the environment, overridden by `edge run` flags, in one object.

Only COORDINATOR_URL and NODE_TOKEN are required; everything else has a default or a
placeholder. COORDINATOR_URL is https:// unless COORDINATOR_INSECURE=1 says plain http:// is
meant: over http:// the node token goes out unencrypted, so a node never does so unasked. This
and edge.digest.compiled (SEED_IMPL, read when the digest is imported) are the only modules of
edge/ that read os.environ. Secrets (NODE_TOKEN, NNTP_PASSWORD) come from the environment only:
a flag would show them in the process list. The parsers and the NNTP settings are the digest
library's (edge/digest/settings.py), which the data center reads its own with.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# The node warns when NNTP_HOST is it, and inspects nothing by default.
from edge.digest.settings import PLACEHOLDER_NNTP_HOST
from edge.digest.settings import (
    NNTP_VARIABLES,
    NNTPSettings,
    SettingsError,
    boolean,
    integer,
    read,
    read_nntp_settings,
    readable_file,
    seconds,
)

BATCH_FORMATS = ("msgpack", "json")

# The node's name for the settings' one error: `edge run` prints it and exits with EXIT_CONFIG.
ConfigError = SettingsError


@dataclass(frozen=True)
class EdgeConfig:
    coordinator_url: str
    node_token: str = field(repr=False)
    coordinator_cafile: str | None = None
    # Plain http:// to the coordinator is refused unless this says it is meant (a test network).
    coordinator_insecure: bool = False
    coordinator_timeout: float = 60.0
    # No answer from the coordinator for this long (while it is needed) stops the node (exit 4).
    coordinator_give_up: float = 3600.0
    nntp: NNTPSettings = field(default_factory=NNTPSettings)
    nntp_connections: int = 8
    # Three: while the range digesting posts its last batch, the next has its chunks fetched and
    # digests, and a third is leased and fetched in turn (ranges of one or two batches; longer
    # ones digest batch after batch, their posts overlapping, see DigestTurns).
    max_leases: int = 3
    max_chunks_in_flight: int | None = None  # None means nntp_connections + 4
    # The worker processes that digest batches (edge/node/digestpool.py), one for each range
    # digesting at once. With 0, the node digests in its own process, one range at a time. With
    # None, a core is left to the reading threads and the others digest (up to MAX_LEASES); on two
    # cores or fewer there are none: on a 2-core machine that also runs INN and the data center,
    # two digests at once are no faster than one (docs/benchmarks.md, Measured choices).
    digest_processes: int | None = None
    batch_format: str = "msgpack"
    spool_dir: str | None = None
    spool_max_mb: int = 2048
    poll_interval: float = 30.0  # how long to wait after "nothing to do" before asking again
    # Inspections (edge/node/inspector.py): None means on when the node has a Usenet server
    # (NNTP_HOST), off without one (it could read no article); INSPECT=0 turns them off.
    inspect: bool | None = None
    inspect_batch: int = 10  # inspections leased at once

    @property
    def inspecting(self) -> bool:
        """Whether the node leases inspections."""
        return self.inspect if self.inspect is not None else self.nntp.host != PLACEHOLDER_NNTP_HOST

    @property
    def chunks_in_flight(self) -> int:
        # Enough to keep every connection busy and the digest fed, and no more, to bound memory.
        return self.max_chunks_in_flight or self.nntp_connections + 4

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the node says at start about settings it runs with but should not."""
        if urlsplit(self.coordinator_url).scheme == "http":
            return (
                "COORDINATOR_URL is plain http:// (COORDINATOR_INSECURE=1): the node token and the "
                "batches go out unencrypted",
            )
        return ()

    @property
    def digest_processes_or_default(self) -> int:
        if self.digest_processes is not None:
            return self.digest_processes
        cores = _cores()
        return 0 if cores <= 2 else min(cores - 1, self.max_leases)


def _cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# -- parsing ---------------------------------------------------------------------------------


def _url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"must be an https:// URL with a host (http:// only with COORDINATOR_INSECURE=1), got {raw!r}")
    try:
        _ = parts.port  # read, it raises on a port that is no number or out of range
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
    Setting(
        "COORDINATOR_URL", "coordinator_url", _url, "the coordinator, e.g. https://seed.example.net:8443 (required)"
    ),
    Setting("NODE_TOKEN", "node_token", _token, "this node's token (required)", flag=False),
    Setting(
        "COORDINATOR_CAFILE",
        "coordinator_cafile",
        readable_file,
        "CA file that signs the coordinator's certificate (default: the system's CAs)",
    ),
    Setting(
        "COORDINATOR_INSECURE",
        "coordinator_insecure",
        boolean,
        "1 allows a plain http:// COORDINATOR_URL, which sends the node token unencrypted (a test network only)",
    ),
    Setting("COORDINATOR_TIMEOUT", "coordinator_timeout", seconds, "seconds to wait for one HTTP answer"),
    Setting(
        "COORDINATOR_GIVE_UP",
        "coordinator_give_up",
        seconds,
        "seconds without any answer from the coordinator before the node gives up (exit 4)",
    ),
    Setting("NNTP_CONNECTIONS", "nntp_connections", integer(1, 256), "NNTP connections kept busy"),
    Setting(
        "MAX_LEASES",
        "max_leases",
        integer(1, 64),
        "ranges held at once with lines to digest (and one more while a range's last batch is posted)",
    ),
    Setting(
        "MAX_CHUNKS_IN_FLIGHT",
        "max_chunks_in_flight",
        integer(1, 4096),
        "chunks fetched ahead of the digest (default: connections + 4); bounds memory",
    ),
    Setting(
        "DIGEST_PROCESSES",
        "digest_processes",
        integer(0, 64),
        "worker processes digesting batches, as many ranges at once (0: in the node's process, one "
        "at a time; default: cores - 1 up to MAX_LEASES, 0 on two cores or fewer)",
    ),
    Setting("BATCH_FORMAT", "batch_format", _batch_format, "batch encoding: msgpack or json"),
    Setting(
        "SPOOL_DIR",
        "spool_dir",
        _directory,
        "directory keeping fetched chunks until their batch is accepted (survives a restart)",
    ),
    Setting("SPOOL_MAX_MB", "spool_max_mb", integer(1), "size cap of the spool directory in MiB"),
    Setting("POLL_INTERVAL", "poll_interval", seconds, "seconds to wait when there is nothing to do"),
    Setting(
        "INSPECT",
        "inspect",
        boolean,
        "lease inspections: read a few small articles of posts whose names say nothing, with BODY "
        "(default: 1 when NNTP_HOST is set; 0 turns them off)",
    ),
    Setting("INSPECT_BATCH", "inspect_batch", integer(1, 100), "inspections leased at once"),
)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def flag_name(setting: Setting) -> str:
    return _flag(setting.attr)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag per setting that is not a secret; each overrides its environment variable (the metavar)."""
    defaults = {f.name: f.default for f in fields(EdgeConfig)}
    for setting in SETTINGS:
        if setting.flag:
            default = defaults.get(setting.attr)
            shown = "" if default is None or setting.attr == "coordinator_url" else f" (default {default})"
            parser.add_argument(
                flag_name(setting), dest=setting.attr, metavar=setting.env, default=None, help=setting.help + shown
            )
    server = parser.add_argument_group("the Usenet server")
    for variable in NNTP_VARIABLES:
        if not variable.secret:
            dest = variable.name.lower()
            server.add_argument(_flag(dest), dest=dest, metavar=variable.name, default=None, help=variable.help)


def load_config(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> EdgeConfig:
    """The settings from the environment, each overridden by its flag when given."""
    env = os.environ if env is None else env
    flags = flags or {}
    variables = [(s.env, s.attr, s.flag) for s in SETTINGS]
    variables += [(v.name, v.name.lower(), not v.secret) for v in NNTP_VARIABLES]
    given: dict[str, str] = {}  # each variable's raw value: its flag's, else the environment's
    shown: dict[str, str] = {}  # the flag that gave a variable's value, to name it in an error
    for name, dest, has_flag in variables:
        flag_value = flags.get(dest) if has_flag else None
        if flag_value is not None and flag_value != "":
            given[name], shown[name] = str(flag_value), _flag(dest)
        elif env.get(name):
            given[name] = env[name]
    values = {s.attr: read(given, s.env, s.parse, shown=shown.get(s.env)) for s in SETTINGS if s.env in given}
    nntp = read_nntp_settings(given, shown)
    missing = [s.env for s in SETTINGS if s.attr in ("coordinator_url", "node_token") and s.attr not in values]
    if missing:
        raise ConfigError(f"{' and '.join(missing)} must be set (see `edge run --help`)")
    if values.get("inspect") and nntp.host == PLACEHOLDER_NNTP_HOST:
        raise ConfigError(
            f"{shown.get('INSPECT', 'INSPECT')}=1 needs a Usenet server to read articles from: set NNTP_HOST"
        )
    if urlsplit(values["coordinator_url"]).scheme == "http" and not values.get("coordinator_insecure"):
        raise ConfigError(
            f"{shown.get('COORDINATOR_URL', 'COORDINATOR_URL')} is plain http://, which would send the "
            "node token unencrypted: use https://, or set COORDINATOR_INSECURE=1 on a test network"
        )
    return EdgeConfig(nntp=nntp, **values)
