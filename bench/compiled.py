"""What each compiled part gains over its Python twin, in the benchmarks its code runs in.

    .venv/bin/python bench/compiled.py [--lines 300000] [--articles 400000] [--group alt.binaries.e-book.french]
                                       [--pairs 2] [--workdir /tmp/compiled-bench]

Each part is timed where it works: edge/digest/_overview.c in bench/digest.py (lines digested a
second, on one core), app/services/_copyrows.c and app/services/_msgcolumns.c in bench/store.py
(the seconds a store of --articles articles takes, and the CPU seconds of the process storing, on
a private PostgreSQL made here with ops/pg, fsync off, migrated). Each bench runs in new processes with every compiled part, then with
one part switched to its twin (a finder first on sys.meta_path hides that module, and with
SEED_IMPL unset its twin serves: what an install without it would run; without the digest's
part every twin runs, as IMPL follows it), then with every twin (SEED_IMPL=python); --pairs times each, alternating, and the best counts. The last line printed is
JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.catalog import Cluster  # noqa: E402
from simnews.ports import free_ports  # noqa: E402

PYTHON = str(REPO / ".venv" / "bin" / "python")
PARTS = ("edge.digest._overview", "app.services._copyrows", "app.services._msgcolumns")
# The bench each part works in, and the figures read from its last line (and whether more is
# better): the digest's rate on one core; the store's seconds and its process' CPU seconds (a
# part that saves the worker's CPU pays even where PostgreSQL sets the store's pace).
BENCH_OF = {"edge.digest._overview": "digest", "app.services._copyrows": "store", "app.services._msgcolumns": "store"}
FIGURES = {"digest": [("lines_per_second", True)], "store": [("store_seconds", False), ("store_cpu_seconds", False)]}

# Put first on sys.meta_path at start-up (sitecustomize, found on PYTHONPATH): the module named by
# SEED_BENCH_HIDE is not found, so its twin serves.
HIDING = """
import os, sys
HIDDEN = os.environ.get("SEED_BENCH_HIDE")
class Hidden:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
if HIDDEN:
    sys.meta_path.insert(0, Hidden)
"""


def say(message: str) -> None:
    print(f"compiled: {message}", file=sys.stderr, flush=True)


def run_bench(bench: str, arguments: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [PYTHON, str(REPO / "bench" / f"{bench}.py"), *arguments], cwd=REPO, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"bench/{bench}.py failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def variants() -> list[tuple[str, dict[str, str]]]:
    """(name, environment changes): every part in C, each part alone as its twin, every twin."""
    chosen = [("c", {"SEED_IMPL": "c"})]
    chosen += [(f"twin:{part}", {"SEED_BENCH_HIDE": part}) for part in PARTS]
    return chosen + [("python", {"SEED_IMPL": "python"})]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=300_000, help="overview lines for bench/digest.py")
    parser.add_argument("--articles", type=int, default=400_000, help="articles for bench/store.py")
    parser.add_argument("--group", default="alt.binaries.e-book.french", help="the group both benches use")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each variant, alternating; the best counts")
    parser.add_argument("--workdir", default="/tmp/compiled-bench")
    args = parser.parse_args(argv)
    if args.lines < 1000 or args.articles < 1000 or args.pairs < 1:
        parser.error("--lines and --articles must be at least 1000, --pairs at least 1")
    print(
        f"command: .venv/bin/python bench/compiled.py --lines {args.lines} --articles {args.articles}"
        f" --group {args.group} --pairs {args.pairs}"
    )
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    (workdir / "sitecustomize.py").write_text(HIDING)
    (port,) = free_ports(1)
    cluster = Cluster(workdir / "pg", port)  # bench/catalog.py's: ops/pg, the database seed migrated
    cluster.create(durable=False)
    try:
        base = {key: value for key, value in os.environ.items() if key not in ("SEED_IMPL", "SEED_BENCH_HIDE")}
        base.update(PYTHONPATH=str(workdir) + os.pathsep + str(REPO), DATABASE_URL=cluster.url)
        arguments = {
            "digest": ["--lines", str(args.lines), "--group", args.group, "--repeat", "3"],
            "store": ["--articles", str(args.articles), "--group", args.group, "--rounds", "3"],
        }
        # Each variant runs what it says: the parts each loads, asked in a process of its own.
        ask = "import json; from edge.digest.compiled import load; print(json.dumps([load(p) is not None for p in %r]))"
        for name, changes in variants():
            done = subprocess.run(
                [PYTHON, "-c", ask % (PARTS,)],
                cwd=REPO,
                env={**base, **changes},
                capture_output=True,
                text=True,
                check=True,
            )
            # Without the digest's part IMPL is "python" (edge.digest.compiled): every twin runs, and
            # only the digest bench, where that part alone works, is read for it.
            everything_twin = name in ("python", f"twin:{PARTS[0]}")
            wanted = [not everything_twin and name != f"twin:{part}" for part in PARTS]
            if json.loads(done.stdout) != wanted:
                raise SystemExit(f"{name} loads {done.stdout.strip()}, not {wanted}")
        best: dict[str, dict[str, float]] = {}
        for pair in range(args.pairs):
            for name, changes in variants():
                for bench, figures in FIGURES.items():
                    result = run_bench(bench, arguments[bench], {**base, **changes})
                    for figure, more_is_better in figures:
                        value = result[figure]
                        kept = best.setdefault(name, {}).get(figure)
                        if kept is None or (value > kept if more_is_better else value < kept):
                            best[name][figure] = value
                        say(f"pair {pair + 1}, {name}: {bench} {figure} {value}")
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    gains: dict[str, dict[str, float]] = {}
    for part in PARTS:
        bench = BENCH_OF[part]
        for figure, more_is_better in FIGURES[bench]:
            with_c, with_twin = best["c"][figure], best[f"twin:{part}"][figure]
            gain = round(with_c / with_twin if more_is_better else with_twin / with_c, 2)
            gains.setdefault(part, {})[figure] = gain
            print(f"{part}: {bench} {figure} {with_c} with it, {with_twin} with its twin: {gain}x")
    print(
        json.dumps(
            {
                "group": args.group,
                "lines": args.lines,
                "articles": args.articles,
                "pairs": args.pairs,
                "best": best,
                "gain": gains,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
