"""The benchmarks' data center runs its Celery workers as a deployment does: bench/e2e.py's
WORKERS (which bench/fleet.py and bench/inspections.py start through its Services) against
ops/run's and compose.yaml's worker commands, their queues, processes and CPU priority."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.e2e import WORKERS  # noqa: E402

# The kernel's CFS weight of a niceness (kernel/sched/core.c, sched_prio_to_weight): what a
# container's cpu_shares gives it against the default 1,024 where ops/run gives a niceness.
WEIGHT = {0: 1024, 10: 110}


def _layout(argv: list[str], niceness: int) -> tuple[str, str, int, int]:
    """(node name, queues, processes, niceness) of a `celery ... worker` command."""
    worker = argv[argv.index("worker") :]
    node = worker[worker.index("-n") + 1].split("@", 1)[0]
    return node, worker[worker.index("-Q") + 1], int(worker[worker.index("-c") + 1]), niceness


def test_the_benchmarks_start_the_workers_ops_run_starts():
    lines = re.findall(r"^start worker-\S+ (.*celery -A app\.worker worker .*)$", (REPO / "ops/run").read_text(), re.M)
    assert len(lines) == 2, lines
    started = []
    for line in lines:
        argv = line.split()
        niceness = int(argv[2]) if argv[:2] == ["nice", "-n"] else 0
        started.append(_layout(argv, niceness))
    assert sorted(started) == sorted(WORKERS)
    # The store yields to the API: the ingest worker runs at a lower priority than the others.
    assert {node: nice for node, _, _, nice in WORKERS} == {"ingest": 10, "control": 0}


def test_the_benchmarks_start_the_workers_compose_starts():
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    workers = [s for s in services.values() if s.get("command", [])[:4] == ["celery", "-A", "app.worker", "worker"]]
    assert len(workers) == 2, workers
    niceness = {weight: nice for nice, weight in WEIGHT.items()}
    assert sorted(_layout(s["command"], niceness[s.get("cpu_shares", 1024)]) for s in workers) == sorted(WORKERS)
    # The API's containers keep the default weight.
    assert "cpu_shares" not in services["api"]
