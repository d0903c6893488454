"""The edge node's image, built from ops/Dockerfile.edge with podman and run against the test
stack as an operator runs it: only COORDINATOR_URL, NODE_TOKEN and the coordinator's CA file
(mounted read-only, as compose.edge.yaml mounts its secret). It leases, posts batches that are
stored exactly, and on `podman stop` gives its ranges back and exits 143 within the grace period;
it runs as a non-root user, and nothing of the data center is inside.

The image is built once per session FROM a Debian base made locally (tests/fixtures/podman.py);
its layers are cached, so a session with no change to the edge rebuilds nothing."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import GROUPS
from tests.e2e.truth import check_ground_truth
from tests.fixtures.edge_process import EdgeProcess
from tests.fixtures.podman import build_image, in_image, podman, remove_container, run_command
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services
IMAGE = "localhost/seed-edge:test"
CA_INSIDE = "/run/secrets/coordinator_ca"
GRACE = 20  # seconds `podman stop` waits before SIGKILL, as compose.edge.yaml's stop_grace_period
SLOW = 2_000  # overview lines per second and connection while the node must be mid-range
# What only the data center has: none of it may be importable in the edge's image.
DATA_CENTER_MODULES = (
    "psycopg",
    "sqlalchemy",
    "celery",
    "kombu",
    "redis",
    "flask",
    "alembic",
    "gunicorn",
    "flower",
    "prometheus_client",
    "app",
)
_names = itertools.count(1)


@pytest.fixture(scope="session")
def edge_image() -> str:
    return build_image("ops/Dockerfile.edge", IMAGE)


class EdgeContainer(EdgeProcess):
    """`edge run --progress json` in a container: its log lines are read from the attached `podman
    run`, which exits with the container's exit code."""

    container: str = ""

    def stop(self, grace: int = GRACE) -> float:
        """`podman stop`: SIGTERM, then SIGKILL after `grace` seconds; returns how long it took."""
        started = time.monotonic()
        podman("stop", "--time", str(grace), self.container, timeout=grace + 30)
        return time.monotonic() - started

    def pid(self) -> int:
        """The node's process as the host sees it."""
        return int(podman("inspect", "--format", "{{.State.Pid}}", self.container).stdout)

    def kill(self) -> None:
        remove_container(self.container)
        super().kill()


@pytest.fixture
def containers(edge_image):
    """Starts edge containers (removed at the end, whatever happened)."""
    started: list[EdgeContainer] = []

    def start(env: dict[str, str], cafile: str, *args: str) -> EdgeContainer:
        name = f"seed-edge-test-{os.getpid()}-{next(_names)}"
        if os.environ.get("SEED_IMPL"):  # the suite's second run, with the Python twins
            env = {**env, "SEED_IMPL": os.environ["SEED_IMPL"]}
        command = run_command(edge_image, name, env, {cafile: CA_INSIDE}, "run", "--progress", "json", *args)
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        container = EdgeContainer(proc, name)
        container.container = name
        started.append(container)
        return container

    yield start
    for container in started:
        container.kill()


def container_env(dc, token: str, nntp_port: int) -> dict[str, str]:
    """What the node is given: the settings of the e2e nodes, with the CA file's path inside."""
    env = dc.node_env(token, nntp_port)
    env["COORDINATOR_CAFILE"] = CA_INSIDE
    return env


def test_the_image_holds_the_edge_and_nothing_of_the_data_center(edge_image):
    found = json.loads(
        in_image(
            edge_image,
            "python3",
            "-c",
            "import importlib.util, json, sys; print(json.dumps({m: importlib.util.find_spec(m)"
            " is not None for m in sys.argv[1:]}))",
            "edge",
            *DATA_CENTER_MODULES,
        )
    )
    assert found == {"edge": True, **dict.fromkeys(DATA_CENTER_MODULES, False)}
    installed = json.loads(
        in_image(
            edge_image,
            "python3",
            "-c",
            "import importlib.metadata as m, json; print(json.dumps(sorted("
            "d.metadata['Name'].lower() for d in m.distributions())))",
        )
    )
    assert "seed-edge" in installed and not {
        "psycopg",
        "psycopg-binary",
        "sqlalchemy",
        "celery",
        "kombu",
        "redis",
        "flask",
        "usenet-seed",
    } & set(installed), installed
    # Built whole: the overview blocks' compiled fast path and ISA-L's gzip (the `fast` extra).
    assert in_image(
        edge_image,
        "python3",
        "-c",
        "from edge.digest.compiled import IMPL; from edge.digest.deflate import ENGINE; print(IMPL, ENGINE)",
    ).split() == ["c", "isal"]
    config = json.loads(podman("image", "inspect", "--format", "{{json .Config}}", edge_image).stdout)
    assert config["User"] == "edge" and config["Entrypoint"] == ["edge"], config


def test_the_container_stores_the_ground_truth_and_gives_its_ranges_back_on_podman_stop(dc, news, containers):
    with news.provider(lines_per_sec=SLOW) as proxy:
        token = dc.prepare(proxy, nodes=("edge-container",))["edge-container"]
        node = containers(container_env(dc, token, proxy.port), dc.api.cafile)
        node.wait_for(lambda e: e["event"] == "batch", timeout=120)
        # A non-root user runs the node: the container's process as the host sees it.
        status = Path(f"/proc/{node.pid()}/status").read_text()
        uid = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        assert uid[0] != "0" and uid[0] == uid[1], status
        took = node.stop()
        assert node.wait(30) == 143, node.log()
        assert took < GRACE, f"the node took {took:.1f} s to stop (SIGKILL comes after {GRACE} s)"
        released = {e["range"]: e["next_id"] for e in node.named("release")}
        firsts = {r.id: r.first_id for r in dc.rows("SELECT id, first_id FROM seed_ranges")}
        assert released and any(n > firsts[r] for r, n in released.items()), node.log()
        assert dc.value("SELECT count(*) FROM seed_ranges WHERE status = 'leased'") == 0

        # The same node again, at full speed, until the plan is done.
        proxy.lines_per_sec = None
        again = containers(container_env(dc, token, proxy.port), dc.api.cafile, "--exit-when-idle")
        assert again.wait(180) == 0, again.log()
    for range_id, next_id in released.items():
        (lease,) = [e for e in again.named("lease") if e["range"] == range_id]
        assert lease["next_id"] == next_id, "a range given back did not resume at its next_id"
    wait_until(dc.ranges_done, 30, "every range done")
    dc.wait_finished()
    reports = check_ground_truth(dc.engine, news.truths())
    assert set(reports) == set(GROUPS)
