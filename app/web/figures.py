"""What the status page shows, and how its numbers and times are written.

The figures are app.services.status's (seed_status: groups with their catalog counts, progress,
rate and time left, nodes, leased and failed ranges, batches, the whole seed's rate) with what
the page adds per group: the ranges and article numbers planned, leased and done. The CLI's
`flask seed status` writes its numbers and times with the same functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.models.ranges import RANGE_STATUSES
from app.services import status as status_service

# Each group's ranges by status: how many, the article numbers they span, and how many of those
# are covered (next_id passed them: accepted, or known missing).
GROUP_SPANS = text("""
    SELECT g.name AS group, r.status, count(*) AS ranges,
           sum(r.last_id - r.first_id + 1)::bigint AS span,
           sum(r.next_id - r.first_id)::bigint AS covered
      FROM seed_ranges r JOIN groups g ON g.id = r.group_id
     GROUP BY g.name, r.status
""")


@dataclass(frozen=True)
class Part:
    """The ranges of one status in a group."""

    ranges: int = 0
    span: int = 0
    covered: int = 0


@dataclass(frozen=True)
class GroupProgress:
    name: str
    parts: dict[str, Part]
    span: int
    covered: int
    articles: int
    missing: int
    files: int
    releases: int
    posts: int
    counted: str  # "exact", or "estimated" for a big group (app.services.status)
    dropped: int
    rate: float  # article numbers accepted a second over the group's recent activity
    last_batch_at: datetime | None
    eta_seconds: float | None  # None: nothing planned, or no batch yet to measure a rate by

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.span if self.span else 0.0

    @property
    def remaining(self) -> int:
        return self.span - self.covered


def status_page(db: Session) -> dict:
    """Everything the status page shows: seed_status's figures, each group's progress, and the
    database's time they were read at."""
    figures = status_service.seed_status(db)
    parts: dict[str, dict[str, Part]] = {}
    for row in db.execute(GROUP_SPANS):
        parts.setdefault(row.group, {})[row.status] = Part(row.ranges, row.span, row.covered)
    groups = [
        GroupProgress(
            name=g["group"], parts={s: parts.get(g["group"], {}).get(s, Part()) for s in RANGE_STATUSES},
            span=g["span"], covered=g["covered"], articles=g["articles"], missing=g["missing"], files=g["files"],
            releases=g["releases"], posts=g["posts"], counted=g["counted"], dropped=g["dropped"],
            rate=g["article_numbers_per_second"], last_batch_at=g["last_batch_at"], eta_seconds=g["eta_seconds"])
        for g in figures["groups"]
    ]
    return {**figures, "progress": groups, "now": figures["as_of"], "rate_minutes": status_service.RATE_MINUTES}


def number(value) -> str:
    """A count with thousands separators; a dash for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def percent(value: float) -> str:
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


FORMATS = {"number": number, "percent": percent, "utc": utc, "duration": duration, "ago": ago, "size": size}
