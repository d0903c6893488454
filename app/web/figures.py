"""What the status page shows: app.services.status's read model (seed_status: each group's
ranges by status with its catalog counts, rate and time left, nodes, leased and failed ranges,
batches, the whole seed's rate) and the chart of articles stored a minute, drawn here. Numbers
and times are written by app.formatting, as the CLI writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.services import status as status_service


@dataclass(frozen=True)
class StatusPage:
    """The seed's status and the chart drawn from the same moment."""

    status: status_service.SeedStatus
    chart: Chart
    rate_minutes: int = status_service.RATE_MINUTES


def status_page(db: Session) -> StatusPage:
    """Everything the status page shows: seed_status's figures and the chart of articles stored a
    minute, at the database's time they were read at."""
    figures = status_service.seed_status(db)
    chart = stored_chart(status_service.stored_by_minute(db), figures.as_of, status_service.CHART_HOURS)
    return StatusPage(figures, chart)


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


def stored_chart(rows: list[dict[str, Any]], now: datetime, hours: int) -> Chart:
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
