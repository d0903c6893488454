"""Inspections: how many posts one edge node inspects a second against the local INN 2, how many
bytes it reads a post, and the data center's CPU an inspection.

    .venv/bin/python bench/inspections.py [--releases 300] [--batch 10] [--seed 1]
                                          [--workdir /tmp/inspections-bench] [--no-durability]

Everything runs on this machine as bench/e2e.py starts it (its Services: PostgreSQL durable as a
production catalog runs, Redis, INN 2, gunicorn over HTTPS with 2 workers, the Celery workers as
ops/run starts them), except that INN keeps every article whole (CNFS
storage, its buffer sized to what is posted). --releases real releases are made and posted to one
group, their kinds in turn, in parts of simnews.yencpost.PART_SIZE (700,000 bytes, as posting
tools cut them; every volume is larger, so its first article is a full part):

- named: a release name, a RAR 4 archive of a film (simnews.archives.rar4_stored: stored, random
  data) cut into .partNN.rar volumes, their par2 set (Debian's par2: the index and 10% of
  recovery data) and an .nfo giving the release name and an IMDb id, posted together
  (simnews.yencpost.post_files): one post;
- hashed: the same, every file named by one random hash: one post, whose .nfo tells its name;
- obfuscated: rar-like volumes (random data) and their par2 set made by simnews.yencpost.make_release,
  posted by simnews.yencpost.post_obfuscated (a random name and poster on every file): a post
  for each file, joined into the par2 index's post once inspected;
- 7z: a 7z archive of a film made by Debian's 7z in volumes (every other one with a password and
  its headers encrypted), a par2 set and an .nfo: one post.

An edge node first indexes the group with INSPECT=0 (its ranges read, the batches stored and
joined: the join queues the posts worth inspecting). Then one edge node with INSPECT on and no
range left to read inspects what is queued, INSPECT_BATCH (--batch) at a time, and exits when
none is left (--exit-when-idle). Measured, from the first inspection seen leased to none queued
or leased (the queue looked at every 20 ms):

- posts inspected a second (goal: at least 50 on this machine);
- bytes read a post (post_inspections.bytes_read; goal: at most 1 MB = 1,000,000 bytes on
  average), articles read and missing, in all and by the reason each post was queued;
- CPU of each process tree over that time (data center: API, workers, PostgreSQL; the edge node;
  INN), from /proc (the edge's from wait4 at its exit, less what it had spent when the first
  inspection was leased), per inspection;
- how much of the time the node's reading thread was reading and inspecting (the sum of its
  `inspected` events' seconds), and the rest (its lease calls, and waiting for its poster thread,
  which posts the results meanwhile: the coordinator's round trips and the data center's work);
- what the inspections found (names told, par2 lists, archives, passwords), to show they read
  what was posted.

The last line printed is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# (Not bench/inspect.py: run as a script, a file's directory leads sys.path, and a file of that
# name there would stand for the standard library's inspect in every benchmark of bench/.)
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.e2e import POLL, Services, cpu_of, first_row, wait_done  # noqa: E402
from simnews.archives import rar4_stored  # noqa: E402
from simnews.generator import Article  # noqa: E402
from simnews.inject import inject  # noqa: E402
from simnews.yencpost import PART_SIZE, make_release, post_files, post_obfuscated  # noqa: E402

GROUP = "alt.binaries.misc"
KINDS = ("named", "hashed", "obfuscated", "7z")
# Every volume a full part and a bit more (two articles), 2 to 4 volumes a release.
VOLUME_SIZES = (PART_SIZE * 5 // 4, PART_SIZE * 3 // 2)
VOLUMES = (2, 4)
PASSWORD = "bench-secret"
POSTERS = tuple(f"Poster {n} <poster{n}@bench.invalid>" for n in range(7))
# CNFS buffer a release: at most 4 volumes of 1.5 parts with 10% of par2, yEnc's 2%, 4 KiB blocks.
CNFS_MB_PER_RELEASE = 7.5
GOALS = {"posts_per_second": 50, "bytes_read_per_post": 1_000_000}
DEADLINE = 1800.0  # seconds for a phase, past which the run fails


def say(message: str) -> None:
    print(f"inspections: {message}", file=sys.stderr, flush=True)


# -- the releases ---------------------------------------------------------------------------------


def nfo_text(name: str, imdb: int) -> bytes:
    return (
        f"            {name.replace('.', ' ')}\r\n\r\n  Release....: {name}\r\n"
        f"  IMDb.......: https://www.imdb.com/title/tt{imdb:07d}/\r\n  Source.....: BluRay\r\n"
        f"  Notes......: {'x' * 200}\r\n"
    ).encode()


def release_articles(kind: str, index: int, seed: int, directory: Path) -> list[Article]:
    """The articles of release `index` of `kind`, its files written under `directory`."""
    rng = random.Random(seed * 1_000_003 + index)
    volumes = rng.randint(*VOLUMES)
    volume_size = rng.randint(*VOLUME_SIZES)
    imdb = 1_000_000 + index
    namespace = f"inspections-bench.{seed}.{index}"
    poster = POSTERS[index % len(POSTERS)]
    if kind == "7z":
        return _7z_articles(rng, index, directory, volumes, volume_size, imdb, namespace, poster)
    name = f"Bench.Film.{index:05d}.{rng.randint(1970, 2025)}.1080p.BluRay.x264-GRP"
    if kind == "obfuscated":
        release = make_release(
            directory / "release", name, rng.randrange(2**32), size=volume_size * volumes, volumes=volumes
        )
        return post_obfuscated(release.files, GROUP, namespace=namespace, seed=rng.randrange(2**32))
    # named and hashed: a RAR 4 archive (its film stored) cut into volumes, and a par2 set.
    stem = name if kind == "named" else "%032x" % rng.getrandbits(128)
    posted = directory / "posted"
    posted.mkdir()
    archive = rar4_stored(
        [(f"{name}.mkv", rng.randbytes(volume_size * volumes - 200)), (f"{name}.sample.txt", b"sample\r\n")]
    )
    width = max(2, len(str(volumes)))
    size = -(-len(archive) // volumes)
    parts = []
    for number in range(volumes):
        parts.append(f"{stem}.part{number + 1:0{width}d}.rar")
        (posted / parts[-1]).write_bytes(archive[number * size : (number + 1) * size])
    _par2(posted, stem, parts, recovery=True)
    (posted / f"{stem}.nfo").write_bytes(nfo_text(name, imdb))
    return post_files(_posting_order(posted), GROUP, poster, namespace=namespace)


def _par2(directory: Path, stem: str, names: list[str], *, recovery: bool) -> None:
    """A par2 set of these files by Debian's par2, as make_release makes it: a block an eighth of a
    part; with recovery, 10% of the blocks in up to 3 recovery volumes, else one block in one."""
    block = PART_SIZE // 8 // 4 * 4
    blocks = sum(-(-(directory / name).stat().st_size // block) for name in names)
    count = max(1, -(-blocks // 10)) if recovery else 1
    subprocess.run(
        ["par2", "create", "-q", "-q", f"-s{block}", f"-c{count}", f"-n{min(3, count)}", f"{stem}.par2", *names],
        cwd=directory,
        check=True,
        capture_output=True,
        timeout=120,
    )


def _posting_order(directory: Path) -> list[Path]:
    """The .nfo, the par2 files, then the volumes, as posting tools order them."""
    return sorted(directory.iterdir(), key=lambda path: (path.suffix != ".nfo", path.suffix != ".par2", path.name))


def _7z_articles(
    rng: random.Random,
    index: int,
    directory: Path,
    volumes: int,
    volume_size: int,
    imdb: int,
    namespace: str,
    poster: str,
) -> list[Article]:
    name = f"Bench.Show.{index:05d}.S{1 + index % 9:02d}E{1 + index % 24:02d}.720p.HDTV.x264-GRP"
    source = directory / "source"
    source.mkdir()
    (source / f"{name}.mkv").write_bytes(rng.randbytes(volume_size * (volumes - 1) + volume_size // 3))
    (source / f"{name}.txt").write_bytes(b"sample\r\n")
    locked = ["-p" + PASSWORD, "-mhe=on"] if index // len(KINDS) % 2 else []
    posted = directory / "posted"
    posted.mkdir()
    subprocess.run(
        [
            "7z",
            "a",
            "-bd",
            "-bso0",
            "-bsp0",
            "-mx0",
            f"-v{volume_size}b",
            *locked,
            str(posted / f"{name}.7z"),
            f"{name}.mkv",
            f"{name}.txt",
        ],
        cwd=source,
        check=True,
    )
    _par2(posted, name, sorted(path.name for path in posted.iterdir()), recovery=False)
    (posted / f"{name}.nfo").write_bytes(nfo_text(name, imdb))
    return post_files(_posting_order(posted), GROUP, poster, namespace=namespace)


@dataclass(frozen=True)
class Posted:
    kind: str
    articles: int
    bytes: int


def post_releases(indexes: list[int], seed: int, feed_port: int) -> list[Posted]:
    """Makes releases `indexes` (their kinds in turn) and posts them to INN's feed port, one
    connection; a worker process's share."""
    done = []
    for index in indexes:
        kind = KINDS[index % len(KINDS)]
        with tempfile.TemporaryDirectory(prefix="inspections-bench.") as directory:
            articles = release_articles(kind, index, seed, Path(directory))
        result = inject("127.0.0.1", feed_port, articles, conns=1)
        if result.accepted != len(articles):
            raise RuntimeError(f"INN took {result.accepted} of the {len(articles)} articles of release {index}")
        done.append(Posted(kind, len(articles), sum(len(article.raw) for article in articles)))
    return done


def post_all(releases: int, seed: int, feed_port: int) -> tuple[list[Posted], float]:
    """Every release made and posted, by a worker process a core."""
    workers = max(1, os.cpu_count() or 1)
    shares = [list(range(start, releases, workers)) for start in range(workers)]
    started = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        posted = [
            item for share in pool.map(post_releases, shares, [seed] * workers, [feed_port] * workers) for item in share
        ]
    return posted, time.perf_counter() - started


# -- the edge node --------------------------------------------------------------------------------


class EdgeRun:
    """`edge run --exit-when-idle` with its events (JSON lines, on its stderr) and its output in a
    file; its CPU time (its own and its processes') comes from wait4 when it exits."""

    def __init__(self, services: Services, token: str, events: Path, **settings: str):
        env = {
            **os.environ,
            "COORDINATOR_URL": f"https://127.0.0.1:{services.ports['api']}",
            "COORDINATOR_CAFILE": str(services.workdir / "cert.pem"),
            "NODE_TOKEN": token,
            "NNTP_HOST": "127.0.0.1",
            "NNTP_PORT": str(services.ports["reader"]),
            "NNTP_SSL": "0",
            "NNTP_COMPRESS": "0",
            "NNTP_CONNECTIONS": "2",
            "POLL_INTERVAL": "1",
            **settings,
        }
        self.events = events
        self.process = subprocess.Popen(
            [str(REPO / ".venv/bin/edge"), "run", "--exit-when-idle", "--progress", "json"],
            env=env,
            cwd=services.workdir,
            stdout=open(events, "wb"),
            stderr=subprocess.STDOUT,
        )
        self.cpu: float | None = None
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        _, status, usage = os.wait4(self.process.pid, 0)
        self.cpu = usage.ru_utime + usage.ru_stime
        self.process.returncode = os.waitstatus_to_exitcode(status)

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def wait(self, timeout: float) -> int:
        self._reaper.join(timeout)
        if self.process.returncode is None:
            raise RuntimeError(f"edge run did not exit in {timeout:.0f} s: see {self.events}")
        return self.process.returncode

    def stop(self) -> None:
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def named(self, event: str) -> list[dict[str, Any]]:
        records = []
        for line in self.events.read_text().splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("event") == event:
                    records.append(record)
        return records


@dataclass
class Window:
    """The inspections' run: from the first seen leased to none queued or leased."""

    seconds: float
    cpu: dict[str, float]  # CPU seconds of each process tree over it
    polls: int


def inspect_all(services: Services, edge: EdgeRun) -> Window:
    """Waits for the node to inspect every queued post, and measures the time and CPU from the
    first lease seen to the last result stored. One light query every POLL seconds."""
    import psycopg

    pids = services.pids()
    query = (
        "SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased'),"
        " count(*) FILTER (WHERE state IN ('done', 'failed')) FROM post_inspections"
    )
    deadline = time.monotonic() + DEADLINE
    started: float | None = None
    before: dict[str, float] = {}
    polls = 0
    with psycopg.connect(f"host=127.0.0.1 port={services.ports['pg']} user=seed dbname=seed", autocommit=True) as conn:
        finished_before = first_row(conn.execute(query))[2]
        while time.monotonic() < deadline:
            queued, leased, finished = first_row(conn.execute(query))
            now = time.perf_counter()
            polls += 1
            if started is None and (leased or finished > finished_before):
                started = now
                before = {name: cpu_of(pid) for name, pid in pids.items()}
                before["edge"] = cpu_of(edge.process.pid)
            elif started is not None and not queued and not leased:
                after = {name: cpu_of(pid) for name, pid in pids.items()}
                edge.wait(60)  # its CPU from wait4, once it exits (it is idle now)
                after["edge"] = edge.cpu or 0.0
                return Window(now - started, {name: after[name] - before[name] for name in after}, polls)
            if edge.returncode is not None and (queued or leased or started is None):
                raise RuntimeError(
                    f"edge run exited {edge.returncode} with {queued} inspections queued and"
                    f" {leased} leased: see {edge.events}"
                )
            time.sleep(POLL)
    raise RuntimeError("the inspections did not finish in time")


# -- the run --------------------------------------------------------------------------------------


def rows(services: Services, query: str) -> list[list[str]]:
    return [line.split("|") for line in services.sql_value(query).splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--releases", type=int, default=300, help="releases made and posted, their kinds in turn")
    parser.add_argument("--batch", type=int, default=10, help="INSPECT_BATCH: inspections leased at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default="/tmp/inspections-bench")
    parser.add_argument(
        "--no-durability",
        action="store_true",
        help="PostgreSQL with fsync and synchronous_commit off (what each result's commit costs)",
    )
    args = parser.parse_args(argv)
    if args.releases < len(KINDS):
        parser.error(f"--releases must be at least {len(KINDS)}: one of each kind")
    print(
        f"command: .venv/bin/python bench/inspections.py --releases {args.releases} --batch {args.batch}"
        f" --seed {args.seed}" + (" --no-durability" if args.no_durability else "")
    )
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    services = Services(
        workdir,
        2,
        20_000,
        10,
        100_000,
        durable=not args.no_durability,
        groups=(GROUP,),
        inn_storage="cnfs",
        inn_cnfs_mb=int(args.releases * CNFS_MB_PER_RELEASE) + 64,
    )
    edges: list[EdgeRun] = []
    try:
        services.start(0)
        posted, posting_seconds = post_all(args.releases, args.seed, services.ports["feed"])
        posted_articles = sum(item.articles for item in posted)
        posted_bytes = sum(item.bytes for item in posted)
        say(
            f"made and posted {args.releases} releases: {posted_articles:,} articles, {posted_bytes / 1e6:,.0f} MB"
            f" in {posting_seconds:.1f} s"
        )

        # The group indexed by a node that inspects nothing: the join queues the posts.
        services.flask("groups", "add", GROUP)
        services.flask("plan", GROUP, "--days", "36500")
        token = json.loads(services.flask("nodes", "create", "bench-edge", "--json"))["token"]
        started = time.perf_counter()
        indexer = EdgeRun(services, token, workdir / "index-edge.log", INSPECT="0")
        edges.append(indexer)
        wait_done(services, indexer.process)
        if indexer.wait(120) != 0:
            raise RuntimeError(f"the indexing node exited {indexer.returncode}: see {indexer.events}")
        index_seconds = time.perf_counter() - started
        posts_indexed = int(services.sql_value("SELECT count(*) FROM posts"))
        queued = {
            reason: int(count)
            for reason, count in rows(services, "SELECT reason, count(*) FROM post_inspections GROUP BY 1 ORDER BY 1")
        }
        say(
            f"indexed in {index_seconds:.1f} s: {posts_indexed:,} posts, {sum(queued.values()):,} queued for"
            f" inspection ({', '.join(f'{reason} {count:,}' for reason, count in queued.items())})"
        )
        if not queued:
            raise RuntimeError("the join queued no post for inspection")

        inspector = EdgeRun(services, token, workdir / "inspect-edge.log", INSPECT="1", INSPECT_BATCH=str(args.batch))
        edges.append(inspector)
        window = inspect_all(services, inspector)
        if inspector.returncode != 0:
            raise RuntimeError(f"the inspecting node exited {inspector.returncode}: see {inspector.events}")
        inspected = inspector.named("inspected")
        leases = inspector.named("inspection_lease")
        stop = inspector.named("stop")
        node_counts = stop[0].get("inspections") if stop else None

        by_reason: dict[str, dict[str, int]] = {}
        for reason, state, count, read_bytes, read, missing in rows(
            services,
            (
                "SELECT reason, state, count(*), coalesce(sum(bytes_read), 0), coalesce(sum(articles_read), 0),"
                " coalesce(sum(articles_missing), 0) FROM post_inspections GROUP BY 1, 2 ORDER BY 1, 2"
            ),
        ):
            entry = by_reason.setdefault(
                reason, {"done": 0, "failed": 0, "bytes_read": 0, "articles_read": 0, "articles_missing": 0}
            )
            entry[state] = entry.get(state, 0) + int(count)
            if state == "done":
                entry["bytes_read"] += int(read_bytes)
                entry["articles_read"] += int(read)
                entry["articles_missing"] += int(missing)
        (
            done,
            failed,
            bytes_read,
            articles_read,
            articles_missing,
            p50,
            p95,
            most,
            told,
            listed,
            archived,
            imdb,
            password_1,
            password_2,
            flagged,
        ) = (
            float(v or 0)
            for v in services.sql_value(
                "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'),"
                " coalesce(sum(bytes_read), 0), coalesce(sum(articles_read), 0), coalesce(sum(articles_missing), 0),"
                " percentile_cont(0.5) WITHIN GROUP (ORDER BY bytes_read),"
                " percentile_cont(0.95) WITHIN GROUP (ORDER BY bytes_read), max(bytes_read),"
                " count(*) FILTER (WHERE inner_name IS NOT NULL),"
                " count(*) FILTER (WHERE files IS NOT NULL),"
                " count(*) FILTER (WHERE EXISTS (SELECT FROM jsonb_array_elements(files) f WHERE f->>'source' <> 'par2')),"
                " count(*) FILTER (WHERE imdb IS NOT NULL),"
                " count(*) FILTER (WHERE password = 1), count(*) FILTER (WHERE password = 2),"
                " count(*) FILTER (WHERE flags IS NOT NULL)"
                " FROM post_inspections"
            ).split("|")
        )
        posts_after = int(services.sql_value("SELECT count(*) FROM posts"))
        failures = dict(
            rows(
                services,
                "SELECT coalesce(error, '?'), count(*) FROM post_inspections WHERE state = 'failed' GROUP BY 1",
            )
        )
    finally:
        for edge in edges:  # a run that failed leaves no node behind
            edge.stop()
        services.stop()

    done_count = int(done)
    rate = done_count / window.seconds
    dc_cpu = window.cpu["api"] + window.cpu["workers"] + window.cpu["postgresql"]
    per = {name: round(1e3 * seconds / done_count, 3) for name, seconds in window.cpu.items()}
    reading = sum(float(event.get("seconds") or 0) for event in inspected)
    figures: dict[str, Any] = {
        "releases": args.releases,
        "batch": args.batch,
        "seed": args.seed,
        "group": GROUP,
        "durable": not args.no_durability,
        "kinds": dict(Counter(item.kind for item in posted)),
        "part_size": PART_SIZE,
        "articles_posted": posted_articles,
        "bytes_posted": posted_bytes,
        "posting_seconds": round(posting_seconds, 1),
        "index_seconds": round(index_seconds, 1),
        "posts_indexed": posts_indexed,
        "posts_after_inspections": posts_after,
        "inspections_queued": queued,
        "inspections_done": done_count,
        "inspections_failed": int(failed),
        "failures": failures,
        "seconds": round(window.seconds, 3),
        "posts_per_second": round(rate, 1),
        "bytes_read_per_post": round(bytes_read / done_count),
        "bytes_read": int(bytes_read),
        "bytes_read_p50": int(p50),
        "bytes_read_p95": int(p95),
        "bytes_read_max": int(most),
        "articles_read_per_post": round(articles_read / done_count, 2),
        "articles_missing": int(articles_missing),
        "by_reason": by_reason,
        "cpu_seconds": {name: round(seconds, 3) for name, seconds in window.cpu.items()},
        "cpu_ms_per_inspection": per,
        "dc_cpu_ms_per_inspection": round(1e3 * dc_cpu / done_count, 3),
        "machine_busy": round(sum(window.cpu.values()) / window.seconds / (os.cpu_count() or 1), 3),
        "node_reading_seconds": round(reading, 3),
        "node_other_seconds": round(window.seconds - reading, 3),
        "leases": len(leases),
        "node_counts": node_counts,
        "found": {
            "names_told": int(told),
            "file_lists": int(listed),
            "archives_listed": int(archived),
            "imdb": int(imdb),
            "password_1": int(password_1),
            "password_2": int(password_2),
            "flagged": int(flagged),
        },
        "polls": window.polls,
        "goals": GOALS,
    }
    print(
        f"posted: {args.releases} releases ({', '.join(f'{k} {v}' for k, v in figures['kinds'].items())}),"
        f" {posted_articles:,} articles, {posted_bytes / 1e6:,.1f} MB, in {posting_seconds:.1f} s;"
        f" indexed in {index_seconds:.1f} s: {posts_indexed:,} posts"
    )
    print(f"queued for inspection: {sum(queued.values()):,} ({', '.join(f'{k} {v:,}' for k, v in queued.items())})")
    print(
        f"inspected: {done_count:,} posts in {window.seconds:.2f} s = {rate:,.1f} posts/s by one node"
        f" (INSPECT_BATCH {args.batch}, {len(leases)} leases); {int(failed)} failed {failures or ''}"
    )
    print(
        f"bytes read a post: {figures['bytes_read_per_post']:,} on average (median {int(p50):,}, p95 {int(p95):,},"
        f" most {int(most):,}); {figures['articles_read_per_post']} articles a post, {int(articles_missing)} missing"
    )
    for reason, entry in by_reason.items():
        if entry["done"]:
            print(
                f"  queued as {reason}: {entry['done']:,} done, {entry['bytes_read'] / entry['done']:,.0f} bytes and"
                f" {entry['articles_read'] / entry['done']:.2f} articles a post"
            )
    print(
        "CPU an inspection (ms): "
        + ", ".join(f"{name} {value}" for name, value in per.items())
        + f"; data center (API + workers + PostgreSQL) {figures['dc_cpu_ms_per_inspection']};"
        f" the machine {figures['machine_busy']:.0%} busy ({os.cpu_count()} cores)"
    )
    print(
        f"the node's inspector: {reading:.2f} s reading and inspecting, {window.seconds - reading:.2f} s the rest"
        " (leases and results: the coordinator's round trips)"
    )
    print(
        f"found: {int(told)} names told, {int(listed)} file lists ({int(archived)} of an archive's files),"
        f" {int(imdb)} IMDb ids, passwords {int(password_1)}"
        f" (1) and {int(password_2)} (2), {int(flagged)} flagged; posts {posts_indexed:,} -> {posts_after:,}"
        " after the par2 joins"
    )
    bars = [
        (
            f"posts a second {figures['posts_per_second']} >= {GOALS['posts_per_second']}",
            rate >= GOALS["posts_per_second"],
        ),
        (
            f"bytes read a post {figures['bytes_read_per_post']:,} <= {GOALS['bytes_read_per_post']:,}",
            figures["bytes_read_per_post"] <= GOALS["bytes_read_per_post"],
        ),
    ]
    figures["goals_met"] = {"posts_per_second": bars[0][1], "bytes_read_per_post": bars[1][1]}
    print("goals: " + "; ".join(f"{bar}: {'met' if met else 'NOT met'}" for bar, met in bars))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
