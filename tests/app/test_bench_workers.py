"""The benchmarks' data center runs its Celery workers as a deployment does: bench/e2e.py's
WORKERS (which bench/fleet.py and bench/inspections.py start through its Services) against
ops/run's and compose.yaml's worker commands."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.e2e import WORKERS  # noqa: E402


def _layout(argv: list[str]) -> tuple[str, str, int]:
    """(node name, queues, processes) of a `celery ... worker` command."""
    node = argv[argv.index("-n") + 1].split("@", 1)[0]
    return node, argv[argv.index("-Q") + 1], int(argv[argv.index("-c") + 1])


def test_the_benchmarks_start_the_workers_ops_run_starts():
    lines = re.findall(r"^start worker-\S+ (.*celery -A app\.worker worker .*)$", (REPO / "ops/run").read_text(), re.M)
    assert len(lines) == 2, lines
    assert sorted(_layout(line.split()) for line in lines) == sorted(WORKERS)


def test_the_benchmarks_start_the_workers_compose_starts():
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    commands = [
        s["command"] for s in services.values() if s.get("command", [])[:4] == ["celery", "-A", "app.worker", "worker"]
    ]
    assert len(commands) == 2, commands
    assert sorted(_layout(command) for command in commands) == sorted(WORKERS)
