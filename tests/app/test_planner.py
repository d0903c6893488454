"""Planning against INN 2: the article N days back, found by bisecting dates, with holes,
expired first articles and numbers past 2^32 (through the provider proxy)."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.models import SeedPlan, SeedRange
from app.services.groups import get_group
from app.services.planner import find_first_after, plan_group, split
from edge.digest.nntp import connect
from edge.digest.overview import parse_date
from edge.digest.settings import NNTPSettings, TLSMode
from simnews.generator import Config, generate
from simnews.inject import inject
from simnews.proxy import ProviderProxy
from tests.app.factories import make_group

CHUNK = 20_000
SHIFT = 2**32 + 12_345
DAY = 86_400


@pytest.fixture(scope="module")
def dated_group(inn, request):
    """A fresh group of 30,000 articles whose dates run evenly over 120 days."""
    name = f"alt.binaries.plan.{request.node.name.replace('_', '')[-12:]}"
    inn.add_group(name)
    config = Config(groups=(name,), namespace=name, days=120.0)
    # One feed connection keeps INN's numbering in posting (and so date) order, as on a real
    # server where articles arrive roughly as they are posted.
    assert inject(inn.host, inn.feed_port, generate(30_000, config), conns=1).accepted == 30_000
    with connect(inn.host, inn.reader_port) as client:
        info = client.group(name)
        layout = client.overview_layout()
        dates = []
        for block in client.over(info.first, info.last):
            for line in block.split(b"\r\n"):
                if line:
                    fields = line.split(b"\t")
                    dates.append((int(fields[0]), parse_date(fields[layout.date])))
    start = int(config.start.timestamp())
    return name, dates, start + 120 * DAY


def first_at_or_after(dates, cutoff, hidden=lambda n: False):
    return min(n for n, d in dates if d >= cutoff and not hidden(n))


def test_bisection_finds_the_article_n_days_back_on_inn(inn, dated_group):
    name, dates, end = dated_group
    cutoff = end - 30 * DAY
    with connect(inn.host, inn.reader_port) as client:
        info = client.group(name)
        found = find_first_after(client, info.first, info.last, cutoff)
    expected = first_at_or_after(dates, cutoff)
    assert abs(found - expected) < CHUNK
    # Dates carry up to a minute of jitter around a 6-minute spacing: the cut is nearly exact.
    assert abs(found - expected) <= 2


def hidden_numbers(n: int) -> bool:
    """A provider that lost the group's first 4,000 articles, every 7th, and a block of 3,000."""
    return n <= 4_000 or n % 7 == 0 or 20_000 <= n < 23_000


def test_planning_through_a_provider_with_holes_and_boneless_numbers(inn, dated_group, db_session):
    name, dates, end = dated_group
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT, hidden=hidden_numbers) as proxy:
        group = make_group(db_session, name)
        with connect(inn.host, proxy.port, compress=False) as client:
            result = plan_group(db_session, client, group, days=40, range_size=5_000, now=end)
            again = plan_group(db_session, client, group, days=40, range_size=5_000, now=end)
    expected = first_at_or_after(dates, end - 40 * DAY, hidden_numbers) + SHIFT
    assert result.first_id > 2**32 and result.last_id == dates[-1][0] + SHIFT
    assert abs(result.first_id - expected) < CHUNK
    # Exact up to the provider's holes: nothing it has lies between the plan's start and the
    # article N days back, and the article it has just below the start is older.
    assert result.first_id <= expected
    assert not [n for n, _ in dates if result.first_id <= n + SHIFT < expected and not hidden_numbers(n)]
    below = max(n for n, _ in dates if n + SHIFT < result.first_id and not hidden_numbers(n))
    assert dict(dates)[below] < end - 40 * DAY
    ranges = db_session.scalars(select(SeedRange).where(SeedRange.group_id == group.id).order_by(SeedRange.id)).all()
    assert [(r.first_id, r.last_id) for r in ranges] == split(result.first_id, result.last_id, 5_000)
    assert ranges[0].last_id == result.last_id  # newest first
    assert all(r.next_id == r.first_id and r.status == "planned" for r in ranges)
    # Planning again adds nothing: everything down to N days back is covered.
    assert again.plan_id is None and len(ranges) == result.ranges
    assert group.backfill_id == result.first_id
    # Further back later: a new plan takes over only what lies below the first.
    with ProviderProxy(inn.host, inn.reader_port, shift=SHIFT, hidden=hidden_numbers) as proxy:
        with connect(inn.host, proxy.port, compress=False) as client:
            deeper = plan_group(db_session, client, group, days=80, range_size=5_000, now=end)
    assert deeper.last_id == result.first_id - 1 and deeper.first_id < result.first_id
    assert group.backfill_id == deeper.first_id


# Articles whose posters dated them long ago, as reposts and broken clocks put among the week's:
# scattered (four of every ten, through the whole group), or a repost of 3,000 articles in a row
# that all carry its first posting's date, just after the articles 30 days back.
MISDATED = b"Date: Mon, 01 Jan 1990 00:00:00 +0000"
PATTERNS = {
    "scattered": lambda number: number % 10 < 4,
    "a repost": lambda number: 22_510 <= number < 25_510,
}


@pytest.fixture(scope="module", params=sorted(PATTERNS))
def misdated_group(inn, request):
    """30,000 articles over 120 days as dated_group's, some dated 1990 (PATTERNS)."""
    misdated = PATTERNS[request.param]
    name = f"alt.binaries.plan.misdated.{request.param.replace(' ', '')}"
    inn.add_group(name)
    config = Config(groups=(name,), namespace=name, days=120.0)
    articles = [
        dataclasses.replace(a, raw=re.sub(rb"(?m)^Date: [^\r\n]*", MISDATED, a.raw, count=1)) if misdated(i) else a
        for i, a in enumerate(generate(30_000, config), start=1)
    ]
    assert inject(inn.host, inn.feed_port, articles, conns=1).accepted == 30_000
    with connect(inn.host, inn.reader_port) as client:
        info = client.group(name)
        layout = client.overview_layout()
        dates = [
            (int(fields[0]), parse_date(fields[layout.date]))
            for block in client.over(info.first, info.last)
            for fields in (line.split(b"\t") for line in block.split(b"\r\n") if line)
        ]
    # As many misdated, where the pattern puts them (INN numbers them in posting order).
    assert [n for n, date in dates if date < 10**9] == [n for n in range(1, 30_001) if misdated(n)]
    return name, dates, int(config.start.timestamp()) + 120 * DAY, misdated


def test_articles_dated_long_ago_among_new_ones_do_not_make_the_plan_skip_new_ones(inn, misdated_group):
    """Bisecting by one article's date took a misdated article for the group's past and skipped
    every article below the next probe: scattered, it started the plan at 26,284 where the first
    article newer than the cutoff is 22,504, about 2,270 newer articles never read. A probe reads
    a window and moves up only when every article of it is older than the cutoff, and in order
    (newer than what was seen below it): a repost's old dates, thousands in a row, tell nothing."""
    name, dates, end, misdated = misdated_group
    cutoff = end - 30 * DAY
    with connect(inn.host, inn.reader_port) as client:
        info = client.group(name)
        found = find_first_after(client, info.first, info.last, cutoff)
    newer = [n for n, date in dates if date >= cutoff]
    assert len(newer) > 4_000
    # Not one article newer than the cutoff below the plan's start; below the first of them, the
    # plan takes only misdated articles (any of which may have reached the server after the
    # cutoff), never one dated in order before it.
    assert found <= min(newer)
    assert all(misdated(n) for n in range(found, min(newer)))


def test_planning_starts_below_live_indexing_and_the_backfill(inn, dated_group, db_session):
    name, dates, end = dated_group
    group = make_group(db_session, name)
    group.live_first = dates[-1][0] - 999
    group.backfill_id = dates[-1][0] - 4_999
    with connect(inn.host, inn.reader_port) as client:
        result = plan_group(db_session, client, group, days=120, range_size=10_000, now=end)
    assert result.last_id == dates[-1][0] - 5_000
    assert result.first_id <= dates[0][0] + 10  # 120 days back is the group's start
    assert result.first_id >= dates[0][0]  # never below the low mark


def test_plan_command_and_its_errors(cli_runner, flask_app, inn, dated_group):
    name, _, _ = dated_group
    settings = flask_app.config["SETTINGS"]
    flask_app.config["SETTINGS"] = dataclasses.replace(
        settings, nntp=NNTPSettings(host=inn.host, port=inn.reader_port, tls=TLSMode.NONE), range_size=50_000
    )
    try:
        assert cli_runner.invoke(args=["seed", "groups", "add", name]).exit_code == 0
        result = cli_runner.invoke(args=["seed", "plan", name, "--days", "36500", "--json"])
        assert result.exit_code == 0, result.output
        (planned,) = json.loads(result.output)
        assert planned["group"] == name and planned["ranges"] == 1
        twice = cli_runner.invoke(args=["seed", "plan", name, "--days", "36500"])
        assert twice.exit_code == 0 and "nothing to plan" in twice.output
        unknown = cli_runner.invoke(args=["seed", "plan", "alt.binaries.nope"])
        assert unknown.exit_code == 1 and "no such group" in unknown.output
        assert cli_runner.invoke(args=["seed", "plan", name, "--days", "0"]).exit_code == 2
        flask_app.config["SETTINGS"] = dataclasses.replace(
            settings, nntp=NNTPSettings(host="127.0.0.1", port=1, tls=TLSMode.NONE)
        )
        down = cli_runner.invoke(args=["seed", "plan", name])
        assert down.exit_code == 1 and "NNTP server 127.0.0.1:1" in down.output
    finally:
        flask_app.config["SETTINGS"] = settings
    with session_scope() as s:
        plans = s.scalars(select(SeedPlan).where(SeedPlan.group_id == get_group(s, name).id)).all()
        assert len(plans) == 1
