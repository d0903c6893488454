"""bench/inspections.py makes and posts a release of each kind to its own INN, has an edge node
index them and another inspect every post the join queued, and ends with its figures as JSON
(speed is not asserted here: the benchmark's own run is). Here, not in tests/edge_node: ops/test
runs that directory twice (the second time with the Python twins), and this would add nothing
the second time."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "inspections.py"
pytestmark = pytest.mark.services


def test_bench_inspects_every_post_queued_and_prints_its_figures_last():
    workdir = tempfile.mkdtemp(prefix="inspections-bench-test.")
    try:
        result = subprocess.run(
            [sys.executable, str(BENCH), "--releases", "4", "--batch", "3", "--workdir", workdir],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "command: .venv/bin/python bench/inspections.py --releases 4 --batch 3 --seed 1"
    figures = json.loads(lines[-1])
    assert figures["kinds"] == {"named": 1, "hashed": 1, "obfuscated": 1, "7z": 1}
    assert figures["articles_posted"] > 20 and figures["bytes_posted"] > 5_000_000
    # Every post queued was inspected, from INN's bodies (none missing), a few leases of 3.
    queued = sum(figures["inspections_queued"].values())
    assert figures["inspections_done"] == queued >= 4 and figures["inspections_failed"] == 0
    assert figures["leases"] >= 2 and figures["node_counts"]["inspected"] == queued
    assert figures["articles_missing"] == 0 and figures["articles_read_per_post"] >= 1
    assert 0 < figures["bytes_read_p50"] <= figures["bytes_read_max"] <= 2 * 1024 * 1024
    assert figures["bytes_read"] == figures["node_counts"]["bytes_read"]
    assert figures["posts_per_second"] > 0 and figures["seconds"] > 0
    assert figures["dc_cpu_ms_per_inspection"] > 0 and set(figures["cpu_ms_per_inspection"]) == {
        "api",
        "workers",
        "postgresql",
        "inn",
        "edge",
    }
    # What the inspections found is what was posted: the hashed post's .nfo tells its name and
    # IMDb id, and the obfuscated release's files come together in its par2 index's post.
    assert figures["found"]["names_told"] >= 1 and figures["found"]["imdb"] >= 1
    assert figures["posts_after_inspections"] < figures["posts_indexed"]
    assert set(figures["goals_met"]) == {"posts_per_second", "bytes_read_per_post"}
    assert "posts/s by one node" in result.stdout and "goals: " in result.stdout
