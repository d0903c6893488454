"""The end-to-end harness: the whole system scaled out as in production, on one machine.

Set up once for the package (torn down after its last test):

- ``news``: a private INN 2 with alt.binaries.e-book.french and
  alt.binaries.cd.image.playstation2.dvdiso filled by simnews' generator (lost segments
  included), and the ground truth of every article at the number INN gave it. Nodes and the
  planner read it through simnews' provider proxy, which leaves out the same holes every time.
- ``datacenter``: its own PostgreSQL database and Redis database on the harness's servers;
  gunicorn with 3 workers over HTTPS; two Celery worker processes on ``ingest`` and one on
  ``repair,control``; small CHUNK_SIZE / BATCH_CHUNKS / RANGE_SIZE so that releases straddle
  batches and ranges, and a short LEASE_TIMEOUT and BATCH_REQUEUE_AFTER.

Per test, ``dc`` empties the catalog and the queues and makes sure every service runs again (a
case may have stopped one); edge nodes are ``edge run`` subprocesses, killed at the end.
Beat is played by the tests themselves: they send ``leases.expire`` and ``batches.requeue``
to the workers when a case needs them (beat's period is a minute).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from celery import Celery
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from edge.digest.nntp import connect
from simnews.generator import Config, generate
from simnews.proxy import ProviderProxy
from tests.e2e.truth import GroupTruth
from tests.fixtures.api_server import ApiServer, start_api, stop_api
from tests.fixtures.app import WorkerProcess, task_result
from tests.fixtures.edge_process import EdgeProcess, start_edge
from tests.fixtures.inn import InnServer, running_inn
from tests.fixtures.queries import query
from tests.fixtures.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
EDGE = REPO / ".venv" / "bin" / "edge"
FRENCH = "alt.binaries.e-book.french"
PS2 = "alt.binaries.cd.image.playstation2.dvdiso"
GROUPS = (FRENCH, PS2)
ARTICLES = 40_000  # generated per group, lost ones included
LOST_RATE = 0.01
# Small sizes: each group makes 4 ranges of 3 batches (the last one short), so releases
# straddle batches and ranges.
CHUNK_SIZE = 1_000
BATCH_CHUNKS = 4
RANGE_SIZE = 10_000
LEASE_TIMEOUT = 6  # seconds; nodes heartbeat every third of it
REQUEUE_AFTER = 2  # seconds before the requeue sweep resends a batch not stored or joined
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_DECODED_BYTES = 16 * 1024 * 1024
E2E_DATABASE = "seed_e2e"
E2E_REDIS_DB = 1


def hole(number: int) -> bool:
    """Article numbers the provider lost (every group the same): a scatter, and a run of 2,500
    numbers that empties at least one whole chunk."""
    return number % 397 == 11 or 20_001 <= number <= 22_500


# -- the news server and its ground truth ------------------------------------------------------


@dataclass
class News:
    inn: InnServer
    groups: dict[str, GroupTruth]

    def truths(self, *names: str) -> list[GroupTruth]:
        return [self.groups[name] for name in (names or GROUPS)]

    @contextmanager
    def provider(self, **options) -> Iterator[ProviderProxy]:
        """The provider the nodes and the planner read: INN through the proxy, with its holes."""
        with ProviderProxy(self.inn.host, self.inn.reader_port, hidden=hole, **options) as proxy:
            yield proxy


def fill_group(inn: InnServer, group: str) -> GroupTruth:
    articles = list(generate(ARTICLES, Config(seed=11, groups=(group,), namespace="e2e", lost_rate=LOST_RATE)))
    posted = [a for a in articles if not a.lost]
    accepted = inn.post(posted)
    assert accepted == len(posted), f"INN took {accepted} of {len(posted)} articles"
    truth_of = {a.message_id: a.truth for a in posted}
    by_number = {}
    with connect(inn.host, inn.reader_port, compress=False) as client:
        info = client.group(group)
        for block in client.over(info.first, info.last):
            for line in block.split(b"\r\n")[:-1]:
                fields = line.split(b"\t")
                by_number[int(fields[0])] = truth_of[fields[4].decode()]
    assert len(by_number) == len(posted) and (info.first, info.last) == (1, len(posted))
    return GroupTruth(
        group,
        info.first,
        info.last,
        by_number,
        lost=[a.truth for a in articles if a.lost],
        hidden=frozenset(n for n in by_number if hole(n)),
    )


@pytest.fixture(scope="package")
def news() -> Iterator[News]:
    with running_inn(GROUPS, cnfs_mb=512) as inn:
        yield News(inn, {group: fill_group(inn, group) for group in GROUPS})


@pytest.fixture(scope="package")
def real_posts(news: News) -> dict[str, dict]:
    """The real posts of tests/data/nzb/ on the server (tests/e2e/realposts.py), posted once."""
    from tests.e2e.realposts import post_real_posts

    return post_real_posts(news.inn)


# -- the data center ---------------------------------------------------------------------------


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"], cwd=REPO, env=env, check=True, capture_output=True
    )


def e2e_celery(redis_url: str) -> Celery:
    """A client of the data center's Celery (sends tasks, pings workers), on its Redis database."""
    app = Celery("e2e", broker=redis_url, backend=redis_url, set_as_current=False)
    app.conf.update(
        broker_connection_retry_on_startup=True,
        task_ignore_result=False,
        broker_transport_options={"visibility_timeout": 3600},
    )
    return app


def socket_ports(pid: int) -> set[int]:
    """The local TCP ports of a process's sockets."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class DataCenter:
    def __init__(self, env: dict[str, str], engine: Engine, postgres, redis_server, directory: str):
        self.env = env
        self.engine = engine
        self.postgres = postgres
        self.redis_server = redis_server
        self.redis_url = env["REDIS_URL"]
        self.directory = directory
        self.celery = e2e_celery(self.redis_url)
        self.api: ApiServer | None = None
        self.workers: dict[str, WorkerProcess] = {}
        self.queues = {"e2e-ingest-1": "ingest", "e2e-ingest-2": "ingest", "e2e-control": "repair,control"}
        self.edges: list[EdgeProcess] = []
        self._last_sweep = 0.0

    # -- services --------------------------------------------------------------------------

    def start(self) -> None:
        self.api = start_api(self.env, self.directory, workers=3)
        for name in self.queues:
            self.start_worker(name, wait=False)
        for worker in self.workers.values():
            worker.wait_ready(self.celery)

    def start_worker(self, name: str, wait: bool = True) -> WorkerProcess:
        """Starts the worker `name` (in place of the one before, stopped first if need be)."""
        if name in self.workers:
            self.workers.pop(name).stop()
        worker = WorkerProcess(self.env, self.queues[name], name)
        self.workers[name] = worker
        if wait:
            worker.wait_ready(self.celery)
        return worker

    def kill_worker(self, name: str) -> None:
        """kill -9 of the worker and its pool process: its task message stays unacknowledged."""
        worker = self.workers[name]
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()

    def pool_processes(self, name: str) -> list[int]:
        """The worker's pool (child) processes."""
        parent = self.workers[name].proc.pid
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    children.append(int(entry.name))
        return children

    def stop(self) -> None:
        # Every process asked at once, then each waited for: a warm shutdown takes about a second.
        for worker in self.workers.values():
            worker.terminate()
        if self.api is not None:
            stop_api(self.api)
        for worker in self.workers.values():
            worker.stop()

    def ensure_running(self) -> None:
        """Everything up again after a case that stopped or killed something."""
        self.postgres.run("start")
        self.redis_server.start()
        if self.api is None or self.api.proc.poll() is not None:
            self.api = start_api(self.env, self.directory, workers=3)
        for name, worker in list(self.workers.items()):
            if worker.proc.poll() is not None:
                self.start_worker(name)

    def reset(self) -> None:
        """An empty catalog and empty queues."""
        with self.engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '20s'"))
            tables = conn.execute(
                text(
                    "SELECT string_agg(format('%I', c.relname), ', ') FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
                    " AND NOT c.relispartition AND c.relname <> 'alembic_version'"
                )
            ).scalar_one()
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
        client = redis.Redis.from_url(self.redis_url)
        try:
            client.flushdb()
        finally:
            client.close()

    # -- the operator's side ---------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    def flask(self, *args: str, **env: str) -> str:
        """`flask seed ...` as the operator runs it."""
        result = subprocess.run(
            [str(REPO / ".venv" / "bin" / "flask"), "seed", *args],
            cwd=REPO,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, f"flask seed {' '.join(args)}: {result.stdout}{result.stderr}"
        return result.stdout

    def add_groups(self, *groups: str) -> None:
        from app.services.groups import add_groups

        with self.session() as session:
            add_groups(session, list(groups))

    def create_node(self, name: str) -> str:
        from app.services.nodes import create_node

        with self.session() as session:
            return create_node(session, name)[1]

    def plan(self, proxy, *groups: str, range_size: int = RANGE_SIZE) -> None:
        """Plans the groups as `flask seed plan` does, through the provider (anything with a port),
        each whole: 100 years back, as the real posts of tests/data/nzb/ carry their NZBs' dates,
        1970 among them, mixed with the rest in the order the feed delivered them."""
        from app.services.groups import get_group
        from app.services.planner import plan_group

        with connect("127.0.0.1", proxy.port, compress=False) as client:
            for name in groups:
                with self.session() as session:
                    result = plan_group(session, client, get_group(session, name), days=36500, range_size=range_size)
                    assert result.plan_id is not None, result

    def prepare(
        self, proxy: ProviderProxy, nodes: tuple[str, ...] = ("edge-a", "edge-b"), groups: tuple[str, ...] = GROUPS
    ) -> dict[str, str]:
        """Groups added and planned, nodes made: their tokens by name."""
        self.add_groups(*groups)
        self.plan(proxy, *groups)
        return {name: self.create_node(name) for name in nodes}

    # -- edge nodes ------------------------------------------------------------------------

    def node_env(self, token: str, nntp_port: int, **extra: str) -> dict[str, str]:
        return {
            "COORDINATOR_URL": self.api.url,
            "NODE_TOKEN": token,
            "COORDINATOR_CAFILE": self.api.cafile,
            "NNTP_HOST": "127.0.0.1",
            "NNTP_PORT": str(nntp_port),
            "NNTP_SSL": "0",
            "NNTP_CONNECTIONS": "3",
            "MAX_LEASES": "2",
            "POLL_INTERVAL": "1",
            "COORDINATOR_GIVE_UP": "300",
            **{k: str(v) for k, v in extra.items()},
        }

    def edge(self, name: str, env: dict[str, str], *args: str) -> EdgeProcess:
        process = start_edge(EDGE, env, *args, home=self.directory, name=name)
        self.edges.append(process)
        return process

    def kill_edges(self) -> None:
        for process in self.edges:
            process.kill()
        self.edges.clear()

    # -- beat, played by the tests ---------------------------------------------------------

    def send(self, task: str, queue: str = "control") -> bool:
        """Sends a task as beat does; False when the broker is away."""
        try:
            self.celery.send_task(task, queue=queue, retry=False)
            return True
        except Exception:  # noqa: BLE001 - Redis stopped by the case
            return False

    def call(self, task: str, timeout: float = 30):
        return task_result(self.celery, task, timeout=timeout, queue="control")

    def sweep(self, every: float = REQUEUE_AFTER) -> None:
        """The requeue sweep, at most every `every` seconds."""
        if time.monotonic() - self._last_sweep >= every:
            self._last_sweep = time.monotonic()
            self.send("batches.requeue")

    # -- holding ingest in the middle of a batch --------------------------------------------

    @contextmanager
    def stores_held(self) -> Iterator[None]:
        """Holds the last table a store writes (rule counts) locked: every ingest worker that
        takes a batch stops in the middle of storing it, until the block ends (or the database
        goes away)."""
        blocker = self.engine.connect()
        transaction = blocker.begin()
        blocker.exec_driver_sql("LOCK TABLE rule_counts IN EXCLUSIVE MODE")
        try:
            yield
        finally:
            try:
                transaction.commit()
                blocker.close()
            except Exception:  # noqa: BLE001 - the database was restarted under it
                blocker.invalidate()

    def stuck_workers(self) -> set[str]:
        """The ingest workers whose pool process waits on a lock in the database (matched by the
        client port of the waiting backends: tasks left over from an earlier case may wait too)."""
        waiting = {
            port
            for (port,) in self.rows(
                "SELECT client_port FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        }
        return {
            name
            for name, queues in self.queues.items()
            if queues == "ingest"
            and name in self.workers
            and any(socket_ports(pid) & waiting for pid in self.pool_processes(name))
        }

    def wait_stores_stuck(self, timeout: float = 30) -> None:
        """Until both ingest workers are stuck in the middle of a store (waiting on the held table,
        or on the other worker: batches that share a file store it once)."""
        wait_until(
            lambda: self.stuck_workers() == {"e2e-ingest-1", "e2e-ingest-2"},
            timeout,
            "both ingest workers in the middle of a store",
        )

    # -- looking at the catalog ------------------------------------------------------------

    def rows(self, sql: str, **params) -> list:
        return query(self.engine, sql, **params)

    def value(self, sql: str, **params):
        return self.rows(sql, **params)[0][0]

    def ranges_done(self) -> bool:
        return self.value("SELECT count(*) FILTER (WHERE status <> 'done') = 0 AND count(*) > 0 FROM seed_ranges")

    def all_joined(self) -> bool:
        return self.value("SELECT count(*) FILTER (WHERE state <> 'joined') = 0 FROM seed_batches")

    def wait_finished(self, timeout: float = 60, sweep: bool = False) -> None:
        """Every range done and every batch joined (with the requeue sweep when asked)."""
        wait_until(self.ranges_done, timeout, "every range done", interval=0.2)
        wait_until(self.all_joined, timeout, "every batch joined", interval=0.2, tick=self.sweep if sweep else None)

    def status(self) -> dict:
        return json.loads(self.flask("status", "--json"))


@pytest.fixture(scope="package")
def datacenter(postgres, redis_server, service_env) -> Iterator[DataCenter]:
    directory = tempfile.mkdtemp(prefix="e2e.")
    database_url = postgres.create_database(E2E_DATABASE)
    redis_url = redis_server.url.rsplit("/", 1)[0] + f"/{E2E_REDIS_DB}"
    env = {
        **service_env,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "CHUNK_SIZE": str(CHUNK_SIZE),
        "BATCH_CHUNKS": str(BATCH_CHUNKS),
        "RANGE_SIZE": str(RANGE_SIZE),
        "LEASE_TIMEOUT": str(LEASE_TIMEOUT),
        "BATCH_REQUEUE_AFTER": str(REQUEUE_AFTER),
        "MAX_BODY_BYTES": str(MAX_BODY_BYTES),
        "MAX_DECODED_BYTES": str(MAX_DECODED_BYTES),
        "MAX_LEASES_PER_NODE": "4",
        "FLASK_APP": "wsgi",
    }
    migrate(env)
    engine = create_engine(database_url, pool_pre_ping=True)
    center = DataCenter(env, engine, postgres, redis_server, directory)
    try:
        center.start()
        yield center
    finally:
        center.stop()
        engine.dispose()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def dc(datacenter) -> Iterator[DataCenter]:
    """The data center with an empty catalog; edge nodes started by the test are killed after it."""
    datacenter.ensure_running()
    datacenter.reset()
    try:
        yield datacenter
    finally:
        datacenter.kill_edges()
