"""How fast the edge node fetches and digests one range through a provider-like proxy, with 1, 4
and 8 NNTP connections, and how much memory it takes.

    .venv/bin/python bench/edge.py [--articles 960000] [--connections 1,4,8] [--lines-per-sec 26000]
                                   [--inn-dir /tmp/edge-bench-inn] [--keep-inn] [--no-profile]

A private INN 2 (ops/inn, under --inn-dir, reused by later runs) holds a generated group of
--articles articles; simnews.proxy runs as its own process in front of it, capped at
--lines-per-sec overview lines per second per connection, as providers are (~26k). For each
connection count a child process runs what `edge run` runs for a range: the prefetcher's N
connections feeding the range loop (edge.digest.runner.run_range: parse, gather, rules, batch every 10
chunks of 20,000 articles), each batch encoded as the node posts it (msgpack, gzip) by a sink that
keeps only its size: the coordinator is left out, so the figures are the node's own. Each run
reports its wall time, lines/s, speedup over one connection, the CPU time of the node (its digest
thread, and the rest, which is the connections'), of the proxy, of INN and of anything else on the
machine meanwhile (the figures are only the node's when that is near zero), and the node's peak
RSS (VmHWM). One more run at the largest connection count profiles its digest thread with
cProfile, apart from the timed runs because the profiler slows it, to show where the time goes
when the CPU saturates. The last line printed
is JSON with every figure.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import os
import pstats
import shlex
import subprocess
import sys
from typing import Any
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edge.digest import nntp  # noqa: E402
from edge.digest.batch import Batch, encode_batch  # noqa: E402
from edge.node.node import DigestTurns  # noqa: E402
from edge.node.prefetch import Prefetcher  # noqa: E402
from edge.digest.rules import RuleSet  # noqa: E402
from edge.digest.runner import RangeHooks, RangeJob, run_range  # noqa: E402
from simnews.generator import Config, generate  # noqa: E402
from simnews.inject import inject  # noqa: E402
from simnews.ports import free_ports  # noqa: E402

OPS_INN = REPO / "ops" / "inn"
GROUP = "alt.binaries.test"
CHUNK_SIZE = 20_000
BATCH_CHUNKS = 10
CNFS_MB_PER_THOUSAND = 4.2  # every article takes at least one 4 KiB CNFS block
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ACCEPTANCE = {4: 3.5, 8: 6.0}
MAX_RSS_MIB = 300


# -- the child: one range, N connections ---------------------------------------------------------


class EncodingSink:
    """Encodes each batch as the node's sink does before posting it, and keeps only the sizes. The
    coordinator is left out; post_seconds stands for its answer, a wait that takes no CPU."""

    def __init__(self, post_seconds: float = 0.0):
        self.batches = 0
        self.bytes = 0
        self.post_seconds = post_seconds
        self.lock = threading.Lock()

    def prepare(self, batch: Batch) -> bytes:
        """Encodes the batch on the range's thread, as the node's sink does, so that the body is ready
        when its post comes."""
        return encode_batch(batch)[0]

    def submit(self, batch: Batch | bytes) -> None:
        body = batch if isinstance(batch, bytes) else self.prepare(batch)
        if self.post_seconds:
            time.sleep(self.post_seconds)
        with self.lock:
            self.batches += 1
            self.bytes += len(body)


class InTurn(RangeHooks):
    """A range that digests in its turn, as the node's ranges do."""

    def __init__(self, turns: DigestTurns, order: int):
        self.turns = turns
        self.order = order

    def digest_slot(self):
        return self.turns.turn(self.order)


def run_ranges(args: argparse.Namespace, prefetcher: Prefetcher, layout, sink: EncodingSink) -> int:
    """Runs [first, last] as args.ranges ranges held args.leases at a time, as the node holds them:
    each on a thread of its own, one digesting at a time (the longest held first), each posting
    ahead. Returns the lines digested."""
    size = -(-(args.last - args.first + 1) // args.ranges)
    spans = [(a, min(a + size - 1, args.last)) for a in range(args.first, args.last + 1, size)]
    turns, leases, lines, threads = DigestTurns(prefetcher.stop), threading.Semaphore(args.leases), [], []

    def work(order: int, first: int, last: int) -> None:
        try:
            job = RangeJob(
                group=GROUP,
                next_id=first,
                last_id=last,
                chunk_size=CHUNK_SIZE,
                batch_chunks=BATCH_CHUNKS,
                rules=RuleSet.from_data([]),
                layout=layout,
            )
            state = run_range(job, prefetcher.source(order, GROUP, order), sink, InTurn(turns, order), post_ahead=True)
            lines.append(state.lines)
        finally:
            prefetcher.close_range(order)
            leases.release()

    for order, (first, last) in enumerate(spans):
        leases.acquire()  # the next range is leased as soon as one ends
        threads.append(threading.Thread(target=work, args=(order, first, last)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    if len(lines) != len(spans):
        raise RuntimeError("a range failed")
    return sum(lines)


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cache_entries() -> dict[str, int]:
    """Entries in the digest's per-process caches (each bounded: docs/digest.md, Memory)."""
    from edge.digest import gather, overview

    return {
        "counter_tails": len(gather._COUNTER_TAILS),
        "subjects": len(gather._SUBJECTS),
        "sizes": len(overview._SIZES),
    }


def run_child(args: argparse.Namespace) -> dict:
    stop = threading.Event()
    connect = functools.partial(nntp.connect, "127.0.0.1", args.port)
    prefetcher = Prefetcher(connect, args.child, args.child + 4, stop=stop)  # the node's default cap
    layout = prefetcher.layout()
    sink = EncodingSink(args.post_seconds)
    profiler = cProfile.Profile() if args.profile else None
    cpu_before, digest_before, started = os.times(), time.thread_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    if args.ranges > 1:
        lines = run_ranges(args, prefetcher, layout, sink)
    else:
        job = RangeJob(
            group=GROUP,
            next_id=args.first,
            last_id=args.last,
            chunk_size=CHUNK_SIZE,
            batch_chunks=BATCH_CHUNKS,
            rules=RuleSet.from_data([]),
            layout=layout,
        )
        lines = run_range(job, prefetcher.source(1, GROUP), sink, post_ahead=bool(args.post_seconds)).lines
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - started
    digest_cpu = time.thread_time() - digest_before  # with one range, the digest runs on this thread
    cpu_after = os.times()
    stop.set()
    process_cpu = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    result = {
        "connections": args.child,
        "ranges": args.ranges,
        "seconds": round(seconds, 2),
        "lines": lines,
        "lines_per_second": round(lines / seconds),
        "batches": sink.batches,
        "batch_bytes": sink.bytes,
        "node_cpu_seconds": round(process_cpu, 2),
        "digest_thread_cpu_seconds": round(digest_cpu, 2) if args.ranges == 1 else None,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "cache_entries": cache_entries(),
    }
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(14)
        result["profile"] = out.getvalue()
    return result


# -- the parent: INN, the proxy, the runs ------------------------------------------------------


def inn_env(articles: int) -> dict[str, str]:
    reader, feed, tls = free_ports(3)
    return os.environ | {
        "INN_READER_PORT": str(reader),
        "INN_FEED_PORT": str(feed),
        "INN_TLS_PORT": str(tls),
        "INN_GROUPS": GROUP,
        "INN_STORAGE": "cnfs",
        "INN_CNFS_MB": str(int(articles / 1000 * CNFS_MB_PER_THOUSAND) + 64),
        "INN_HISTORY_SIZE": str(max(2 * articles, 100_000)),
    }


def read_ports(inn_dir: Path) -> dict[str, int]:
    pairs = (line.split("=", 1) for line in (inn_dir / "etc" / "ports").read_text().split())
    return {name: int(value) for name, value in pairs}


def group_span(port: int) -> tuple[int, int, int]:
    with nntp.connect("127.0.0.1", port, compress=False) as client:
        info = client.group(GROUP)
    return info.count, info.first, info.last


def prepare_inn(inn_dir: Path, articles: int) -> dict[str, int]:
    """A running INN whose group holds at least `articles` articles (made, or reused from an earlier run)."""
    if not (inn_dir / "etc" / "ports").exists():
        env = inn_env(articles)
        subprocess.run([str(OPS_INN), "init", str(inn_dir)], env=env, check=True, capture_output=True)
    subprocess.run([str(OPS_INN), "start", str(inn_dir)], check=True, capture_output=True)
    ports = read_ports(inn_dir)
    count, _, high = group_span(ports["INN_READER_PORT"])
    if high < articles:
        print(f"posting {articles - high} articles into {GROUP} (once; later runs reuse {inn_dir})", flush=True)
        started = time.perf_counter()
        posted = inject(
            "127.0.0.1",
            ports["INN_FEED_PORT"],
            generate(articles - high, Config(seed=11, groups=(GROUP,), namespace=f"bench{high}")),
            conns=2,
        )
        print(f"  {posted.accepted} accepted in {time.perf_counter() - started:.0f} s", flush=True)
    return ports


def cpu_ticks_of(pid: int, children: bool = False) -> int:
    """The CPU ticks of a process; with children, also those of the children it has reaped, such as
    nnrpd's processes for each connection."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)


def machine_busy_ticks() -> tuple[int, int]:
    values = list(map(int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]))
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def run_one(
    connections: int,
    proxy: subprocess.Popen,
    proxy_port: int,
    nnrpd: int,
    first: int,
    last: int,
    profile: bool = False,
    ranges: int = 1,
    leases: int = 1,
    post_seconds: float = 0.0,
) -> dict:
    proxy_before, inn_before = cpu_ticks_of(proxy.pid), cpu_ticks_of(nnrpd, children=True)
    busy_before, total_before = machine_busy_ticks()
    command = [
        sys.executable,
        __file__,
        "--child",
        str(connections),
        "--port",
        str(proxy_port),
        "--first",
        str(first),
        "--last",
        str(last),
        "--ranges",
        str(ranges),
        "--leases",
        str(leases),
        "--post-seconds",
        str(post_seconds),
    ] + (["--profile"] if profile else [])
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.splitlines()[-1])
    busy_after, total_after = machine_busy_ticks()
    time.sleep(0.5)  # gives nnrpd time to reap its connections' processes
    result["proxy_cpu_seconds"] = round((cpu_ticks_of(proxy.pid) - proxy_before) / CLOCK_TICKS, 2)
    result["inn_cpu_seconds"] = round((cpu_ticks_of(nnrpd, children=True) - inn_before) / CLOCK_TICKS, 2)
    cores = os.cpu_count() or 1
    result["machine_cpu_busy_share"] = round((busy_after - busy_before) / max(1, total_after - total_before), 3)
    result["machine_cpu_seconds"] = round(result["machine_cpu_busy_share"] * cores * result["seconds"], 1)
    # The CPU time of whatever else ran on the machine meanwhile, the run's own processes taken out.
    result["other_cpu_seconds"] = round(
        max(
            0.0,
            result["machine_cpu_seconds"]
            - result["node_cpu_seconds"]
            - result["proxy_cpu_seconds"]
            - result["inn_cpu_seconds"],
        ),
        1,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=960_000, help="articles in the range (48 chunks by default)")
    parser.add_argument("--connections", default="1,4,8")
    parser.add_argument("--lines-per-sec", type=float, default=26_000, help="the proxy's cap per connection")
    parser.add_argument("--inn-dir", default="/tmp/edge-bench-inn")
    parser.add_argument("--keep-inn", action="store_true", help="leave INN running afterwards")
    parser.add_argument("--no-profile", action="store_true", help="do not profile the largest run")
    parser.add_argument(
        "--ranges",
        type=int,
        default=1,
        help="also run the articles as this many ranges held --leases at a time, as the node holds"
        " them, beside the one range at each connection count",
    )
    parser.add_argument("--leases", type=int, default=3, help="ranges held at once with --ranges (MAX_LEASES)")
    parser.add_argument(
        "--post-seconds",
        type=float,
        default=0.0,
        help="the coordinator's answer to a batch (a wait; it is left out); batches are then"
        " posted ahead, as the node posts them",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--last", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(args)))
        return 0

    print("command:", shlex.join([sys.executable, *sys.argv]), flush=True)
    counts = [int(c) for c in args.connections.split(",")]
    inn_dir = Path(args.inn_dir)
    ports = prepare_inn(inn_dir, args.articles)
    _, low, _ = group_span(ports["INN_READER_PORT"])
    first, last = low, low + args.articles - 1
    (proxy_port,) = free_ports(1)
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simnews.proxy",
            "--upstream-port",
            str(ports["INN_READER_PORT"]),
            "--port",
            str(proxy_port),
            "--lines-per-sec",
            str(args.lines_per_sec),
        ],
        cwd=REPO,
    )
    runs: list[dict[str, Any]] = []
    range_runs: list[dict[str, Any]] = []
    profile = None
    try:
        time.sleep(1)
        print(
            f"range {first}-{last} of {GROUP}: {args.articles} articles, {-(-args.articles // CHUNK_SIZE)} chunks;"
            f" proxy capped at {args.lines_per_sec:.0f} lines/s per connection; {os.cpu_count()} cores",
            flush=True,
        )
        nnrpd = int((inn_dir / "run" / f"nnrpd-{ports['INN_READER_PORT']}.pid").read_text())
        for connections in counts:
            shapes = [(1, 1)] + ([(args.ranges, args.leases)] if args.ranges > 1 else [])
            for ranges, leases in shapes:
                result = run_one(
                    connections,
                    proxy,
                    proxy_port,
                    nnrpd,
                    first,
                    last,
                    ranges=ranges,
                    leases=leases,
                    post_seconds=args.post_seconds,
                )
                (runs if ranges == 1 else range_runs).append(result)
                digest = result["digest_thread_cpu_seconds"]
                print(
                    f"  {connections} connection(s){f', {ranges} ranges, {leases} held' if ranges > 1 else ''}:"
                    f" {result['seconds']:7.2f} s  {result['lines_per_second']:>9,} lines/s"
                    f"  CPU s: node {result['node_cpu_seconds']:.1f}"
                    f"{f' (digest thread {digest:.1f})' if digest is not None else ''}"
                    f" proxy {result['proxy_cpu_seconds']:.1f} INN {result['inn_cpu_seconds']:.1f}"
                    f" other {result['other_cpu_seconds']:.1f}; machine {100 * result['machine_cpu_busy_share']:.0f}% busy"
                    f"  peak RSS {result['peak_rss_mib']:.0f} MiB; cache entries {result['cache_entries']}",
                    flush=True,
                )
        # The profiled run is separate, because cProfile slows the digest thread; the timed runs
        # above run without it.
        profile = (
            None
            if args.no_profile
            else run_one(max(counts), proxy, proxy_port, nnrpd, first, last, profile=True)["profile"]
        )
    finally:
        proxy.terminate()
        proxy.wait()
        if not args.keep_inn:
            subprocess.run([str(OPS_INN), "stop", str(inn_dir)], capture_output=True)

    base = next((r for r in runs if r["connections"] == 1), None)
    for run in runs:
        run["speedup"] = round(base["seconds"] / run["seconds"], 2) if base else None
    # The same articles as several ranges, compared with one range at the same connection count.
    for run in range_runs:
        one = next(r for r in runs if r["connections"] == run["connections"])
        run["vs_one_range"] = round(one["seconds"] / run["seconds"], 2)
        print(f"  {run['ranges']} ranges against one range, {run['connections']} connection(s): {run['vs_one_range']}x")
    if profile:
        print("where the digest thread's time goes at the largest connection count (cProfile, by own time):")
        print("\n".join(line for line in profile.splitlines() if line.strip())[:4000])
    checks = {
        f"{n}_connections_speedup_at_least_{x}": next(r["speedup"] >= x for r in runs if r["connections"] == n)
        for n, x in ACCEPTANCE.items()
        if base and n in counts
    }
    largest = max(runs, key=lambda r: r["connections"])["connections"]
    checks[f"peak_rss_under_{MAX_RSS_MIB}_mib"] = all(
        r["peak_rss_mib"] < MAX_RSS_MIB for r in runs + range_runs if r["connections"] == largest
    )
    for run in runs:
        if run["speedup"] is not None:
            print(f"  speedup with {run['connections']}: {run['speedup']}x")
    print(
        json.dumps(
            {
                "articles": args.articles,
                "lines_per_sec_cap": args.lines_per_sec,
                "cores": os.cpu_count(),
                "runs": runs,
                "range_runs": range_runs,
                "post_seconds": args.post_seconds,
                "checks": checks,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
