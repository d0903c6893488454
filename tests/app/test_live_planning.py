"""Live planning and what comes with it: the live window's arithmetic, the seam where live and
backfill planning meet, the lease order with live work, the retention edge, and each group
planned on its own with its failures recorded. Against INN 2 through simnews' provider proxy,
with article numbers past 2^32."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import time

import pytest
from sqlalchemy import select, text, update

from app.config import Settings
from app.db import session_scope
from app.models import SeedPlan, SeedRange
from app.services import leases
from app.services.groups import get_group
from app.services.ingest import accept as acceptance
from app.services.planner import (
    PlanResult,
    highest_covered,
    live_window,
    mark_expired,
    plan_group,
    plan_groups,
    plan_live,
    plan_live_group,
    summary,
)
from app.services.status import seed_status
from edge.digest.nntp import connect
from edge.digest.overview import parse_date
from edge.digest.settings import NNTPSettings, TLSMode
from simnews.generator import Config, generate
from simnews.inject import inject
from simnews.proxy import ProviderProxy
from tests.app.factories import BIG, make_group, make_node, make_plan

SHIFT = 2**32 + 77_000  # the provider's numbers: INN's plus this, past 2^32
_posts = itertools.count(1)


# -- the live window: pure arithmetic ----------------------------------------------------------


def test_the_live_window_starts_where_coverage_ends_and_keeps_back_the_lag():
    low, high = BIG, BIG + 100_000
    # Everything from the pointer up to the high mark less the lag.
    assert live_window(BIG + 50_000, low, high, lag=1_000, seen_high=None) == (BIG + 50_000, BIG + 99_000)
    # A number the previous look saw already is ready, however close to the top.
    assert live_window(BIG + 50_000, low, high, lag=1_000, seen_high=BIG + 99_900) == (BIG + 50_000, BIG + 99_900)
    # ... but never past what the server has now.
    assert live_window(BIG + 50_000, low, high, lag=1_000, seen_high=BIG + 200_000) == (BIG + 50_000, high)
    # No lag: up to the high mark.
    assert live_window(BIG + 50_000, low, high, lag=0, seen_high=None) == (BIG + 50_000, high)
    # Nothing new: the window is empty (last < first).
    first, last = live_window(high + 1, low, high, lag=0, seen_high=high)
    assert (first, last) == (high + 1, high) and last < first
    # Kept back: everything new is within the lag and the previous look did not see it.
    first, last = live_window(BIG + 99_500, low, high, lag=1_000, seen_high=BIG + 99_400)
    assert last < first
    # Nothing covers the group: live planning starts above the ready part, leaving the rest to backfill.
    assert live_window(None, low, high, lag=1_000, seen_high=None) == (BIG + 99_001, BIG + 99_000)
    # The server expired numbers live planning never planned: it starts at the low mark.
    assert live_window(BIG - 5, BIG + 10, high, lag=0, seen_high=None) == (BIG + 10, high)
    # Nothing covers a group whose whole span lies within the lag: live starts above the high
    # mark, every article the server has is the group's past (backfill's), none is live's.
    first, last = live_window(None, low, low + 299, lag=1_000, seen_high=None)
    assert first == low + 300 and last < first
    # ... but what came after an earlier look at it (a backfill's that planned nothing) is new.
    assert live_window(None, low, low + 299, lag=1_000, seen_high=low + 249) == (low + 250, low + 249)


# -- the seam, on INN --------------------------------------------------------------------------


def post(inn, group: str, count: int, **dates) -> None:
    """`count` fresh articles in `group` (one feed connection: INN numbers them in order), dated
    as `dates` (Config's start and days) say, or by the generator's default."""
    namespace = f"{group}.{next(_posts)}"
    articles = [a for a in generate(count, Config(groups=(group,), namespace=namespace, **dates)) if not a.lost]
    assert inject(inn.host, inn.feed_port, articles, conns=1).accepted == len(articles)


@pytest.fixture
def provider(inn):
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT) as proxy:
        with connect(inn.host, proxy.port, compress=False) as client:
            yield client


def marks(client, name: str) -> tuple[int, int]:
    info = client.group(name)
    return info.first, info.last


def ranges_of(session, group) -> list[SeedRange]:
    return list(session.scalars(select(SeedRange).where(SeedRange.group_id == group.id).order_by(SeedRange.first_id)))


def assert_tiled(ranges: list[SeedRange], low: int, high: int) -> None:
    """The ranges cover low..high, each number once: none planned twice, none skipped."""
    spans = [(r.first_id, r.last_id) for r in ranges]
    assert spans[0][0] == low and spans[-1][1] == high, spans
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:])), spans


def test_first_live_run_of_an_unplanned_group_leaves_the_past_to_backfill(inn, fresh_group, provider, db_session):
    post(inn, fresh_group, 2_000)
    low, high = marks(provider, fresh_group)
    assert low > 2**32 and high - low + 1 == 2_000
    group = make_group(db_session, fresh_group)
    first = plan_live_group(db_session, provider, group, lag=100, range_size=500)
    assert (first.plan_id, first.kind) == (None, "live")
    assert (group.live_first, group.live_next) == (high - 99, high - 99)
    # Backfill plans everything below live's start; live keeps what it kept back.
    backfill = plan_group(db_session, provider, group, days=36500, range_size=500)
    assert (backfill.first_id, backfill.last_id) == (low, high - 100)
    # The next look saw them already: planned now, however close to the top.
    again = plan_live_group(db_session, provider, group, lag=100, range_size=500)
    assert (again.first_id, again.last_id, again.ranges) == (high - 99, high, 1)
    post(inn, fresh_group, 1_500)
    _, newer = marks(provider, fresh_group)
    live = plan_live_group(db_session, provider, group, lag=100, range_size=500)
    assert (live.first_id, live.last_id) == (high + 1, newer - 100)
    assert live.ranges == 3  # 1,400 numbers in ranges of 500
    rest = plan_live_group(db_session, provider, group, lag=100, range_size=500)
    assert (rest.first_id, rest.last_id) == (newer - 99, newer)
    assert plan_live_group(db_session, provider, group, lag=100, range_size=500).plan_id is None
    ranges = ranges_of(db_session, group)
    assert_tiled(ranges, low, newer)
    assert {r.kind for r in ranges if r.first_id < group.live_first} == {"backfill"}
    assert {r.kind for r in ranges if r.first_id >= group.live_first} == {"live"}
    plans = db_session.scalars(select(SeedPlan).where(SeedPlan.group_id == group.id).order_by(SeedPlan.id)).all()
    assert [p.kind for p in plans] == ["backfill", "live", "live", "live"]
    assert group.live_next == newer + 1 and highest_covered(db_session, group) == newer


def test_first_live_run_of_a_group_with_backfill_plans_starts_above_them(inn, fresh_group, provider, db_session):
    post(inn, fresh_group, 1_000)
    low, high = marks(provider, fresh_group)
    group = make_group(db_session, fresh_group)
    backfill = plan_group(db_session, provider, group, days=36500, range_size=400)
    assert (backfill.first_id, backfill.last_id) == (low, high)
    post(inn, fresh_group, 900)
    _, newer = marks(provider, fresh_group)
    # The previous look (backfill's) saw up to `high`; the lag keeps back the newest 300.
    live = plan_live_group(db_session, provider, group, lag=300, range_size=400)
    assert (live.first_id, live.last_id) == (high + 1, newer - 300)
    assert group.live_first == high + 1
    # Backfill planned again finds everything covered down to the low mark; live goes on above.
    assert plan_group(db_session, provider, group, days=36500, range_size=400).plan_id is None
    plan_live_group(db_session, provider, group, lag=300, range_size=400)
    assert_tiled(ranges_of(db_session, group), low, newer)


def test_live_planning_skips_a_disabled_group(inn, fresh_group, provider, db_session):
    post(inn, fresh_group, 300)
    group = make_group(db_session, fresh_group)
    group.active = False
    for result in (
        plan_live_group(db_session, provider, group, lag=0, range_size=100),
        plan_group(db_session, provider, group, days=36500, range_size=100),
    ):
        assert result.plan_id is None and "disabled" in result.reason
    assert ranges_of(db_session, group) == []


# -- a new group smaller than LIVE_LAG ---------------------------------------------------------

DAY = 86_400


def dates_of(client, name: str) -> list[tuple[int, int]]:
    """(number, unix date) of every article of the group, as the server has them."""
    info = client.group(name)
    layout = client.overview_layout()
    dates = []
    for block in client.over(info.first, info.last):
        for line in block.split(b"\r\n"):
            fields = line.split(b"\t")
            if len(fields) > layout.date and fields[0].isdigit():
                dates.append((int(fields[0]), parse_date(fields[layout.date])))
    return dates


def first_newer(dates: list[tuple[int, int]], cutoff: float) -> int:
    return min(n for n, d in dates if d >= cutoff)


def pointers(name: str) -> tuple[int | None, int | None]:
    with session_scope() as s:
        group = get_group(s, name)
        return group.live_first, group.live_next


def plans_of(name: str) -> list[tuple[str, int, int, int | None]]:
    """The group's plans, lowest first: (kind, first_id, last_id, days)."""
    with session_scope() as s:
        rows = s.execute(
            select(SeedPlan.kind, SeedPlan.first_id, SeedPlan.last_id, SeedPlan.days)
            .where(SeedPlan.group_id == get_group(s, name).id)
            .order_by(SeedPlan.first_id)
        ).all()
        return [tuple(r) for r in rows]


def days_ago(days: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)


def test_a_new_group_smaller_than_the_lag_leaves_its_past_to_backfill_and_plans_only_new_articles_live(
    cli_runner, flask_app, inn, fresh_group
):
    """Issue 32, item 10: `groups add`, beat's live tick, `plan --days 2`, the next tick, on a group
    of 300 articles with the default LIVE_LAG of 20,000. The first tick used to take the whole
    group from its low mark for live planning, so backfill said "everything down to the low mark
    is covered" and the next tick planned all 300 as live, with no days limit."""
    post(inn, fresh_group, 300, start=days_ago(10), days=10)
    app_settings = flask_app.config["SETTINGS"]
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT) as proxy:
        flask_app.config["SETTINGS"] = dataclasses.replace(nntp_settings(app_settings, proxy.port), live_lag=20_000)
        try:
            with connect(inn.host, proxy.port, compress=False) as client:
                low, high = marks(client, fresh_group)
                dates = dates_of(client, fresh_group)
            assert low > 2**32 and high - low + 1 == 300
            added = cli_runner.invoke(args=["seed", "groups", "add", fresh_group])
            assert added.exit_code == 0, added.output
            # Beat's tick (plan.live plans every active group, as `plan --live` does): live
            # planning starts above the high mark and plans nothing; the 300 are the group's past.
            tick = cli_runner.invoke(args=["seed", "plan", "--live"])
            assert tick.exit_code == 0, tick.output
            assert (
                f"{fresh_group}: nothing to plan (live planning starts at {high + 1}, above the high mark:"
                f" the group's 300 article numbers ({low}-{high}, within LIVE_LAG 20000 of the top) are its"
                " past, for backfill to plan"
            ) in tick.output
            assert pointers(fresh_group) == (high + 1, high + 1) and plans_of(fresh_group) == []
            # The operator's backfill two days back plans at once, down to the article posted then.
            before = time.time()
            backfill = cli_runner.invoke(args=["seed", "plan", fresh_group, "--days", "2", "--json"])
            after = time.time()
            assert backfill.exit_code == 0, backfill.output
            (planned,) = json.loads(backfill.output)
            start = planned["first_id"]
            assert (planned["kind"], planned["last_id"], planned["ranges"]) == ("backfill", high, 1)
            # Dates carry up to a minute of jitter around a 48-minute spacing: the cut is nearly exact.
            assert first_newer(dates, before - 2 * DAY) - 2 <= start <= first_newer(dates, after - 2 * DAY) + 2
            assert low + 200 < start  # about 60 of the 300, not the group from its low mark
            # The next tick: nothing new, and nothing of the past planned live.
            tick = cli_runner.invoke(args=["seed", "plan", "--live"])
            assert tick.exit_code == 0, tick.output
            assert f"{fresh_group}: nothing to plan (nothing new above {high})" in tick.output
            assert plans_of(fresh_group) == [("backfill", start, high, 2)]
            # New posts are live's: kept back while within the lag, planned by the tick after.
            post(inn, fresh_group, 40, start=days_ago(0.001), days=0.0005)
            newer = high + 40
            tick = cli_runner.invoke(args=["seed", "plan", "--live"])
            assert f"{fresh_group}: nothing to plan (40 new articles from {high + 1} kept back" in tick.output
            tick = cli_runner.invoke(args=["seed", "plan", "--live"])
            assert f"{fresh_group}: planned live {high + 1}-{newer} in 1 ranges" in tick.output
            # Backfill again: nothing below its plan is newer than two days, and it says what covers the rest.
            again = cli_runner.invoke(args=["seed", "plan", fresh_group, "--days", "2"])
            assert again.exit_code == 0, again.output
            live_plan = plans_of(fresh_group)[1]
            assert live_plan[:3] == ("live", high + 1, newer)
            with session_scope() as s:
                live_id = s.scalar(select(SeedPlan.id).where(SeedPlan.kind == "live", SeedPlan.first_id == high + 1))
            assert (
                f"{fresh_group}: nothing to plan (no article below {start} is newer than 2 days (above it,"
                f" covered already: {start}-{high} by backfill plan {planned['plan_id']} (2 days),"
                f" {high + 1}-{newer} by live plan {live_id}))"
            ) in again.output
        finally:
            flask_app.config["SETTINGS"] = app_settings
    with session_scope() as s:
        group = get_group(s, fresh_group)
        ranges = ranges_of(s, group)
        assert_tiled(ranges, start, newer)  # each number once, none skipped at the seam
        assert [r.kind for r in ranges] == ["backfill", "live"] and group.live_first == high + 1


def test_backfill_that_finds_everything_covered_says_by_what(inn, fresh_group, provider, db_session):
    post(inn, fresh_group, 300)
    low, high = marks(provider, fresh_group)
    group = make_group(db_session, fresh_group)
    # What the first live tick on a group within LIVE_LAG used to leave: live planning holding
    # everything from the low mark, nothing planned yet.
    group.live_first = group.live_next = low
    held = plan_group(db_session, provider, group, days=2, range_size=1_000)
    assert held.plan_id is None
    assert held.reason == (
        f"everything from the low mark {low} up is covered already: {low}-{high} by live"
        " planning, to plan once ready (LIVE_LAG)"
    )
    # ... and what the next tick made of it: the whole group one live plan.
    (live,) = make_kind_plan(db_session, group, [(low, high)], "live")
    group.live_next = high + 1
    covered = plan_group(db_session, provider, group, days=2, range_size=1_000)
    assert covered.plan_id is None
    assert covered.reason == (
        f"everything from the low mark {low} up is covered already: {low}-{high} by live plan {live.plan_id}"
    )


# -- the lease order ---------------------------------------------------------------------------


def make_kind_plan(session, group, spans, kind: str) -> list[SeedRange]:
    ranges = make_plan(session, group, spans)
    session.execute(update(SeedPlan).where(SeedPlan.id == ranges[0].plan_id).values(kind=kind))
    for r in ranges:
        r.kind = kind
    session.flush()
    return ranges


def kinds_by_id(session) -> dict[int, str]:
    return dict(session.execute(select(SeedRange.id, SeedRange.kind)).all())


def test_several_nodes_get_live_ranges_first_and_backfill_keeps_its_share(db_session):
    group = make_group(db_session)
    backfill = make_kind_plan(db_session, group, [(BIG + i * 100, BIG + i * 100 + 99) for i in range(10)], "backfill")
    live = make_kind_plan(
        db_session, group, [(BIG + 10_000 + i * 100, BIG + 10_099 + i * 100) for i in range(10)], "live"
    )
    nodes = [make_node(db_session, f"edge-{i}")[0] for i in range(3)]
    got = [leases.lease(db_session, nodes[i % 3], max_leases=20, backfill_every=4) for i in range(12)]
    kind = kinds_by_id(db_session)
    kinds = [kind[g.range_id] for g in got]
    # One lease in four looked at backfill first; the others took live ranges.
    assert kinds.count("backfill") == 3, kinds
    turns = [i for i, k in enumerate(kinds) if k == "backfill"]
    assert turns[1] - turns[0] == turns[2] - turns[1] == 4
    # Each kind in its own order: oldest plan first, then the plan's order (newest ranges first).
    assert [g.range_id for g in got if kind[g.range_id] == "live"] == [r.id for r in live[:9]]
    assert [g.range_id for g in got if kind[g.range_id] == "backfill"] == [r.id for r in backfill[:3]]
    # Live work used up: backfill for everyone; backfill used up on its turn: live.
    rest = [leases.lease(db_session, nodes[i % 3], max_leases=20, backfill_every=4) for i in range(8)]
    assert sorted(g.range_id for g in rest) == sorted([live[9].id] + [r.id for r in backfill[3:]])
    assert leases.lease(db_session, nodes[0], max_leases=20, backfill_every=4) is None


def test_backfill_every_lease_when_the_share_is_one_and_failed_and_disabled_ranges(db_session):
    group = make_group(db_session)
    off = make_group(db_session, "alt.binaries.off")
    backfill = make_kind_plan(db_session, group, [(BIG, BIG + 99)], "backfill")
    live = make_kind_plan(db_session, group, [(BIG + 200, BIG + 299), (BIG + 100, BIG + 199)], "live")
    make_kind_plan(db_session, off, [(BIG, BIG + 99)], "live")
    off.active = False
    node, _ = make_node(db_session)
    other, _ = make_node(db_session, "edge-2")
    assert leases.lease(db_session, node, max_leases=5, backfill_every=1).range_id == backfill[0].id
    # A live range that failed comes after the live ranges that did not.
    assert leases.lease(db_session, node, max_leases=5, backfill_every=1000).range_id == live[0].id
    leases.release(db_session, node, live[0].id, failure="Refused: 413")
    assert leases.lease(db_session, other, max_leases=5, backfill_every=1000).range_id == live[1].id
    assert leases.lease(db_session, other, max_leases=5, backfill_every=1000).range_id == live[0].id
    # The disabled group's range is never leased.
    assert leases.lease(db_session, other, max_leases=5, backfill_every=1000) is None
    off.active = True
    db_session.flush()
    assert leases.lease(db_session, other, max_leases=5, backfill_every=1000) is not None


# -- the retention edge ------------------------------------------------------------------------


def test_ranges_the_server_expired_are_marked_and_nothing_accepted_is_lost(inn, fresh_group, db_session):
    post(inn, fresh_group, 2_000)
    group = make_group(db_session, fresh_group)
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT) as proxy:
        with connect(inn.host, proxy.port, compress=False) as client:
            low, high = marks(client, fresh_group)
            plan_group(db_session, client, group, days=36500, range_size=500)
    a, b, c, d = ranges_of(db_session, group)  # by first_id: low..low+499, ..., ..+1999
    node, _ = make_node(db_session)
    leases.lease_range(db_session, node, a.id)  # a node reads it: left alone
    leases.lease_range(db_session, node, b.id)
    acceptance.accept_batch(
        db_session,
        node,
        b.id,
        batch_from=b.first_id,
        batch_to=b.first_id + 99,
        body=b"x",
        content_type="application/msgpack",
        content_encoding="gzip",
    )
    leases.release(db_session, node, b.id)  # 100 numbers accepted, then given back
    # The provider's low mark moves 1,200 up: what was below it expired.
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT + 1_200) as proxy:
        with connect(inn.host, proxy.port, compress=False) as client:
            result = plan_group(db_session, client, group, days=36500, range_size=500)
    assert result.expired == 400 + 200 and group.low_mark == low + 1_200
    for r in (a, b, c, d):
        db_session.refresh(r)
    assert (a.status, a.next_id, a.expired) == ("leased", a.first_id, 0)
    assert (b.status, b.next_id, b.expired, b.batches) == ("expired", b.last_id + 1, 400, 1)
    assert (c.status, c.next_id, c.expired) == ("planned", low + 1_200, 200)
    assert (d.status, d.next_id, d.expired) == ("planned", d.first_id, 0)
    # The next node resumes c above the low mark; an expired range is never leased nor finished by a node.
    other, _ = make_node(db_session, "edge-2")
    got = [leases.lease(db_session, other, max_leases=5) for _ in range(3)]
    assert sorted((g.range_id, g.next_id) for g in got if g) == sorted([(c.id, low + 1_200), (d.id, d.first_id)])
    with pytest.raises(leases.NotYourLease):
        leases.finish(db_session, other, b.id)
    with pytest.raises(leases.Conflict):
        leases.lease_range(db_session, other, b.id)
    # Marking again changes nothing; the status shows it.
    assert mark_expired(db_session, group, low + 1_200) == 0
    shown = {g["group"]: g for g in seed_status(db_session).as_json()["groups"]}[fresh_group]
    assert (shown["expired"], shown["expired_ranges"], shown["low_mark"]) == (600, 1, low + 1_200)


# -- each group on its own ---------------------------------------------------------------------


@pytest.fixture
def three_groups(inn, clean_db):
    names = [f"alt.binaries.test.iso{next(_posts)}x{i}" for i in range(3)]
    for name in (names[0], names[2]):
        inn.add_group(name)
        post(inn, name, 300)
    with session_scope() as s:
        for name in names:
            make_group(s, name)
    return names  # the middle one is not on the server


def nntp_settings(settings: Settings, port: int, host: str = "127.0.0.1") -> Settings:
    return dataclasses.replace(
        settings, nntp=NNTPSettings(host=host, port=port, tls=TLSMode.NONE, timeout=5), range_size=1_000, live_lag=0
    )


def failures(name: str) -> tuple[int, str | None, bool]:
    with session_scope() as s:
        g = get_group(s, name)
        return g.plan_failures, g.plan_error, g.plan_error_at is not None


def test_a_group_the_server_lacks_is_recorded_and_the_others_are_planned(inn, settings, three_groups):
    good, missing, other = three_groups
    dc = nntp_settings(settings, inn.reader_port)
    results = list(plan_groups(dc, three_groups, days=36500))
    assert [r.plan_id is not None for r in results] == [True, False, True]
    assert "411" in results[1].error and results[1].group == missing
    count, error, when = failures(missing)
    assert count == 1 and "411" in error and f"GROUP {missing}" in error and when
    assert failures(good)[0] == 0
    assert f"1 failed: {missing}" in summary(results)
    # Live planning too; the count grows while it fails, and a planning that works sets it back.
    live = list(plan_live(dc, three_groups))
    assert [r.error is None for r in live] == [True, False, True] and failures(missing)[0] == 2
    inn.add_group(missing)
    post(inn, missing, 100)
    assert all(r.error is None for r in plan_live(dc, [missing]))
    assert failures(missing)[0] == 0


def test_a_connection_lost_mid_way_is_opened_again_for_the_next_group(inn, settings, three_groups):
    good, _, other = three_groups
    # The first data answer (the first group's date look-up) is cut off after 3 lines.
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT, drop_after_lines=3, drops=1) as proxy:
        results = list(plan_groups(nntp_settings(settings, proxy.port), [good, other], days=36500))
    assert results[0].error is not None and results[0].plan_id is None
    assert results[1].error is None and results[1].first_id > 2**32
    assert failures(good)[0] == 1 and failures(other)[0] == 0
    with session_scope() as s:  # the failed group's planning was rolled back whole
        assert (
            s.scalar(select(text("count(*)")).select_from(SeedRange).where(SeedRange.group_id == get_group(s, good).id))
            == 0
        )


def test_the_server_down_fails_every_group_and_the_command_after_all(cli_runner, flask_app, three_groups):
    good, _, other = three_groups
    app_settings = flask_app.config["SETTINGS"]
    flask_app.config["SETTINGS"] = nntp_settings(app_settings, 1)
    try:
        result = cli_runner.invoke(args=["seed", "plan", good, other])
        assert result.exit_code == 1
        failed = [line for line in result.output.splitlines() if ": FAILED: " in line]
        assert [line.split(": FAILED: ")[0] for line in failed] == [good, other]
        assert all(": FAILED: NNTP server 127.0.0.1:1: " in line for line in failed)
        assert "2 groups: 0 planned, 0 with nothing to plan, 2 failed" in result.output
        assert "Traceback" not in result.output
    finally:
        flask_app.config["SETTINGS"] = app_settings
    assert failures(good)[0] == failures(other)[0] == 1


def test_plan_live_command_and_its_errors(cli_runner, flask_app, inn, three_groups):
    good, missing, other = three_groups
    app_settings = flask_app.config["SETTINGS"]
    flask_app.config["SETTINGS"] = nntp_settings(app_settings, inn.reader_port)
    try:
        backfill = cli_runner.invoke(args=["seed", "plan", good, "--days", "36500"])
        assert backfill.exit_code == 0 and "planned" in backfill.output
        post(inn, good, 200)
        live = cli_runner.invoke(args=["seed", "plan", "--live", good, "--json"])
        assert live.exit_code == 0, live.output
        (planned,) = json.loads(live.output)
        assert (planned["kind"], planned["ranges"], planned["error"]) == ("live", 1, None)
        assert planned["last_id"] - planned["first_id"] + 1 >= 190  # lost articles take no number
        # Every active group: the one the server lacks fails, after the others; exit 1 with a summary.
        every = cli_runner.invoke(args=["seed", "plan", "--live"])
        assert every.exit_code == 1
        assert f"{missing}: FAILED: NNTP server 127.0.0.1:{inn.reader_port} answered 411" in every.output
        assert f"{other}: nothing to plan (live planning starts at" in every.output
        assert "3 groups: 0 planned, 2 with nothing to plan, 1 failed" in every.output
        status = cli_runner.invoke(args=["seed", "status"])
        assert f"{missing}: planning failed once; last at" in status.output and "411" in status.output
        # Bad input: clear errors, nothing planned.
        both = cli_runner.invoke(args=["seed", "plan", "--live", "--days", "3"])
        assert both.exit_code == 2 and "--days is for backfill planning" in both.output
        with session_scope() as s:
            get_group(s, other).active = False
        disabled = cli_runner.invoke(args=["seed", "plan", "--live", other])
        assert disabled.exit_code == 1 and "group disabled" in disabled.output
        assert "Traceback" not in disabled.output
        unknown = cli_runner.invoke(args=["seed", "plan", "--live", "no such group!"])
        assert unknown.exit_code == 1 and "not a newsgroup name" in unknown.output
    finally:
        flask_app.config["SETTINGS"] = app_settings


def test_plan_results_read_as_json():
    result = PlanResult("alt.binaries.x", 7, BIG, BIG + 9, 1, "planned", kind="live")
    assert json.loads(json.dumps(result.as_dict()))["kind"] == "live"
    assert summary([result]) == "1 groups: 1 planned, 0 with nothing to plan"
