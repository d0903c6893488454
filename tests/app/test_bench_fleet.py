"""bench/fleet.py runs fleets of simulated edge nodes against one coordinator and ends with its
figures as JSON; here two tiny fleets, to show it runs and its ground truth holds (speed is not
asserted here: the benchmark's own run is)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "fleet.py"
pytestmark = pytest.mark.services


def test_bench_runs_each_fleet_and_its_ground_truth_is_exact():
    workdir = tempfile.mkdtemp(prefix="fleet-bench-test.")
    try:
        result = subprocess.run(
            [
                sys.executable,
                str(BENCH),
                "--nodes",
                "2,5",
                "--articles",
                "12000",
                "--range-size",
                "1500",
                "--chunk-size",
                "500",
                "--batch-chunks",
                "1",
                "--ramp",
                "0.2",
                "--pace",
                "500000",
                "--workdir",
                workdir,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            # A tight backlog: the nodes may well be told to wait (429 busy).
            env={**os.environ, "STORE_BACKLOG": "4"},
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("command: .venv/bin/python bench/fleet.py --nodes 2,5 --articles 12000")
    assert "--ramp 0.2 --pace 500000" in lines[0]
    figures = json.loads(lines[-1])
    assert [run["nodes"] for run in figures["runs"]] == [2, 5]
    for run in figures["runs"]:
        truth = run["ground_truth"]
        assert truth["exact"] and truth["ranges"] == truth["ranges_done"] == truth["ranges_leased"] >= 7
        assert truth["ranges_leased_twice"] == 0 and run["errors"] == []
        assert truth["articles_kept"] == truth["fragments_stored"] == truth["fragments_distinct"] > 10_000
        assert run["lease"]["count"] == truth["ranges"] and run["accept"]["count"] == run["batches"] >= 24
        assert run["lease_204"]["count"] == run["nodes"]  # each node asked until nothing was left
        # Busy answers are timed apart from the answers that took the call, and waited out.
        assert run["busy_answers"] == run["lease_busy"]["count"] + run["accept_busy"]["count"]
        assert (run["node_wait_seconds"] >= 2 * run["busy_answers"]) and run["retried"] == {}
        assert (run["ramp_seconds"], run["node_pace"]) == (0.2, 500000)
        assert 0 < run["lease"]["p50_ms"] <= run["lease"]["p99_ms"] <= run["lease"]["max_ms"]
        # The same answers as the API timed them (its access log), each one. Their times are not
        # compared with the nodes': gunicorn stops its clock only once the answer is written and
        # its thread has the interpreter's lock back, which can be after the node has read it.
        for kind in ("lease", "lease_204", "accept", "done", "lease_busy", "accept_busy"):
            in_api = run["in_api"].get(kind, {"count": 0})
            assert in_api["count"] == run[kind]["count"], (kind, run["in_api"])
            if in_api["count"]:
                assert 0 < in_api["p50_ms"] <= in_api["p99_ms"] <= in_api["max_ms"], (kind, in_api)
        assert run["articles_per_second"] > 0 and run["dc_us_per_article"] > 0
        assert set(run["cores_busy"]) == {"api", "workers", "postgresql", "inn"}
    assert set(figures["goals_met"]) == {"lease_p99_ms", "accept_p99_ms"}
