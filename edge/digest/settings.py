"""Settings from the environment: the parsers both sides use, and the NNTP connection settings.

The edge node (edge/node/config.py) and the data center (app/config.py) each build their one
settings object from these, so that a variable means the same on both sides and a bad value is
refused with the same words. A parser takes the raw text and returns the value, or raises
ValueError with the rest of a sentence whose subject is the setting ("must be an integer, got
'x'"); :func:`read` puts the setting's name in front and raises :class:`SettingsError`.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from edge.digest import nntp
from edge.digest.nntp import DEFAULT_TIMEOUT, NNTPClient

T = TypeVar("T")

# The NNTP host when none is set. The edge runs without NNTP settings (it then fetches only the
# ranges the data center has spooled) and warns about it; anywhere else, connecting to it fails
# with an error that names this host, which says clearly that NNTP_HOST is missing.
PLACEHOLDER_NNTP_HOST = "news.example.net"


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names it."""


# -- parsers -----------------------------------------------------------------------------------


def text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw.strip()


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
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


def seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"must be a number of seconds, got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"must be a positive number of seconds, got {raw!r}")
    return value


def boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be a boolean (1/0, true/false), got {raw!r}")


def readable_file(raw: str) -> str:
    path = Path(raw).expanduser()
    if not path.is_file() or not os.access(path, os.R_OK):
        raise ValueError(f"{raw!r} is not a readable file")
    return str(path)


def read(
    env: Mapping[str, str], name: str, parse: Callable[[str], T], default: Any = None, *, shown: str | None = None
) -> T | Any:
    """The variable `name` of `env` parsed, or `default` when it is unset or empty. An error
    names the setting as `shown` (a command-line flag that gave the value), else as `name`."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise SettingsError(f"{shown or name} {exc}") from None


# -- NNTP --------------------------------------------------------------------------------------


class TLSMode(enum.Enum):
    NONE = "none"  # plain NNTP, the password in clear
    IMPLICIT = "implicit"  # NNTPS: TLS from the first byte (port 563)
    STARTTLS = "starttls"  # the plain port, upgraded by STARTTLS before anything else is said


@dataclass(frozen=True)
class NNTPVariable:
    """An environment variable of the NNTP settings, as `edge run --help` shows it."""

    name: str
    help: str
    secret: bool = False  # environment only: a command-line flag would show it in the process list


NNTP_VARIABLES = (
    NNTPVariable("NNTP_HOST", f"the Usenet server (default {PLACEHOLDER_NNTP_HOST})"),
    NNTPVariable("NNTP_PORT", "its port (default 563 with TLS, else 119)"),
    NNTPVariable("NNTP_SSL", "NNTP over TLS (NNTPS) (default 1)"),
    NNTPVariable("NNTP_STARTTLS", "plain connection upgraded with STARTTLS"),
    NNTPVariable("NNTP_CAFILE", "CA file for the Usenet server's certificate (default: the system's CAs)"),
    NNTPVariable("NNTP_USER", "AUTHINFO user"),
    NNTPVariable("NNTP_PASSWORD", "AUTHINFO password", secret=True),
    NNTPVariable("NNTP_COMPRESS", "compression on the NNTP connection when offered (default 1)"),
    NNTPVariable("NNTP_TIMEOUT", f"seconds to wait for the Usenet server (default {DEFAULT_TIMEOUT:g})"),
)


class PublicNNTPSettings(TypedDict):
    """NNTPSettings as an operator may see them (NNTPSettings.public_dict): all but the password."""

    host: str
    port: int
    tls: str
    cafile: str | None
    user: str | None
    compress: bool
    timeout: float


@dataclass(frozen=True)
class NNTPSettings:
    """How to reach the Usenet server: the same for an edge node and for the data center."""

    host: str = PLACEHOLDER_NNTP_HOST
    port: int | None = None  # None: the mode's standard port, 563 for NNTPS, else 119
    # NNTPS by default on both sides: Usenet providers serve it, and a plain connection would
    # send the AUTHINFO password in clear. A plain server (a local INN) is asked for with NNTP_SSL=0.
    tls: TLSMode = TLSMode.IMPLICIT
    cafile: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    compress: bool = True
    timeout: float = DEFAULT_TIMEOUT

    @property
    def port_or_default(self) -> int:
        return self.port or (563 if self.tls is TLSMode.IMPLICIT else 119)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port_or_default}"

    def public_dict(self) -> PublicNNTPSettings:
        """The settings safe to show an operator: all but the password."""
        return {
            "host": self.host,
            "port": self.port_or_default,
            "tls": self.tls.value,
            "cafile": self.cafile,
            "user": self.user,
            "compress": self.compress,
            "timeout": self.timeout,
        }

    def connect(self) -> NNTPClient:
        """A ready connection to the server: TLS, AUTHINFO and compression as set."""
        return nntp.connect(
            self.host,
            self.port_or_default,
            tls=self.tls is TLSMode.IMPLICIT,
            starttls=self.tls is TLSMode.STARTTLS,
            cafile=self.cafile,
            user=self.user,
            password=self.password,
            compress=self.compress,
            timeout=self.timeout,
        )


def read_nntp_settings(env: Mapping[str, str], shown: Mapping[str, str] | None = None) -> NNTPSettings:
    """The NNTP settings from the variables of NNTP_VARIABLES in `env`. `shown` names a variable
    in errors when something else than the environment gave its value (the edge's flags)."""
    shown = shown or {}

    def get(name: str, parse: Callable[[str], Any], default: Any = None) -> Any:
        return read(env, name, parse, default, shown=shown.get(name))

    defaults = NNTPSettings()
    host = get("NNTP_HOST", text, defaults.host)
    port = get("NNTP_PORT", integer(1, 65535))
    ssl = get("NNTP_SSL", boolean)
    starttls = get("NNTP_STARTTLS", boolean, False)
    cafile = get("NNTP_CAFILE", readable_file)
    user = get("NNTP_USER", text)
    password = get("NNTP_PASSWORD", str)
    compress = get("NNTP_COMPRESS", boolean, defaults.compress)
    timeout = get("NNTP_TIMEOUT", seconds, defaults.timeout)
    if starttls:
        if ssl:
            raise SettingsError("NNTP_SSL and NNTP_STARTTLS exclude each other: NNTPS is TLS from the start")
        tls = TLSMode.STARTTLS
    elif ssl is None:
        tls = defaults.tls
    else:
        tls = TLSMode.IMPLICIT if ssl else TLSMode.NONE
    if password and not user:
        raise SettingsError("NNTP_PASSWORD is set but NNTP_USER is not")
    return NNTPSettings(
        host=host, port=port, tls=tls, cafile=cafile, user=user, password=password, compress=compress, timeout=timeout
    )
