"""What the status page shows, and how its numbers and times are written.

The figures are app.services.status's (seed_status: groups with their catalog counts, progress,
rate and time left, nodes, leased and failed ranges, batches, the whole seed's rate) with what
the page adds per group: the ranges and article numbers planned, leased and done. The CLI's
`flask seed status` writes its numbers and times with the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

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
    """Everything the status page shows: seed_status's figures, each group's progress, the chart
    of articles stored a minute, and the database's time they were read at."""
    figures = status_service.seed_status(db)
    parts: dict[str, dict[str, Part]] = {}
    for row in db.execute(GROUP_SPANS):
        parts.setdefault(row.group, {})[row.status] = Part(row.ranges, row.span, row.covered)
    groups = [
        GroupProgress(
            name=g["group"],
            parts={s: parts.get(g["group"], {}).get(s, Part()) for s in RANGE_STATUSES},
            span=g["span"],
            covered=g["covered"],
            articles=g["articles"],
            missing=g["missing"],
            files=g["files"],
            releases=g["releases"],
            posts=g["posts"],
            counted=g["counted"],
            dropped=g["dropped"],
            rate=g["article_numbers_per_second"],
            last_batch_at=g["last_batch_at"],
            eta_seconds=g["eta_seconds"],
        )
        for g in figures["groups"]
    ]
    chart = stored_chart(status_service.stored_by_minute(db), figures["as_of"], status_service.CHART_HOURS)
    return {
        **figures,
        "progress": groups,
        "now": figures["as_of"],
        "rate_minutes": status_service.RATE_MINUTES,
        "chart": chart,
    }


# The chart's drawing area in SVG units (the page scales it to its width), and its margins.
CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_BOTTOM = 720, 200, 56, 22
# Line colours, in turn by group (a colour-blind-safe palette).
CHART_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")


@dataclass(frozen=True)
class ChartLine:
    group: str
    colour: str
    points: str  # the polyline's "x,y x,y ..."
    total: int  # articles stored over the chart's hours
    peak: int  # the most in one minute


@dataclass(frozen=True)
class Chart:
    """Articles stored a minute by group over the last hours, as SVG polylines (server-drawn: no
    script). Minutes with nothing stored are drawn at 0."""

    hours: int
    width: int
    height: int
    left: int
    bottom: int
    top_value: int  # the y axis' top, articles a minute
    lines: list[ChartLine]
    ticks: list[tuple[float, str]]  # x, the hour's label (UTC)


def stored_chart(rows: list[dict], now: datetime, hours: int) -> Chart:
    """The chart of stored_by_minute's rows ending at `now`."""
    minutes = hours * 60
    end = now.replace(second=0, microsecond=0)
    by_group: dict[str, dict[int, int]] = {}
    for row in rows:
        back = int((end - row["minute"]).total_seconds() // 60)
        if 0 <= back < minutes:
            by_group.setdefault(row["group"], {})[minutes - 1 - back] = int(row["articles"])
    peak = max((v for series in by_group.values() for v in series.values()), default=0)
    top = _nice_top(peak)
    plot_width, plot_height = CHART_WIDTH - CHART_LEFT, CHART_HEIGHT - CHART_BOTTOM

    def x(minute: int) -> float:
        return round(CHART_LEFT + plot_width * minute / max(1, minutes - 1), 1)

    def y(value: int) -> float:
        return round(plot_height - plot_height * value / top, 1)

    lines = [
        ChartLine(
            group,
            CHART_COLOURS[i % len(CHART_COLOURS)],
            " ".join(f"{x(m)},{y(series.get(m, 0))}" for m in range(minutes)),
            sum(series.values()),
            max(series.values(), default=0),
        )
        for i, (group, series) in enumerate(sorted(by_group.items()))
    ]
    ticks = []
    for hour in range(hours, -1, -1):
        at = end - timedelta(hours=hour)
        ticks.append((x(minutes - 1 - hour * 60) if hour else x(minutes - 1), at.strftime("%H:%M")))
    return Chart(hours, CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_BOTTOM, top, lines, ticks)


def _nice_top(peak: int) -> int:
    """The y axis' top: 1, 2 or 5 times a power of ten, at least the peak (10 for nothing)."""
    power = 10
    while True:
        for step in (1, 2, 5):
            if power * step >= peak:
                return power * step
        power *= 10


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
