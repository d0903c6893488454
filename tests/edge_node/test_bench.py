"""bench/edge.py runs end to end on a small group and ends with its figures as JSON (speed is not
asserted here: the benchmark's own run is)."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "edge.py"
pytestmark = pytest.mark.services


def test_bench_prints_its_figures_last():
    inn_dir = tempfile.mkdtemp(prefix="eb.", dir="/tmp")
    shutil.rmtree(inn_dir)  # the benchmark makes its INN there
    try:
        result = subprocess.run(
            [
                sys.executable,
                str(BENCH),
                "--articles",
                "3000",
                "--connections",
                "1,2",
                "--ranges",
                "3",
                "--leases",
                "2",
                "--post-seconds",
                "0.01",
                "--inn-dir",
                inn_dir,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        subprocess.run([str(BENCH.parents[1] / "ops" / "inn"), "stop", inn_dir], capture_output=True)
        shutil.rmtree(inn_dir, ignore_errors=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("command: ") and "bench/edge.py" in lines[0]
    figures = json.loads(lines[-1])
    assert [run["connections"] for run in figures["runs"]] == [1, 2]
    assert all(run["lines"] == 3000 and run["batches"] == 1 and run["peak_rss_mib"] > 0 for run in figures["runs"])
    assert figures["runs"][0]["speedup"] == 1.0
    # The same articles as three ranges, two held at once: every line is digested once, and there
    # is one batch for each range.
    assert [(run["connections"], run["ranges"]) for run in figures["range_runs"]] == [(1, 3), (2, 3)]
    assert all(
        run["lines"] == 3000 and run["batches"] == 3 and run["vs_one_range"] > 0 for run in figures["range_runs"]
    )
    assert "where the digest thread's time goes" in result.stdout
