"""Planning: split a group's old articles into ranges for the nodes to lease.

For each group, from just below the lowest article already covered (live indexing's start,
the group's backfill, earlier plans) down to the article posted N days back, found by
bisecting article dates on the server, but never below the server's low mark. The plan takes
over the group's backfill: the backfill pointer moves below it so nothing is fetched twice.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope
from app.models import Group, SeedPlan, SeedRange
from app.services import groups as group_service
from app.services.nntp import connect_from_settings
from edge.digest.overview import OverviewLayout, parse_date

# The first probe window when looking for a dated article at or after a number; it grows
# fourfold while the server answers with nothing (holes, expired articles).
PROBE_WINDOW = 64


class OverviewSource(Protocol):
    """What planning needs of an NNTP connection (edge.digest.nntp.NNTPClient has it)."""

    def group(self, name: str): ...
    def over(self, first: int, last: int): ...
    def overview_layout(self) -> OverviewLayout: ...


@dataclass(frozen=True)
class PlanResult:
    group: str
    plan_id: int | None
    first_id: int | None
    last_id: int | None
    ranges: int
    reason: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def first_dated_article(source: OverviewSource, start: int, limit: int) -> tuple[int, int] | None:
    """(number, unix date) of the first article in [start, limit] whose date reads, or None.

    Missing and expired articles are stepped over with a growing window.
    """
    layout = source.overview_layout()
    window = PROBE_WINDOW
    number = start
    while number <= limit:
        end = min(number + window - 1, limit)
        found = None
        for block in source.over(number, end):
            if found is not None:
                continue  # read the reply to its end: the connection must stay in step
            for line in block.split(b"\r\n"):
                fields = line.split(b"\t")
                if len(fields) > layout.date and fields[0].isdigit():
                    date = parse_date(fields[layout.date])
                    if date is not None:
                        found = (int(fields[0]), date)
                        break
        if found is not None:
            return found
        number = end + 1
        window *= 4
    return None


def find_first_after(source: OverviewSource, low: int, high: int, cutoff: int) -> int | None:
    """The lowest number n in [low, high] such that every article from n on was posted at or
    after `cutoff` (unix seconds) as far as bisection over dates can tell; None when every
    article is older. Holes are harmless: a probe takes the first article at or after it."""
    first = first_dated_article(source, low, high)
    if first is None:
        return None
    if first[1] >= cutoff:
        return low
    # Invariant: the first dated article at or after lo is older than the cutoff;
    # the one at or after hi is not (hi = high + 1 stands for "none is").
    lo, hi = first[0], high + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probe = first_dated_article(source, mid, hi - 1)
        if probe is None or probe[1] >= cutoff:
            hi = mid
        else:
            lo = probe[0]
    return hi if hi <= high else None


def lowest_covered(session: Session, group: Group) -> int | None:
    """The lowest article something already covers: live indexing, the backfill, earlier plans."""
    planned = session.scalar(select(func.min(SeedRange.first_id)).where(SeedRange.group_id == group.id))
    candidates = [n for n in (group.live_first, group.backfill_id, planned) if n is not None]
    return min(candidates) if candidates else None


def split(first_id: int, last_id: int, range_size: int) -> list[tuple[int, int]]:
    """[first_id, last_id] cut into ranges of range_size, newest first (leased in this order)."""
    spans = []
    top = last_id
    while top >= first_id:
        bottom = max(first_id, top - range_size + 1)
        spans.append((bottom, top))
        top = bottom - 1
    return spans


def plan_group(
    session: Session, source: OverviewSource, group: Group, *, days: int, range_size: int,
    now: float | None = None,
) -> PlanResult:
    """Plan one group; under a per-group lock, so planning twice adds nothing twice."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext('plan'), :gid)"), {"gid": group.id})
    session.refresh(group)
    info = source.group(group.name)
    group.low_mark, group.high_mark, group.marks_at = info.first, info.last, func.now()
    if info.last < info.first or info.last <= 0:
        return PlanResult(group.name, None, None, None, 0, "the group is empty on the server")
    covered = lowest_covered(session, group)
    top = info.last if covered is None else min(info.last, covered - 1)
    if top < info.first:
        return PlanResult(group.name, None, None, None, 0, "everything down to the low mark is covered")
    cutoff = int((time.time() if now is None else now) - days * 86400)
    start = find_first_after(source, info.first, top, cutoff)
    if start is None:
        return PlanResult(group.name, None, None, None, 0, f"no article below {top + 1} is newer than {days} days")
    start = max(start, info.first)
    plan = SeedPlan(group_id=group.id, first_id=start, last_id=top, days=days)
    session.add(plan)
    session.flush()
    spans = split(start, top, range_size)
    session.execute(
        SeedRange.__table__.insert(),
        [
            {"plan_id": plan.id, "group_id": group.id, "first_id": a, "last_id": b, "next_id": a}
            for a, b in spans
        ],
    )
    group.backfill_id = start if group.backfill_id is None else min(group.backfill_id, start)
    return PlanResult(group.name, plan.id, start, top, len(spans), "planned")


def groups_to_plan(session: Session, names: Sequence[str] = ()) -> list[str]:
    """The groups named, each checked to exist (NotFound otherwise), or every active group."""
    if names:
        return [group_service.get_group(session, name).name for name in names]
    return [group.name for group in group_service.list_groups(session) if group.active]


def plan_groups(settings: Settings, names: Sequence[str], *, days: int | None = None) -> Iterator[PlanResult]:
    """Plan the named groups one after the other on one NNTP connection, down to `days` back
    (default PLAN_DAYS), yielding each group's result once it is committed: each group is
    planned in its own transaction, so a group planned stays planned if a later one fails."""
    days = days or settings.plan_days
    with connect_from_settings(settings) as client:
        for name in names:
            with session_scope() as session:
                group = group_service.get_group(session, name)
                result = plan_group(session, client, group, days=days, range_size=settings.range_size)
            yield result
