"""How the seed's figures are written for people, the same on the web page and in the CLI's text:
counts with thousands separators, times in UTC saying so, durations as a person reads them,
sizes in binary units. A figure that is not there is written as a dash."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone


def number(value: int | float | None) -> str:
    """A count with thousands separators; a dash for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def percent(value: float) -> str:
    """A share in percent, one decimal."""
    return f"{value:.1f} %"


def utc(moment: datetime | None) -> str:
    """A moment in UTC, saying so; a dash for none."""
    if moment is None:
        return "–"
    if moment.tzinfo is None:  # the catalog's times all carry their zone; a naive one is taken as UTC
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float | None) -> str:
    """A span of time as a person reads it: 45 s, 12 min, 3 h 05 min, 4 d 07 h."""
    if seconds is None:
        return "–"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days:,} d {hours:02d} h"


def ago(moment: datetime | None, now: datetime) -> str:
    """How long before `now` a moment was; "never" for none."""
    if moment is None:
        return "never"
    return f"{duration((now - moment).total_seconds())} ago"


def size(value: int | None) -> str:
    """Bytes in binary units, one decimal: 1.4 GiB."""
    if value is None:
        return "–"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{value:,} B" if unit == "B" else f"{amount:,.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


FORMATS: dict[str, Callable[..., str]] = {
    "number": number,
    "percent": percent,
    "utc": utc,
    "duration": duration,
    "ago": ago,
    "size": size,
}
