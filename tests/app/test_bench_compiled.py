"""bench/compiled.py times each compiled part against its twin in the bench its code works in, and
ends with its figures as JSON; here on tiny inputs, to show it runs, each variant runs what it
says (the bench checks it) and every gain is read (speed is not asserted: benchmarks show it)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = {"edge.digest._overview", "app.services._copyrows", "app.services._msgcolumns"}
# It starts a PostgreSQL of its own (ops/pg).
pytestmark = pytest.mark.services


def test_bench_times_each_part_against_its_twin_and_prints_its_figures_last():
    workdir = tempfile.mkdtemp(prefix="compiled-bench-test.")
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "compiled.py"),
            "--lines",
            "2000",
            "--articles",
            "2000",
            "--pairs",
            "1",
            "--workdir",
            workdir,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("command: .venv/bin/python bench/compiled.py --lines 2000 --articles 2000")
    figures = json.loads(lines[-1])
    assert {part: set(gains) for part, gains in figures["gain"].items()} == {
        "edge.digest._overview": {"lines_per_second"},
        "app.services._copyrows": {"store_seconds", "store_cpu_seconds"},
        "app.services._msgcolumns": {"store_seconds", "store_cpu_seconds"},
    }
    assert all(gain > 0 for gains in figures["gain"].values() for gain in gains.values())
    assert set(figures["best"]) == {"c", "python"} | {f"twin:{part}" for part in PARTS}
    assert all(
        set(run) == {"lines_per_second", "store_seconds", "store_cpu_seconds"} and all(v > 0 for v in run.values())
        for run in figures["best"].values()
    )
    assert not Path(workdir).exists()  # its PostgreSQL stopped and removed
