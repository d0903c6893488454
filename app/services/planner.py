"""Planning: split a group's articles into ranges for the nodes to lease, both ways.

Backfill goes down: from just below the lowest article already covered (live planning's start,
the group's backfill, earlier plans) down to the article posted N days back, found by
bisecting article dates on the server, but never below the server's low mark. The plan takes
over the group's backfill: the backfill pointer moves below it so nothing is fetched twice.

Live goes up: from just above the highest article covered (the group's live pointer, live_next,
or above every planned range on its first run) up to the server's high-water mark less a lag
(see live_window). On a group nothing covers yet, live takes only the top: what the server has
below is the group's past, backfill's, bounded by its days (a group whose whole span lies
within the lag is all past). The two meet at the group's live_first: backfill never plans at or
above it, live never below it, so no article is planned twice and none is skipped at the seam.

Both take the same per-group advisory lock, so the two never interleave on one group, and both
read the server's marks with GROUP, which is also when planned ranges the server has expired
since are marked (mark_expired). plan_groups and plan_live plan each group on its own: a group
that fails is recorded on the group and reported, and the others are planned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from sqlalchemy import Table, func, select, text, update
from sqlalchemy.orm import Session

from app import metrics
from app.config import Settings
from app.db import session_scope
from app.models import Group, SeedPlan, SeedRange
from app.services import groups as group_service
from app.services.errors import Conflict, ServiceError
from app.services.nntp import connect_from_settings
from edge.digest.nntp import GroupInfo, NNTPClient, NNTPConnectionError, NNTPError, NNTPReplyError
from edge.digest.overview import OverviewLayout, parse_date

log = logging.getLogger(__name__)

# The window a probe of the date bisection reads (find_first_after); it grows fourfold while
# the server answers with nothing dated (holes, expired articles).
PROBE_WINDOW = 64
PROBE_WINDOW_MOST = 65_536


class OverviewSource(Protocol):
    """What planning needs of an NNTP connection (edge.digest.nntp.NNTPClient has it)."""

    def group(self, name: str) -> GroupInfo: ...
    def over(self, first: int, last: int) -> Iterable[bytes]: ...
    def overview_layout(self) -> OverviewLayout: ...


# A planning error kept on the group: enough to tell what went wrong, bounded whatever a server says.
MAX_ERROR_TEXT = 1000


class PlanningFailed(ServiceError):
    """Some groups could not be planned (each was tried; the others were planned)."""

    status = 502
    code = "planning_failed"


@dataclass(frozen=True)
class PlanResult:
    group: str
    plan_id: int | None
    first_id: int | None
    last_id: int | None
    ranges: int
    reason: str
    kind: str = "backfill"
    # Article numbers of planned ranges the server had expired, marked by this planning.
    expired: int = 0
    # Why the group could not be planned (None: it was, or there was nothing to plan).
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def dated_window(source: OverviewSource, start: int, limit: int) -> list[tuple[int, int]]:
    """(number, unix date) of the first PROBE_WINDOW articles from `start` (up to `limit`) whose
    date reads, in number order; empty when no article in [start, limit] has one.

    Asked for PROBE_WINDOW numbers at a time, fourfold more each time the server has nothing dated
    (missing and expired articles), up to PROBE_WINDOW_MOST: a reply past a long hole is at most
    that many lines.
    """
    layout = source.overview_layout()
    window = PROBE_WINDOW
    number = start
    while number <= limit:
        end = min(number + window - 1, limit)
        found: list[tuple[int, int]] = []
        for block in source.over(number, end):
            if len(found) >= PROBE_WINDOW:
                continue  # read the reply to its end: the connection must stay in step
            for line in block.split(b"\r\n"):
                fields = line.split(b"\t")
                if len(fields) > layout.date and fields[0].isdigit():
                    date = parse_date(fields[layout.date])
                    if date is not None:
                        found.append((int(fields[0]), date))
        if found:
            return sorted(found)[:PROBE_WINDOW]
        number = end + 1
        window = min(window * 4, PROBE_WINDOW_MOST)
    return []


def find_first_after(source: OverviewSource, low: int, high: int, cutoff: int) -> int | None:
    """Where a plan down to `cutoff` (unix seconds) starts in [low, high]: the first article posted
    at or after it, as far as bisection over dates can tell (on a group whose dates run in
    number order, exactly that article); None when every article is older. Holes are harmless:
    a probe reads the first dated articles at or after it.

    A poster sets an article's date, so dates are not in number order: among this week's
    articles a repost may carry its first posting's dates of years ago, thousands of articles in
    a row, or a broken clock 1970. What is in order is when articles reached the server: their
    numbers. A probe that went by one article's date would take a misdated one for the group's
    past and skip everything below the next probe, however recent. So:

    - a probe reads a window of articles and counts it new when any one of them is;
    - a window where every article is older than the cutoff but also older than the newest date
      already read in order below it (the floor) is out of order (misdated: it cannot have
      reached the server before what is below it), and tells nothing: the probe looks further
      up, at windows ever farther apart, for one that is new or in order; finding none below the
      search's upper end, it counts the probe new.

    Only a window older than the cutoff and in order moves the search up. Dates out of order can
    then make the plan start lower than the cutoff (more to read). What dates cannot tell apart
    is a misdated window that looks in order: a run of reposted articles all dated between the
    floor and the cutoff (a post of 45 days ago reposted this week, planning 30 days back), or any
    run when the group's first articles are misdated so old that the floor says nothing. Such a
    run, where a probe lands in it, is taken for the group's past."""

    def first_new(window: list[tuple[int, int]]) -> int | None:
        return next((number for number, date in window if date >= cutoff), None)

    window = dated_window(source, low, high)
    if not window:
        return None
    if (found := first_new(window)) is not None:
        return found
    # Invariant: every window read in order at or below lo is older than the cutoff, the newest
    # date among them `floor`; from hi on, the articles count as new (hi = high + 1: none do).
    lo, hi = window[-1][0], high + 1
    floor = max(date for _, date in window)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        start, step = mid, PROBE_WINDOW
        while True:
            window = dated_window(source, start, hi - 1) if start < hi else []
            if not window:
                hi = mid  # nothing dated, or nothing but misdated, from mid up to hi: not skipped
                break
            if (found := first_new(window)) is not None:
                hi = _start_before(window, found, floor) if start == mid else mid
                break
            newest = max(date for _, date in window)
            if newest >= floor:
                lo, floor = window[-1][0], newest
                break
            start, step = window[-1][0] + step, step * 4  # out of order: look further up
    return hi if hi <= high else None


def _start_before(window: list[tuple[int, int]], found: int, floor: int) -> int:
    """Where the new part of a window starts, its first new article `found` in hand: just after the
    last article before it dated in order (at or after `floor`: it reached the server before the
    cutoff, and so did everything below it), or the window's first article when none is. The
    misdated articles in between (older than the floor) may have reached the server after the
    cutoff: they are planned. A window further up, past out-of-order ones, says nothing of what
    lies between: its caller starts from the probe's number then."""
    before = [i for i, (number, date) in enumerate(window) if number < found and date >= floor]
    return window[before[-1] + 1][0] if before else window[0][0]


def lowest_covered(session: Session, group: Group) -> int | None:
    """The lowest article something already covers: live planning, the backfill, earlier plans."""
    planned = session.scalar(select(func.min(SeedRange.first_id)).where(SeedRange.group_id == group.id))
    candidates = [n for n in (group.live_first, group.backfill_id, planned) if n is not None]
    return min(candidates) if candidates else None


def highest_covered(session: Session, group: Group) -> int | None:
    """The highest article something already covers: live planning's pointer, earlier plans."""
    planned = session.scalar(select(func.max(SeedRange.last_id)).where(SeedRange.group_id == group.id))
    candidates = [n for n in (None if group.live_next is None else group.live_next - 1, planned) if n is not None]
    return max(candidates) if candidates else None


def live_window(start: int | None, low: int, high: int, *, lag: int, seen_high: int | None) -> tuple[int, int]:
    """[first, last]: the article numbers live planning plans now; nothing when last < first.

    `start` is the first article nothing covers yet. The newest numbers may still be propagating
    on the server: a number is ready once it is `lag` below the high mark, or once the previous
    look at the group (`seen_high`, a planning period earlier) saw it already, whichever comes
    first. Numbers below the low mark have expired: never planned.

    `start` None means nothing covers the group at all: live planning starts just above the
    ready numbers, which are the group's past and backfill's; the numbers above them are live's,
    planned once ready. When none is ready (the group's whole span lies within the lag) it
    starts above the high mark: starting at the low mark instead would plan the group's whole
    past as live a period later, with no days limit, and leave backfill nothing to plan.
    """
    ready = high - lag
    if seen_high is not None:
        ready = max(ready, min(seen_high, high))
    if start is None:
        start = ready + 1 if ready >= low else high + 1
    return max(start, low), ready


def split(first_id: int, last_id: int, range_size: int) -> list[tuple[int, int]]:
    """[first_id, last_id] cut into ranges of range_size, newest first (leased in this order)."""
    spans = []
    top = last_id
    while top >= first_id:
        bottom = max(first_id, top - range_size + 1)
        spans.append((bottom, top))
        top = bottom - 1
    return spans


def mark_expired(session: Session, group: Group, low: int) -> int:
    """Planned ranges of the group whose numbers the server's low mark `low` has passed: their
    next_id moves up to it (a range wholly below it becomes 'expired'), the numbers skipped
    counted in `expired`. Only planned ranges: a leased range's node reads on (it finds those
    numbers missing), and next_id only ever moves past numbers no batch was accepted for.
    Returns how many article numbers were marked."""
    skipped = (
        session.execute(
            text(
                "WITH passed AS ("
                "   SELECT id, least(:low, last_id + 1) - next_id AS skipped FROM seed_ranges"
                "    WHERE group_id = :g AND status = 'planned' AND next_id < :low FOR UPDATE)"
                " UPDATE seed_ranges r SET"
                "   expired = r.expired + p.skipped,"
                "   next_id = r.next_id + p.skipped,"
                "   status = CASE WHEN r.next_id + p.skipped > r.last_id THEN 'expired' ELSE r.status END"
                " FROM passed p WHERE r.id = p.id"
                " RETURNING p.skipped"
            ),
            {"g": group.id, "low": low},
        )
        .scalars()
        .all()
    )
    return sum(skipped)


def coverage(session: Session, group: Group, first: int, last: int) -> str:
    """What covers the articles first..last, for an operator: the group's plans there by kind
    (one named by its id, several counted), and the numbers live planning holds but has not
    planned yet."""
    rows = session.execute(
        select(
            SeedPlan.kind,
            func.count(),
            func.min(SeedPlan.id),
            func.min(SeedPlan.days),
            func.min(SeedPlan.first_id),
            func.max(SeedPlan.last_id),
        )
        .where(SeedPlan.group_id == group.id, SeedPlan.last_id >= first, SeedPlan.first_id <= last)
        .group_by(SeedPlan.kind)
        .order_by(func.min(SeedPlan.first_id))
    ).all()
    parts = []
    for kind, count, plan_id, days, low, high in rows:
        span = f"{max(low, first)}-{min(high, last)}"
        if count > 1:
            parts.append(f"{span} by {count} {kind} plans")
        else:
            parts.append(f"{span} by {kind} plan {plan_id}" + (f" ({days} days)" if days is not None else ""))
    if group.live_next is not None and group.live_next <= last:
        parts.append(f"{max(group.live_next, first)}-{last} by live planning, to plan once ready (LIVE_LAG)")
    # Neither plans nor live's pointer: what lowest_covered went by (the pointers alone).
    if not parts and group.live_first is not None and group.live_first <= last:
        parts.append(f"{max(group.live_first, first)}-{last} by live planning's start ({group.live_first})")
    if not parts and group.backfill_id is not None and group.backfill_id <= last:
        parts.append(f"{max(group.backfill_id, first)}-{last} by the group's backfill pointer")
    return ", ".join(parts)


def _lock_and_read(session: Session, source: OverviewSource, group: Group) -> tuple[GroupInfo, int | None, int]:
    """The group under the per-group planning lock, its marks read from the server (GROUP) and
    kept, and its expired ranges marked: (the server's marks, the high mark seen before, the
    article numbers marked expired)."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext('plan'), :gid)"), {"gid": group.id})
    session.refresh(group)
    seen_high = group.high_mark
    info = source.group(group.name)
    group.low_mark, group.high_mark, group.marks_at = info.first, info.last, func.now()
    # An empty group's low mark passes its last article too (everything in it expired); a
    # server that says 0 says nothing.
    expired = mark_expired(session, group, info.first) if info.first > 0 else 0
    return info, seen_high, expired


def _add_plan(
    session: Session, group: Group, kind: str, first_id: int, last_id: int, range_size: int, days: int | None = None
) -> tuple[SeedPlan, int]:
    plan = SeedPlan(group_id=group.id, first_id=first_id, last_id=last_id, days=days, kind=kind)
    session.add(plan)
    session.flush()
    spans = split(first_id, last_id, range_size)
    session.execute(
        # A mapped class's __table__ is its Table (annotated FromClause, what any mapping may have).
        cast(Table, SeedRange.__table__).insert(),
        [
            {"plan_id": plan.id, "group_id": group.id, "first_id": a, "last_id": b, "next_id": a, "kind": kind}
            for a, b in spans
        ],
    )
    return plan, len(spans)


def plan_group(
    session: Session,
    source: OverviewSource,
    group: Group,
    *,
    days: int,
    range_size: int,
    now: float | None = None,
) -> PlanResult:
    """Plan one group's backfill; under a per-group lock, so planning twice adds nothing twice."""
    info, _, expired = _lock_and_read(session, source, group)

    def nothing(reason: str) -> PlanResult:
        return PlanResult(group.name, None, None, None, 0, reason, expired=expired)

    if not group.active:
        return nothing("the group is disabled")
    if info.last < info.first or info.last <= 0:
        return nothing("the group is empty on the server")
    covered = lowest_covered(session, group)
    top = info.last if covered is None else min(info.last, covered - 1)
    if top < info.first:
        return nothing(
            f"everything from the low mark {info.first} up is covered already:"
            f" {coverage(session, group, info.first, info.last)}"
        )
    cutoff = int((time.time() if now is None else now) - days * 86400)
    start = find_first_after(source, info.first, top, cutoff)
    if start is None:
        above = (
            "" if top >= info.last else f" (above it, covered already: {coverage(session, group, top + 1, info.last)})"
        )
        return nothing(f"no article below {top + 1} is newer than {days} days{above}")
    start = max(start, info.first)
    plan, ranges = _add_plan(session, group, "backfill", start, top, range_size, days=days)
    group.backfill_id = start if group.backfill_id is None else min(group.backfill_id, start)
    return PlanResult(group.name, plan.id, start, top, ranges, "planned", expired=expired)


def plan_live_group(session: Session, source: OverviewSource, group: Group, *, lag: int, range_size: int) -> PlanResult:
    """Plan one group's new articles, from live_next (or just above everything planned, on the
    first run; at the top of a group nothing covers yet) up to the high mark less the lag
    (live_window); under the per-group lock."""
    info, seen_high, expired = _lock_and_read(session, source, group)

    def nothing(reason: str) -> PlanResult:
        return PlanResult(group.name, None, None, None, 0, reason, kind="live", expired=expired)

    if not group.active:
        return nothing("the group is disabled")
    if info.last < info.first or info.last <= 0:
        return nothing("the group is empty on the server")
    start = group.live_next
    if start is None:
        covered = highest_covered(session, group)
        start = None if covered is None else covered + 1
    first, last = live_window(start, info.first, info.last, lag=lag, seen_high=seen_high)
    if group.live_first is None:
        group.live_first = first
    if last < first:
        # The pointer still moves past numbers that expired before they were planned.
        group.live_next = first
        if start is None and first > info.last:
            span = info.last - info.first + 1
            within = f", within LIVE_LAG {lag} of the top" if span <= lag else ""
            return nothing(
                f"live planning starts at {first}, above the high mark: the group's {span} article"
                f" numbers ({info.first}-{info.last}{within}) are its past, for backfill to plan"
                " (`flask seed plan`, beat's plan.replan)"
            )
        if start is None:
            return nothing(
                f"live planning starts at {first} and plans {first}-{info.last} once they are"
                f" ready (LIVE_LAG {lag}); backfill plans below {first}"
            )
        if first > info.last:
            return nothing(f"nothing new above {first - 1}")
        return nothing(
            f"{info.last - first + 1} new articles from {first} kept back while they may still"
            f" be propagating (LIVE_LAG {lag})"
        )
    plan, ranges = _add_plan(session, group, "live", first, last, range_size)
    group.live_next = last + 1
    return PlanResult(group.name, plan.id, first, last, ranges, "planned", kind="live", expired=expired)


def groups_to_plan(session: Session, names: Sequence[str] = ()) -> list[str]:
    """The groups named, each checked to exist (NotFound otherwise) and be enabled (Conflict),
    or every active group."""
    if names:
        groups = [group_service.get_group(session, name) for name in names]
        disabled = [g.name for g in groups if not g.active]
        if disabled:
            raise Conflict(
                f"group disabled: {', '.join(disabled)} (`flask seed groups enable NAME` first)", code="group_disabled"
            )
        return [g.name for g in groups]
    return [group.name for group in group_service.list_groups(session) if group.active]


def plan_groups(settings: Settings, names: Sequence[str], *, days: int | None = None) -> Iterator[PlanResult]:
    """Plan the named groups' backfill one after the other, down to `days` back (default
    PLAN_DAYS), yielding each group's result once it is committed (each in its own transaction,
    so a group planned stays planned if a later one fails). A group that fails is recorded and
    yielded with its error, and the next one is planned (_each_group)."""
    days = days or settings.plan_days
    return _each_group(
        settings,
        names,
        "backfill",
        lambda session, client, group: plan_group(session, client, group, days=days, range_size=settings.range_size),
    )


def plan_live(settings: Settings, names: Sequence[str]) -> Iterator[PlanResult]:
    """Live planning of the named groups, each on its own as plan_groups does."""
    return _each_group(
        settings,
        names,
        "live",
        lambda session, client, group: plan_live_group(
            session, client, group, lag=settings.live_lag, range_size=settings.range_size
        ),
    )


def _each_group(
    settings: Settings,
    names: Sequence[str],
    kind: str,
    plan_one: Callable[[Session, OverviewSource, Group], PlanResult],
) -> Iterator[PlanResult]:
    """plan_one for every group on one NNTP connection, each group in its own transaction. A
    group that fails (the server has no such group, refuses, is down, or a date look-up fails)
    is rolled back, recorded on the group (plan_failures, plan_error, plan_error_at), logged and
    yielded with its error; a connection lost on the way is opened again for the next group."""
    address = settings.nntp.address
    client = None
    try:
        for name in names:
            try:
                if client is None:
                    client = connect_from_settings(settings)
                with session_scope() as session:
                    group = group_service.get_group(session, name)
                    result = plan_one(session, client, group)
                    group.plan_failures = 0
            except NNTPReplyError as exc:
                error = f"NNTP server {address} answered {exc.code} {exc.message} to {exc.command}"
            except (NNTPError, OSError) as exc:
                error = f"NNTP server {address}: {exc}"
                if client is not None and not isinstance(exc, NNTPConnectionError):
                    _close(client)  # a timeout or reset below the client: its state is unknown
                client = None
            except ServiceError as exc:  # the group was removed meanwhile
                error = exc.message
            else:
                metrics.planned(name, kind, ranges=result.ranges, failed=False)
                yield result
                continue
            log.warning("planning %s (%s) failed: %s", name, kind, error)
            record_failure(name, error)
            metrics.planned(name, kind, ranges=0, failed=True)
            yield PlanResult(name, None, None, None, 0, error, kind=kind, error=error)
    finally:
        if client is not None:
            _close(client)


def _close(client: NNTPClient) -> None:
    try:
        client.quit()
    except (NNTPError, OSError):
        pass


def record_failure(name: str, error: str) -> None:
    """One more failed planning of the group, with its error and time (its own transaction)."""
    with session_scope() as session:
        session.execute(
            update(Group)
            .where(Group.name == name)
            .values(plan_failures=Group.plan_failures + 1, plan_error=error[:MAX_ERROR_TEXT], plan_error_at=func.now())
        )


def summary(results: Sequence[PlanResult]) -> str:
    """One line for an operator: how many groups were planned, had nothing new, failed (named)."""
    failed = [r for r in results if r.error is not None]
    planned = sum(1 for r in results if r.plan_id is not None)
    line = f"{len(results)} groups: {planned} planned, {len(results) - planned - len(failed)} with nothing to plan"
    if failed:
        line += f", {len(failed)} failed: " + "; ".join(f"{r.group} ({r.error})" for r in failed)
    return line
