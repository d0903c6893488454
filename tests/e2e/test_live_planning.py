"""Live planning end to end on INN 2: real `celery beat` running plan.live with a short period,
a control worker that reaches the news server, `edge run` nodes, the ground-truth check. And a
group the server no longer carries (ctlinnd rmgroup): reported, the others planned, and once
disabled neither planned nor leased.

Each case uses groups of its own on the package's INN (the shared groups' ground truth must not
change under the other cases), read through the provider proxy with its holes and numbers past
2^32."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from app.services.planner import PlanningFailed
from edge.digest.nntp import connect
from simnews.generator import Config, generate
from simnews.inject import inject
from tests.e2e.conftest import hole
from tests.e2e.truth import GroupTruth, check_ground_truth
from tests.fixtures.app import WorkerProcess, task_result
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[2]
SHIFT = 2**32 + 4_321
LIVE_PERIOD = 3  # seconds: LIVE_PLAN_INTERVAL for the case's beat
INN_BIN = Path("/usr/lib/news/bin")
_names = itertools.count(1)


class PostedGroup:
    """A group of the case's own on the package's INN, and everything posted to it."""

    def __init__(self, news, name: str):
        self.news, self.name = news, name
        self.truth_of: dict[str, object] = {}
        self.lost: list = []
        news.inn.add_group(name)

    def post(self, count: int, start: dt.datetime, days: float) -> None:
        config = Config(
            seed=next(_names),
            groups=(self.name,),
            namespace=f"{self.name}.{len(self.truth_of)}",
            start=start,
            days=days,
            lost_rate=0.01,
        )
        articles = list(generate(count, config))
        posted = [a for a in articles if not a.lost]
        # One feed connection: INN numbers them in posting order, which is date order, as backfill's
        # bisection over dates expects (two connections race, and a short batch can be numbered first).
        inn = self.news.inn
        assert inject(inn.host, inn.feed_port, posted, conns=1).accepted == len(posted)
        self.truth_of.update({a.message_id: a.truth for a in posted})
        self.lost += [a.truth for a in articles if a.lost]

    def truth(self) -> GroupTruth:
        """The group as the provider serves it (numbers shifted by SHIFT, holes hidden)."""
        by_number = {}
        inn = self.news.inn
        with connect(inn.host, inn.reader_port, compress=False) as client:
            info = client.group(self.name)
            for block in client.over(info.first, info.last):
                for line in block.split(b"\r\n")[:-1]:
                    fields = line.split(b"\t")
                    by_number[int(fields[0])] = self.truth_of[fields[4].decode()]
        assert len(by_number) == len(self.truth_of)
        return GroupTruth(
            self.name,
            info.first + SHIFT,
            info.last + SHIFT,
            {n + SHIFT: t for n, t in by_number.items()},
            lost=self.lost,
            hidden=frozenset(n + SHIFT for n in by_number if hole(n)),
        )


def nntp_env(port: int) -> dict[str, str]:
    return {"NNTP_HOST": "127.0.0.1", "NNTP_PORT": str(port), "NNTP_SSL": "0", "NNTP_COMPRESS": "0"}


@contextmanager
def control_worker(dc, port: int, **env: str) -> Iterator[WorkerProcess]:
    """The control (and repair) worker replaced by one that reaches the news server through the
    proxy, as a data center's control worker does; the package's own comes back afterwards."""
    dc.workers.pop("e2e-control").stop()
    worker = WorkerProcess({**dc.env, **nntp_env(port), **env}, "repair,control", "e2e-live-control")
    try:
        worker.wait_ready(dc.celery)
        yield worker
    finally:
        worker.stop()
        dc.start_worker("e2e-control")


@contextmanager
def beat(dc, **env: str) -> Iterator[subprocess.Popen]:
    """`celery beat` on the data center's Redis, with the case's settings."""
    directory = tempfile.mkdtemp(prefix="beat.", dir=dc.directory)
    # plan.replan's cron must not fire during the case: an hour twelve hours away.
    far = str((dt.datetime.now().hour + 12) % 24)
    log = open(os.path.join(directory, "beat.log"), "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "app.worker",
            "beat",
            "-s",
            os.path.join(directory, "schedule"),
            "--loglevel",
            "INFO",
        ],
        cwd=REPO,
        env={**dc.env, "REPLAN_HOUR": far, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def flask_seed(dc, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "flask"), "seed", *args],
        cwd=REPO,
        env={**dc.env, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_nodes(dc, proxy, tokens: dict[str, str]) -> list:
    nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
    for node in nodes:
        assert node.wait(120) == 0, node.log()
    return nodes


def test_new_posts_are_planned_live_within_a_period_and_meet_the_backfill_at_the_seam(dc, news):
    group = PostedGroup(news, f"alt.binaries.e2e.live{next(_names)}")
    now = dt.datetime.now(dt.timezone.utc)
    group.post(24_000, start=now - dt.timedelta(days=10), days=9.5)
    dc.add_groups(group.name)
    tokens = {name: dc.create_node(name) for name in ("edge-live-a", "edge-live-b")}
    with news.provider(shift=SHIFT) as proxy:
        # 1. The newest five days planned (backfill) and run to the end.
        first = json.loads(dc.flask("plan", group.name, "--days", "5", "--json", **nntp_env(proxy.port)))[0]
        low, high = group.truth().low, group.truth().high
        assert first["last_id"] == high and low < first["first_id"] < high, first
        run_nodes(dc, proxy, tokens)
        dc.wait_finished()
        # 2. Beat plans live every LIVE_PERIOD seconds; new articles are posted.
        with control_worker(dc, proxy.port, LIVE_LAG="0"), beat(dc, LIVE_PLAN_INTERVAL=str(LIVE_PERIOD)):
            wait_until(
                lambda: dc.value("SELECT live_first FROM groups") is not None,
                LIVE_PERIOD + 30,
                "beat's first live planning of the group",
            )
            assert dc.value("SELECT live_first FROM groups") == high + 1
            group.post(15_000, start=now - dt.timedelta(hours=1), days=0.04)
            posted_at = time.monotonic()
            truth = group.truth()
            assert truth.high > high + 10_000

            def live_planned() -> bool:
                return dc.value("SELECT coalesce(max(last_id), 0) FROM seed_plans WHERE kind = 'live'") == truth.high

            wait_until(live_planned, LIVE_PERIOD + 15, "the new articles planned live")
            planned_after = time.monotonic() - posted_at
            # Meanwhile the operator plans the rest of the backfill, down to the group's start.
            rest = json.loads(dc.flask("plan", group.name, "--days", "36500", "--json", **nntp_env(proxy.port)))[0]
            assert (rest["kind"], rest["first_id"], rest["last_id"]) == ("backfill", low, first["first_id"] - 1)
            nodes = run_nodes(dc, proxy, tokens)
            dc.wait_finished()
    # Within one period of beat (and the worker's turn at it), the new posts were planned.
    assert planned_after <= LIVE_PERIOD + 5, planned_after
    report = check_ground_truth(dc.engine, [truth])[group.name]  # tiles low..high: none twice, none skipped
    plans = dc.rows("SELECT kind, first_id, last_id FROM seed_plans ORDER BY first_id")
    assert [p.kind for p in plans][:2] == ["backfill", "backfill"] and {p.kind for p in plans[2:]} == {"live"}
    assert plans[2].first_id == high + 1 and plans[-1].last_id == truth.high
    # The live ranges were fetched by the nodes of the second run, as were the backfill's.
    live_ranges = {r.id for r in dc.rows("SELECT id FROM seed_ranges WHERE kind = 'live'")}
    leased = {e["range"] for node in nodes for e in node.named("lease")}
    assert live_ranges and live_ranges <= leased and report.ranges == len(dc.rows("SELECT id FROM seed_ranges"))
    status = {g["group"]: g for g in dc.status()["groups"]}[group.name]
    assert status["live_next"] == truth.high + 1 and status["articles"] == len(truth.seen)


def test_a_new_group_smaller_than_the_lag_is_backfill_s_down_to_its_days_and_live_takes_only_new_posts(dc, news):
    """Issue 32, item 10, with beat's own plan.live and the default LIVE_LAG (20,000): a group of
    300 articles is added, beat's tick looks at it, the operator plans two days back, and the
    ticks go on. The first tick used to take the whole group for live planning from its low
    mark, so the backfill planned nothing and the next tick planned all 300 live, with no days
    limit. Now the 300 are the group's past: backfill plans two days of them at once, and live
    planning takes only what is posted afterwards."""
    group = PostedGroup(news, f"alt.binaries.e2e.small{next(_names)}")
    now = dt.datetime.now(dt.timezone.utc)
    group.post(300, start=now - dt.timedelta(days=10), days=10)
    dc.flask("groups", "add", group.name)
    with news.provider(shift=SHIFT) as proxy:
        truth = group.truth()
        low, high = truth.low, truth.high
        assert high - low < 20_000

        def marks_at():
            return dc.value("SELECT marks_at FROM groups")

        def next_tick() -> None:
            looked = marks_at()
            wait_until(lambda: marks_at() > looked, LIVE_PERIOD + 15, "beat's next live planning")

        with control_worker(dc, proxy.port), beat(dc, LIVE_PLAN_INTERVAL=str(LIVE_PERIOD)):
            wait_until(
                lambda: dc.value("SELECT live_first FROM groups") is not None,
                LIVE_PERIOD + 30,
                "beat's first live planning of the group",
            )
            assert dc.rows("SELECT live_first, live_next FROM groups")[0] == (high + 1, high + 1)
            planned = json.loads(dc.flask("plan", group.name, "--days", "2", "--json", **nntp_env(proxy.port)))[0]
            assert (planned["kind"], planned["last_id"]) == ("backfill", high), planned
            assert low + 200 < planned["first_id"] < high - 30, planned  # about 60 of the 300 are two days old
            next_tick()
            next_tick()
            assert dc.rows("SELECT kind, first_id, last_id FROM seed_plans") == [
                ("backfill", planned["first_id"], high)
            ]
            # What is posted now is live's, planned within a period or two (the lag's wait).
            group.post(100, start=now, days=0.001)
            newer = group.truth().high

            def live_planned() -> bool:
                return dc.value("SELECT coalesce(max(last_id), 0) FROM seed_plans WHERE kind = 'live'") == newer

            wait_until(live_planned, 2 * LIVE_PERIOD + 15, "the new articles planned live")
    plans = dc.rows("SELECT kind, first_id, last_id FROM seed_plans ORDER BY first_id")
    assert plans[0] == ("backfill", planned["first_id"], high) and {p.kind for p in plans[1:]} == {"live"}
    assert plans[1].first_id == high + 1
    assert all(a.last_id + 1 == b.first_id for a, b in zip(plans, plans[1:])), plans  # none twice, none skipped


def test_a_group_removed_from_the_server_is_reported_and_once_disabled_neither_planned_nor_leased(dc, news):
    groups = [PostedGroup(news, f"alt.binaries.e2e.gone{next(_names)}x{i}") for i in range(3)]
    now = dt.datetime.now(dt.timezone.utc)
    for g in groups:
        g.post(3_000, start=now - dt.timedelta(days=2), days=1)
    names = [g.name for g in groups]
    first, gone, last = names
    dc.add_groups(*names)
    token = dc.create_node("edge-gone")
    with news.provider(shift=SHIFT) as proxy:
        env = nntp_env(proxy.port)
        # Planned while the server had it; then the server drops it, and the others get new posts.
        dc.flask("plan", *names, "--days", "36500", **env)
        subprocess.run(
            [str(INN_BIN / "ctlinnd"), "-s", "-t", "20", "rmgroup", gone],
            check=True,
            env={**os.environ, "INNCONF": str(news.inn.root / "etc" / "inn.conf")},
        )
        for g in (groups[0], groups[2]):
            g.post(500, start=now - dt.timedelta(hours=1), days=0.01)
        # The command plans the others and exits 1 after trying all, with a summary.
        command = flask_seed(dc, "plan", "--live", LIVE_LAG="0", **env)
        assert command.returncode == 1, command.stdout + command.stderr
        assert f"{gone}: FAILED: NNTP server 127.0.0.1:{proxy.port} answered 411" in command.stdout
        assert f"{first}: planned live" in command.stdout and f"{last}: planned live" in command.stdout
        assert "3 groups: 2 planned, 0 with nothing to plan, 1 failed" in command.stderr
        assert "Traceback" not in command.stderr
        with control_worker(dc, proxy.port) as worker:
            # The scheduled replan: every group tried; the task fails with the summary.
            with pytest.raises(PlanningFailed, match=f"1 failed: {gone}"):
                task_result(dc.celery, "plan.replan", (36500,), timeout=60, worker=worker, queue="control")
            failures = dc.rows("SELECT name, plan_failures, plan_error, plan_error_at FROM groups ORDER BY name")
            assert [(r.name, r.plan_failures) for r in failures] == [(first, 0), (gone, 2), (last, 0)]
            assert "411" in failures[1].plan_error and failures[1].plan_error_at is not None
            assert f"{gone}: planning failed 2 times in a row" in dc.flask("status")
            # Disabled (set directly here; `flask seed groups disable` does the same): neither
            # the live nor the backfill planning tries it, and both succeed.
            with dc.session() as session:
                session.execute(text("UPDATE groups SET active = false WHERE name = :n"), {"n": gone})
            for task, args in (("plan.live", ()), ("plan.replan", (36500,))):
                results = task_result(dc.celery, task, args, timeout=60, worker=worker, queue="control")
                assert [r["group"] for r in results] == [first, last] and not any(r["error"] for r in results)
        assert dc.value("SELECT plan_failures FROM groups WHERE name = :n", n=gone) == 2
        # Its planned ranges wait; the node takes every other group's and goes idle.
        node = dc.edge("edge-gone", dc.node_env(token, proxy.port), "--exit-when-idle")
        assert node.wait(120) == 0, node.log()
    rows = dc.rows("SELECT DISTINCT g.name, r.status FROM seed_ranges r JOIN groups g ON g.id = r.group_id")
    assert set(map(tuple, rows)) == {(first, "done"), (gone, "planned"), (last, "done")}
    leased = {e["group"] for e in node.named("lease")}
    assert leased == {first, last}
    wait_until(dc.all_joined, 60, "every batch joined", interval=0.2)
    check_ground_truth(dc.engine, [groups[0].truth(), groups[2].truth()])
