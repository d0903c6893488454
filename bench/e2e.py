"""End to end: articles per second from INN 2 through the edge node, the API and the workers into
PostgreSQL, beside the raw OVER read rate from the same server with the same connections.

    .venv/bin/python bench/e2e.py [--articles 2000000] [--connections 4] [--workdir /tmp/e2e-bench]
                                  [--chunk-size 20000] [--batch-chunks 10] [--range-size 100000]
                                  [--no-durability] [--no-inspect] [--statements]

Everything runs on this machine, as ops/run starts it: a private PostgreSQL (durable as a production
catalog runs: fsync and synchronous_commit on; `--no-durability` turns both off to show their cost), Redis and
INN 2 (ops/pg, ops/redis, ops/inn), gunicorn over HTTPS (2 workers), the Celery workers as
ops/run starts them (WORKERS), and one `edge run` with --connections NNTP connections
and its inspector on, as a node with a Usenet server runs: it inspects the posts the join queues
while the job goes on (INN keeps no bodies here, so every BODY it sends is answered 430 and
counted missing), and is stopped (SIGTERM) once the job is done, whatever it has left to inspect;
`--no-inspect` runs it with INSPECT=0, to show what inspecting costs ingest.
The two seed test groups (alt.binaries.e-book.french, alt.binaries.cd.image.playstation2.dvdiso)
get half the generated articles each. The coordinator hands out ranges of --range-size articles
(its default is 1,000,000: a group of a million articles would be one range, fetched, posted and
stored one after the other), in chunks of --chunk-size, a batch every --batch-chunks chunks (its
defaults); the raw read reads the same chunks.

The default job is 2,000,000 articles, 20 ranges: a node's work is hours of ranges, and its
start and the pipeline's fill (the first batch is digested, posted and stored before the data
center has anything to do: 1.0 - 1.9 s) and drain are paid once. A run of 600,000 articles lasts
2.2 - 3.7 s, and the fill is a third to a half of it; `--articles 600000` measures that short job
(docs/benchmarks.md has both). Measured:

- raw OVER: the same chunks read by --connections of our NNTP client at once, lines only counted
  (no compression, as the edge node is set up here), and the CPU our client spends a line; read
  once before the end-to-end run and once after it, the rate being both reads' lines over both
  reads' seconds (the machine's speed drifts from minute to minute);
- end to end: from `edge run` starting to every range done and every batch joined (plan made
  before; looked at every 20 ms, the edge stopped after that); and, to
  show what filling and draining the pipeline costs, the rate from the first batch stored to the
  last (the articles of the batches stored after the first), and when the first was stored;
- when each batch was accepted (the API's answer to the edge) and stored (the worker's
  commit), after the edge started;
- CPU seconds per article of each process tree (edge, API, workers, PostgreSQL, INN), from
  /proc, over the end-to-end run, and how busy that kept the machine (their sum at the run's
  rate over the cores it has);
- DB bytes (the catalog tables and their indexes) per overview byte read and per article, those
  of all tables (the read side's posts too), and each table's heap and indexes an article;
- autovacuum's passes over the catalog, and the CPU each kind of pass took by table, from
  PostgreSQL's log (its VACUUMs and ANALYZEs are PostgreSQL's CPU too);
- the inspections as the job ended: done (and the articles they found missing), queued, leased.

The last line printed is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edge.digest.nntp import connect  # noqa: E402
from edge.digest.runner import chunk_spans  # noqa: E402
from simnews.generator import Config, generate  # noqa: E402
from simnews.inject import inject  # noqa: E402
from simnews.ports import free_ports  # noqa: E402

GROUPS = ("alt.binaries.e-book.french", "alt.binaries.cd.image.playstation2.dvdiso")
CATALOG = ("files", "fragment_packs", "releases", "release_chunks", "rule_counts", "message_hosts")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
POLL = 0.02  # seconds between two looks at whether the job is done
# The Celery workers as ops/run and compose.yaml start them (tests/app/test_bench_workers.py
# checks that the three agree): (node name, queues, processes, niceness). Two store and join
# batches at once, each group's joins one at a time (app.services.ingest.posts), at a lower CPU
# priority than the API's (docs/benchmarks.md, "The store yields to the API").
WORKERS = (("ingest", "ingest,repair", 2, 10), ("control", "control", 1, 0))
# The goals the run is judged by: the data center's budget of issue 35 (a share of raw, its CPU and
# the catalog's bytes an article), and the catalog's bytes an overview byte of an earlier one.
ACCEPTANCE = {
    "share_of_raw": 0.40,
    "dc_us_per_article": 2.0,
    "db_bytes_per_article": 95.0,
    "db_bytes_per_overview_byte": 0.50,
}


if TYPE_CHECKING:
    import psycopg


def first_row(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The row a statement gives (psycopg's fetchone, which says None where there is none)."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the statement gave no row")
    return tuple(row)


def say(message: str) -> None:
    print(f"e2e: {message}", file=sys.stderr, flush=True)


def run(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], check=True, env=env, cwd=REPO, **kwargs)


# -- CPU of process trees ------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def tree_cpu(root: int) -> float:
    """User + system CPU seconds of a process and its live descendants (and what their
    finished children used: cutime/cstime)."""
    tree = _children()
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / CLOCK_TICKS
        stack.extend(tree.get(pid, []))
    return total


# -- the services --------------------------------------------------------------------------------


class Services:
    """PostgreSQL, Redis, INN 2, the API and the workers, as ops/run starts them, on free ports.
    INN keeps overview only (`inn_storage` trash) unless told otherwise: `cnfs` keeps every
    article in a buffer of `inn_cnfs_mb` (bench/inspections.py, which reads bodies)."""

    def __init__(
        self,
        workdir: Path,
        connections: int,
        chunk_size: int,
        batch_chunks: int,
        range_size: int,
        durable: bool = True,
        groups: tuple[str, ...] = GROUPS,
        inn_storage: str = "trash",
        inn_cnfs_mb: int | None = None,
        statements: bool = False,
    ):
        self.workdir = workdir
        self.durable = durable
        self.statements = statements
        self.connections = connections
        self.groups = groups
        self.inn_storage, self.inn_cnfs_mb = inn_storage, inn_cnfs_mb
        pg_port, redis_port, reader, feed, tls, api = free_ports(6)
        self.ports = {"pg": pg_port, "redis": redis_port, "reader": reader, "feed": feed, "tls": tls, "api": api}
        self.pg_dir, self.redis_dir, self.inn_dir = (
            workdir / "pg",
            workdir / "redis",
            Path(f"/tmp/e2eb-inn.{os.getpid()}"),
        )
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgresql+psycopg://seed@127.0.0.1:{pg_port}/seed",
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "NNTP_HOST": "127.0.0.1",
            "NNTP_PORT": str(reader),
            "NNTP_SSL": "0",
            "API_BIND": f"127.0.0.1:{api}",
            "API_WORKERS": "2",
            "API_CERTFILE": str(workdir / "cert.pem"),
            "API_KEYFILE": str(workdir / "key.pem"),
            # Several ranges per group, so fetching, posting and storing overlap as in a long run.
            "RANGE_SIZE": str(range_size),
            "CHUNK_SIZE": str(chunk_size),
            "BATCH_CHUNKS": str(batch_chunks),
            # Posts leased for inspection as soon as written: what inspecting costs is measured
            # within the run, not after INSPECT_SETTLE.
            "INSPECT_SETTLE": "0",
        }

    def start(self, articles: int) -> None:
        """Starts everything; INN gets `articles` generated articles, half in each group (none: 0)."""
        env = {
            **os.environ,
            "PG_PORT": str(self.ports["pg"]),
            "PG_FAST": "0" if self.durable else "1",
            "REDIS_PORT": str(self.ports["redis"]),
        }
        run(REPO / "ops/pg", "init", self.pg_dir, env=env, stdout=subprocess.DEVNULL)
        with open(self.pg_dir / "postgresql.conf", "a") as conf:
            # Each of autovacuum's passes logged with the CPU it took (autovacuum_cpu).
            conf.write("log_autovacuum_min_duration = 0\n")
            if self.statements:  # PostgreSQL's own per-statement figures (Debian's server package has it)
                conf.write("shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n")
        run(REPO / "ops/pg", "start", self.pg_dir, env=env)
        run(
            "psql",
            "-q",
            "-h",
            "127.0.0.1",
            "-p",
            self.ports["pg"],
            "-U",
            "seed",
            "-d",
            "postgres",
            "-c",
            "CREATE DATABASE seed",
        )
        if self.statements:
            run(
                "psql",
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                self.ports["pg"],
                "-U",
                "seed",
                "-d",
                "seed",
                "-c",
                "CREATE EXTENSION pg_stat_statements",
            )
        run(REPO / "ops/redis", "start", self.redis_dir, env=env)
        inn_env = {
            **os.environ,
            "INN_READER_PORT": str(self.ports["reader"]),
            "INN_FEED_PORT": str(self.ports["feed"]),
            "INN_TLS_PORT": str(self.ports["tls"]),
            "INN_STORAGE": self.inn_storage,
            "INN_GROUPS": " ".join(self.groups),
            **({"INN_CNFS_MB": str(self.inn_cnfs_mb)} if self.inn_cnfs_mb else {}),
        }
        run(REPO / "ops/inn", "init", self.inn_dir, env=inn_env, stdout=subprocess.DEVNULL)
        run(REPO / "ops/inn", "start", self.inn_dir, env=inn_env, stdout=subprocess.DEVNULL)
        for group in self.groups if articles else ():
            posted = inject(
                "127.0.0.1", self.ports["feed"], generate(articles // 2, Config(groups=(group,), namespace=group))
            )
            say(f"posted {posted.accepted} articles to {group} in {posted.seconds:.1f} s")
        run(REPO / "ops/certificate", self.workdir / "cert.pem", self.workdir / "key.pem", "2")
        run(REPO / ".venv/bin/alembic", "upgrade", "head", env=self.env, stderr=subprocess.DEVNULL)
        venv = REPO / ".venv/bin"
        self._spawn("api", [venv / "gunicorn", "-c", "ops/gunicorn.conf.py", "wsgi:app"])
        for node, queues, processes, niceness in WORKERS:
            self._spawn(
                node,
                (["nice", "-n", str(niceness)] if niceness else [])
                + [
                    venv / "celery",
                    "-A",
                    "app.worker",
                    "worker",
                    "-Q",
                    queues,
                    "-c",
                    str(processes),
                    "-n",
                    f"{node}@%h",
                    "--without-gossip",
                    "--without-mingle",
                ],
            )
        self._wait_api()

    def _spawn(self, name: str, argv: list) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(
            [str(a) for a in argv], cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _wait_api(self) -> None:
        import ssl
        import urllib.request

        context = ssl.create_default_context(cafile=str(self.workdir / "cert.pem"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{self.ports['api']}/healthz", context=context, timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the API did not come up")

    def top_statements(self, count: int = 15) -> list[dict]:
        """The statements PostgreSQL spent most time executing since the last reset
        (pg_stat_statements, --statements): each with its share, milliseconds, calls and rows."""
        query = (
            "SELECT round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1),"
            " round(total_exec_time::numeric, 1), calls, rows,"
            " regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'seed')"
            f" ORDER BY total_exec_time DESC LIMIT {int(count)}"
        )
        out = run(
            "psql",
            "-qtA",
            "-F",
            "\x1f",
            "-h",
            "127.0.0.1",
            "-p",
            self.ports["pg"],
            "-U",
            "seed",
            "-d",
            "seed",
            "-c",
            query,
            capture_output=True,
            text=True,
        ).stdout
        return [
            {"share_percent": float(share), "ms": float(ms), "calls": int(calls), "rows": int(rows), "query": text}
            for share, ms, calls, rows, text in (line.split("\x1f") for line in out.splitlines() if line)
        ]

    def sql_value(self, query: str) -> str:
        """The one value a query of the seed database gives."""
        return run(
            "psql",
            "-qtA",
            "-h",
            "127.0.0.1",
            "-p",
            self.ports["pg"],
            "-U",
            "seed",
            "-d",
            "seed",
            "-c",
            query,
            capture_output=True,
            text=True,
        ).stdout.strip()

    def flask(self, *args: str) -> str:
        return run(REPO / ".venv/bin/flask", "seed", *args, env=self.env, capture_output=True, text=True).stdout

    def pids(self) -> dict[str, int | list[int]]:
        postmaster = int((self.pg_dir / "postmaster.pid").read_text().split()[0])
        innd = int((self.inn_dir / "run/innd.pid").read_text().split()[0])
        nnrpd = int((self.inn_dir / f"run/nnrpd-{self.ports['reader']}.pid").read_text().split()[0])
        return {
            "api": self.procs["api"].pid,
            "workers": [self.procs[node].pid for node, *_ in WORKERS],
            "postgresql": postmaster,
            "inn": [innd, nnrpd],
        }

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        env = {**os.environ, "PG_PORT": str(self.ports["pg"]), "REDIS_PORT": str(self.ports["redis"])}
        subprocess.run([REPO / "ops/inn", "stop", self.inn_dir], stdout=subprocess.DEVNULL)
        subprocess.run([REPO / "ops/redis", "stop", self.redis_dir], env=env)
        subprocess.run([REPO / "ops/pg", "stop", self.pg_dir], env=env)
        shutil.rmtree(self.inn_dir, ignore_errors=True)


def cpu_of(pids) -> float:
    return sum(tree_cpu(pid) for pid in (pids if isinstance(pids, list) else [pids]))


# -- the two measurements ------------------------------------------------------------------------


def raw_over(port: int, spans: list[tuple[str, int, int]], connections: int) -> tuple[int, int, float]:
    """(lines, bytes, seconds): the spans read by `connections` clients at once, nothing parsed."""
    pending = list(spans)
    lock = threading.Lock()
    totals = [0, 0]

    def reader():
        with connect("127.0.0.1", port, compress=False) as client:
            current = None
            while True:
                with lock:
                    if not pending:
                        return
                    group, first, last = pending.pop(0)
                if group != current:
                    client.group(group)
                    current = group
                lines = size = 0
                for block in client.over(first, last):
                    lines += block.count(b"\r\n")
                    size += len(block)
                with lock:
                    totals[0] += lines
                    totals[1] += size

    threads = [threading.Thread(target=reader) for _ in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return totals[0], totals[1], time.perf_counter() - started


class RawRead(NamedTuple):
    lines: int
    bytes: int
    seconds: float
    reader_us: float  # our NNTP client's CPU a line
    inn_us: float  # INN's CPU a line


def measured_raw(services: Services, spans: list[tuple[str, int, int]], connections: int) -> RawRead:
    """One raw read of the spans, with the CPU a line of our client (this process only reads
    then) and of INN."""
    inn_before, cpu_before = cpu_of(services.pids()["inn"]), os.times()
    lines, size, seconds = raw_over(services.ports["reader"], spans, connections)
    cpu_after = os.times()
    read = RawRead(
        lines,
        size,
        seconds,
        1e6 * (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / lines,
        1e6 * (cpu_of(services.pids()["inn"]) - inn_before) / lines,
    )
    say(
        f"raw OVER: {lines} lines, {size} bytes in {seconds:.2f} s = {lines / seconds:,.0f} lines/s;"
        f" our reader's CPU {read.reader_us:.2f} µs a line, INN's {read.inn_us:.2f}"
    )
    return read


# A pass of autovacuum's in PostgreSQL's log (log_autovacuum_min_duration = 0), and the line of
# its resource usage that follows a few lines on.
_AUTOVACUUM_PASS = re.compile(r'automatic (vacuum|analyze) of table "(?:[^"]*\.)?([^".]+)"')
_AUTOVACUUM_CPU = re.compile(r"system usage: CPU: user: ([0-9.]+) s, system: ([0-9.]+) s")


def autovacuum_cpu(log: str) -> dict[str, float]:
    """The CPU seconds of autovacuum's passes in PostgreSQL's log, by kind and table ("analyze
    posts"; a partition under its table's name, "analyze fragment_packs"), the largest first.
    ANALYZE and VACUUM run in autovacuum's own processes: their CPU is PostgreSQL's, and what a
    run's catalog costs it besides the statements."""
    found: dict[str, float] = {}
    current = None
    for line in log.splitlines():
        if passed := _AUTOVACUUM_PASS.search(line):
            current = f"{passed.group(1)} {re.sub(r'_g[0-9]+$', '', passed.group(2))}"
        elif current is not None and (usage := _AUTOVACUUM_CPU.search(line)):
            found[current] = found.get(current, 0.0) + float(usage.group(1)) + float(usage.group(2))
            current = None
    return {name: round(seconds, 2) for name, seconds in sorted(found.items(), key=lambda item: -item[1])}


def wait_done(services: Services, edge: subprocess.Popen, deadline_seconds: float = 900) -> float:
    """Until every planned range is done and every batch joined, whether or not the edge has
    exited yet (its shutdown is not the job's); returns perf_counter() then. One light query
    every POLL seconds (a `flask` process would cost the machine more CPU than the workers it
    waits for); an edge that exits with the job not done ends the wait with an error."""
    import psycopg

    deadline = time.monotonic() + deadline_seconds
    with psycopg.connect(f"host=127.0.0.1 port={services.ports['pg']} user=seed dbname=seed", autocommit=True) as conn:
        while time.monotonic() < deadline:
            exited = edge.returncode  # set once it has exited (the caller reaps it)
            open_ranges, waiting, failed = first_row(
                conn.execute(
                    "SELECT (SELECT count(*) FROM seed_ranges WHERE done_at IS NULL),"
                    " count(*) FILTER (WHERE state IN ('accepted', 'stored')),"
                    " count(*) FILTER (WHERE state = 'failed') FROM seed_batches"
                )
            )
            if failed:
                raise RuntimeError(f"{failed} batches failed: see {services.workdir}/ingest.log")
            if not open_ranges and not waiting:
                return time.perf_counter()
            if exited is not None and (exited != 0 or open_ranges):
                raise RuntimeError(
                    f"edge run exited {exited} with {open_ranges} ranges not done: see {services.workdir / 'edge.log'}"
                )
            time.sleep(POLL)
    raise RuntimeError("the run did not finish in time")


def stop_edge(edge: subprocess.Popen) -> None:
    """SIGTERM to `edge run` unless it has exited (os.kill, not send_signal: Popen would reap it
    under the sampler's wait4)."""
    if edge.returncode is None:
        try:
            os.kill(edge.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=2_000_000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--workdir", default="/tmp/e2e-bench")
    parser.add_argument("--chunk-size", type=int, default=20_000, help="articles per OVER chunk")
    parser.add_argument("--batch-chunks", type=int, default=10, help="chunks per batch")
    parser.add_argument("--range-size", type=int, default=100_000, help="articles per leased range")
    parser.add_argument(
        "--no-durability",
        action="store_true",
        help="PostgreSQL with fsync and synchronous_commit off (to show what durability costs)",
    )
    parser.add_argument(
        "--no-inspect",
        action="store_true",
        help="the edge node leases no inspections (INSPECT=0), to show what inspecting costs ingest",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="PostgreSQL's time by statement over the run (pg_stat_statements; adds its own cost)",
    )
    args = parser.parse_args(argv)
    print(
        f"command: .venv/bin/python bench/e2e.py --articles {args.articles} --connections {args.connections}"
        f" --chunk-size {args.chunk_size} --batch-chunks {args.batch_chunks} --range-size {args.range_size}"
        + (" --no-durability" if args.no_durability else "")
        + (" --no-inspect" if args.no_inspect else "")
        + (" --statements" if args.statements else "")
    )
    print(
        "PostgreSQL: "
        + (
            "fsync and synchronous_commit off (--no-durability)"
            if args.no_durability
            else "fsync and synchronous_commit on, as a production catalog runs"
        )
    )
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    edge: subprocess.Popen | None = None
    services = Services(
        workdir,
        args.connections,
        args.chunk_size,
        args.batch_chunks,
        args.range_size,
        durable=not args.no_durability,
        statements=args.statements,
    )
    try:
        services.start(args.articles)
        services.flask("groups", "add", *GROUPS)
        token = json.loads(services.flask("nodes", "create", "bench-edge", "--json"))["token"]
        services.flask("plan", *GROUPS, "--days", "36500")
        spans = []
        with connect("127.0.0.1", services.ports["reader"], compress=False) as client:
            for group in GROUPS:
                info = client.group(group)
                spans += [(group, a, b) for a, b in chunk_spans(info.first, info.last, args.chunk_size)]
        raw_reads = [measured_raw(services, spans, args.connections)]
        overview_bytes = raw_reads[0].bytes

        pids = services.pids()
        if args.statements:
            services.sql_value("SELECT pg_stat_statements_reset()")
        before = {name: cpu_of(pid) for name, pid in pids.items()}
        edge_env = {
            **os.environ,
            "COORDINATOR_URL": f"https://127.0.0.1:{services.ports['api']}",
            "COORDINATOR_CAFILE": str(workdir / "cert.pem"),
            "NODE_TOKEN": token,
            "NNTP_HOST": "127.0.0.1",
            "NNTP_PORT": str(services.ports["reader"]),
            "NNTP_SSL": "0",
            # The same connections as the raw read: uncompressed. Over loopback, COMPRESS
            # DEFLATE only moves CPU into INN (deflate) and the edge (inflate).
            "NNTP_COMPRESS": "0",
            "NNTP_CONNECTIONS": str(args.connections),
            # Inspections (the node's default with a Usenet server) unless --no-inspect:
            # INN keeps no bodies here, so each BODY is answered 430/423 and counted missing.
            # The inspector asks again a second after finding nothing (the default 30 s
            # would have it idle for the whole run: the first posts are queued once the
            # first batch is joined).
            "INSPECT": "0" if args.no_inspect else "1",
            "POLL_INTERVAL": "1",
        }
        started, started_wall = time.perf_counter(), time.time()
        # Not --exit-when-idle: the node reads its last range seconds before the data center has
        # stored and joined it, and would exit before the first post is queued, where a node that
        # runs for hours inspects what earlier ranges brought while it reads the next ones. It
        # runs until the job is done, and is stopped then.
        edge = subprocess.Popen(
            [str(REPO / ".venv/bin/edge"), "run"],
            env=edge_env,
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=open(workdir / "edge.log", "wb"),
        )
        # The edge's CPU: its own and its processes' once it has exited (wait4), sampled before.
        edge_cpu = [0.0]

        def sample_edge() -> None:
            while True:
                pid, status, usage = os.wait4(edge.pid, os.WNOHANG)
                if pid:
                    edge.returncode = os.waitstatus_to_exitcode(status)
                    edge_cpu[0] = usage.ru_utime + usage.ru_stime
                    return
                edge_cpu[0] = max(edge_cpu[0], tree_cpu(edge.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample_edge, daemon=True)
        sampler.start()
        e2e_seconds = wait_done(services, edge) - started
        after = {name: cpu_of(pid) for name, pid in pids.items()}
        statements = services.top_statements() if args.statements else []
        # The inspections as the job ended: what the node inspected meanwhile, and what is left.
        inspection_states = {
            state: int(count)
            for state, count in (
                line.split("|")
                for line in services.sql_value("SELECT state, count(*) FROM post_inspections GROUP BY 1").splitlines()
            )
        }
        missing, read = (
            int(v)
            for v in services.sql_value(
                "SELECT coalesce(sum(articles_missing), 0), coalesce(sum(articles_read), 0) FROM post_inspections"
                " WHERE state = 'done'"
            ).split("|")
        )
        # The job is done: the node is stopped (SIGTERM: it gives back the inspections it holds),
        # in both modes alike.
        stop_edge(edge)
        sampler.join()
        if edge.returncode != 143:
            raise RuntimeError(f"edge run exited {edge.returncode}: see {workdir / 'edge.log'}")
        # The raw read again, the machine as it is after the run: the share is against both reads
        # together (the machine's speed drifts by a third from one minute to the next, so a single
        # short read before the run can move the share more than a change to the code does).
        raw_reads.append(measured_raw(services, spans, args.connections))
        # Each batch's way through the data center: accepted (the API's answer) and stored, in
        # seconds after the edge started, in the order accepted; and the pipeline once full: from
        # the first batch stored to the last, the articles of the batches stored after the first
        # (what the run's fill, before the first, and drain cost shows beside the end-to-end rate).
        batch_rows = [
            tuple(map(float, line.split("|")))
            for line in services.sql_value(
                "SELECT extract(epoch FROM accepted_at), extract(epoch FROM stored_at), batch_to - batch_from + 1"
                " FROM seed_batches ORDER BY accepted_at"
            ).splitlines()
        ]
        timeline = [
            [round(accepted - started_wall, 2), round(stored - started_wall, 2)] for accepted, stored, _ in batch_rows
        ]
        first_stored = min(stored for _, stored, _ in batch_rows)
        last_stored = max(stored for _, stored, _ in batch_rows)
        after_first = sum(articles for _, stored, articles in batch_rows if stored > first_stored)
        status = json.loads(services.flask("status", "--json"))
        articles = sum(g["articles"] for g in status["groups"])
        db_bytes = int(
            services.sql_value(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relkind = 'r'"
                " AND (c.relname = ANY('{"
                + ",".join(CATALOG)
                + "}') OR c.relname ~ '^(files|fragment_packs|release_chunks)_g[0-9]+$')"
            )
        )
        # Where the bytes are: every table of the database (the read side's too, which db_bytes
        # leaves out), its partitions summed under its name, the heap (with TOAST) apart from the
        # indexes.
        bytes_by_table = {
            name: {"table": int(heap), "indexes": int(indexes)}
            for name, heap, indexes in (
                line.split("|")
                for line in services.sql_value(
                    "SELECT regexp_replace(c.relname, '_g[0-9]+$', ''),"
                    " sum(pg_table_size(c.oid)), sum(pg_indexes_size(c.oid))"
                    " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE c.relkind = 'r' AND n.nspname = 'public' GROUP BY 1"
                    " ORDER BY sum(pg_table_size(c.oid)) + sum(pg_indexes_size(c.oid)) DESC"
                ).splitlines()
            )
        }
        # Autovacuum's passes over the catalog (the partitions are made during the run, so these
        # fell in it, or just after): each ANALYZE reads a sample of a table, on PostgreSQL's CPU.
        autovacuum_passes = int(
            services.sql_value(
                "SELECT coalesce(sum(autoanalyze_count + autovacuum_count), 0) FROM pg_stat_user_tables"
                " WHERE relname ~ '^(files|fragment_packs|release_chunks)_g' OR relname = 'releases'"
            )
        )
    finally:
        if edge is not None:
            stop_edge(edge)  # a run that failed leaves no node behind
        services.stop()

    # Read once PostgreSQL has stopped (the log stays in its directory): the passes that fell in the
    # run or just after, as the count above.
    autovacuum = autovacuum_cpu((services.pg_dir / "server.log").read_text(errors="replace"))
    raw_rate = sum(r.lines for r in raw_reads) / sum(r.seconds for r in raw_reads)
    reader_us = sum(r.reader_us * r.lines for r in raw_reads) / sum(r.lines for r in raw_reads)
    raw_inn_us = sum(r.inn_us * r.lines for r in raw_reads) / sum(r.lines for r in raw_reads)
    cpu = {name: after[name] - before[name] for name in before}
    cpu["edge"] = edge_cpu[0]
    us = {name: round(1e6 * seconds / articles, 2) for name, seconds in cpu.items()}
    dc_us = round(us["api"] + us["workers"] + us["postgresql"], 2)
    e2e_rate = articles / e2e_seconds
    full_rate = after_first / (last_stored - first_stored) if last_stored > first_stored else None
    # How much of the machine the run kept busy: the CPU it spent over what its cores could give.
    total_us = sum(us.values())
    overlap = e2e_rate * total_us / 1e6 / os.cpu_count()
    figures = {
        "articles": articles,
        "connections": args.connections,
        "chunk_size": args.chunk_size,
        "batch_chunks": args.batch_chunks,
        "range_size": args.range_size,
        "overview_bytes": overview_bytes,
        "durable": not args.no_durability,
        "raw_over_lines_per_second": round(raw_rate),
        "raw_over_reads_lines_per_second": [round(r.lines / r.seconds) for r in raw_reads],
        "raw_reader_cpu_us_per_line": round(reader_us, 2),
        "raw_inn_cpu_us_per_line": round(raw_inn_us, 2),
        "e2e_articles_per_second": round(e2e_rate),
        "e2e_seconds": round(e2e_seconds, 2),
        "share_of_raw": round(e2e_rate / raw_rate, 3),
        "cpu_us_per_article": us,
        "dc_us_per_article": dc_us,
        "cpu_us_per_article_total": round(total_us, 2),
        "overlap": round(overlap, 3),
        "db_bytes": db_bytes,
        "db_bytes_per_overview_byte": round(db_bytes / overview_bytes, 3),
        "db_bytes_per_article": round(db_bytes / articles, 1),
        "db_bytes_all_tables_per_article": round(sum(sum(s.values()) for s in bytes_by_table.values()) / articles, 1),
        # The tables of half a byte an article or more.
        "db_bytes_by_table_per_article": {
            name: {part: round(size / articles, 1) for part, size in sizes.items()}
            for name, sizes in bytes_by_table.items()
            if sum(sizes.values()) >= articles / 2
        },
        "autovacuum_passes": autovacuum_passes,
        "autovacuum_cpu_seconds": round(sum(autovacuum.values()), 2),
        "autovacuum_cpu_by_pass": autovacuum,
        "inspect": not args.no_inspect,
        "inspections": {
            "done": inspection_states.get("done", 0),
            "failed": inspection_states.get("failed", 0),
            "queued": inspection_states.get("queued", 0),
            "leased": inspection_states.get("leased", 0),
            "articles_missing": missing,
            "articles_read": read,
        },
        "first_batch_stored_after_seconds": round(first_stored - started_wall, 2),
        "batches_accepted_stored_seconds": timeline,
        "full_pipeline_articles_per_second": round(full_rate) if full_rate else None,
        "full_pipeline_share_of_raw": round(full_rate / raw_rate, 3) if full_rate else None,
        "acceptance": ACCEPTANCE,
    }
    print(
        f"end to end: {articles} articles in {e2e_seconds:.1f} s = {e2e_rate:,.0f} articles/s"
        f" ({figures['share_of_raw']:.0%} of the raw OVER rate {raw_rate:,.0f} lines/s, same {args.connections} connections;"
        f" the raw reads before and after: {', '.join(f'{r:,}' for r in figures['raw_over_reads_lines_per_second'])})"
    )
    print(
        "CPU per article (µs): "
        + ", ".join(f"{name} {value}" for name, value in us.items())
        + f"; data center (API + workers + PostgreSQL) {dc_us}; all {total_us:.2f}, the machine"
        f" {overlap:.0%} busy ({os.cpu_count()} cores)"
    )
    if figures["full_pipeline_articles_per_second"]:
        print(
            f"the pipeline full (from the first batch stored to the last): {figures['full_pipeline_articles_per_second']:,}"
            f" articles/s = {figures['full_pipeline_share_of_raw']:.0%} of raw; the first batch was stored"
            f" {figures['first_batch_stored_after_seconds']} s after the edge started"
        )
    print(
        "each batch accepted and stored, seconds after the edge started: " + ", ".join(f"{a}/{b}" for a, b in timeline)
    )
    states = figures["inspections"]
    print(
        f"inspections when the job ended ({'on' if figures['inspect'] else 'off: --no-inspect'}):"
        f" {states['done']:,} done ({states['articles_missing']:,} articles missing, {states['articles_read']:,} read),"
        f" {states['failed']:,} failed, {states['queued']:,} queued, {states['leased']:,} leased"
    )
    print(
        f"DB bytes: {db_bytes:,} = {figures['db_bytes_per_overview_byte']:.0%} of {overview_bytes:,} overview bytes;"
        f" autovacuum passes over the catalog: {autovacuum_passes}"
    )
    passes = figures["autovacuum_cpu_by_pass"]
    print(
        f"autovacuum's CPU (PostgreSQL's log): {figures['autovacuum_cpu_seconds']} s"
        + (" (" + ", ".join(f"{name} {seconds}" for name, seconds in list(passes.items())[:4]) + ")" if passes else "")
    )
    print(
        f"DB bytes an article: {figures['db_bytes_per_article']} in the catalog's tables"
        f" ({', '.join(CATALOG)}), {figures['db_bytes_all_tables_per_article']} in all;"
        " by table (heap + indexes): "
        + ", ".join(
            f"{name} {sizes['table']} + {sizes['indexes']}"
            for name, sizes in figures["db_bytes_by_table_per_article"].items()
        )
    )
    share, db_share = figures["share_of_raw"], figures["db_bytes_per_overview_byte"]
    bars = [
        (f"share of raw {share} >= {ACCEPTANCE['share_of_raw']}", share >= ACCEPTANCE["share_of_raw"]),
        (
            f"data center µs an article {dc_us} <= {ACCEPTANCE['dc_us_per_article']}",
            dc_us <= ACCEPTANCE["dc_us_per_article"],
        ),
        (
            f"DB bytes an article {figures['db_bytes_per_article']} <= {ACCEPTANCE['db_bytes_per_article']}",
            figures["db_bytes_per_article"] <= ACCEPTANCE["db_bytes_per_article"],
        ),
        (
            f"DB bytes per overview byte {db_share} <= {ACCEPTANCE['db_bytes_per_overview_byte']}",
            db_share <= ACCEPTANCE["db_bytes_per_overview_byte"],
        ),
    ]
    print("acceptance: " + "; ".join(f"{bar}: {'met' if met else 'NOT met'}" for bar, met in bars))
    if statements:
        figures["statements"] = statements
        print(f"PostgreSQL's statements by time (pg_stat_statements over the run; {articles:,} articles):")
        for row in statements:
            print(
                f"  {row['share_percent']:5.1f}% {row['ms']:9,.1f} ms {row['calls']:7,} calls"
                f" {1000 * row['ms'] / articles:6.2f} µs an article  {row['query'][:150]}"
            )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
