"""The edge node against the real services: `edge run` installed as the edge image installs it
(a bare virtualenv with only the edge package), gunicorn over HTTPS, Celery workers, INN 2."""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import text

from app.db import session_scope
from edge.nntp import connect
from simnews.generator import Config, generate
from tests.app.factories import make_group, make_node, make_plan
from tests.fixtures.api_server import start_api, stop_api

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "ops" / "Dockerfile.edge"
DOCKERIGNORE = REPO / ".dockerignore"
# Small chunks and batches, so a few thousand articles make several of each.
CHUNK_SIZE = 1000
BATCH_CHUNKS = 3
_names = itertools.count(1)


def dockerfile_steps() -> tuple[str, str, str]:
    """(what the image copies, where to, the pip install command), read from ops/Dockerfile.edge."""
    text = DOCKERFILE.read_text()
    copy = re.search(r"^COPY\s+(\S+)\s+(\S+)\s*$", text, re.M)
    install = re.search(r"^RUN\s+(pip install [^&\n]+?)\s*(?:&&.*)?$", text, re.M)
    assert copy and install, "ops/Dockerfile.edge no longer copies and pip-installs the edge"
    return copy.group(1), copy.group(2), install.group(1)


def copy_build_context(source: Path, target: Path) -> None:
    """`COPY source target` as Docker does it: what .dockerignore excludes stays out."""
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    names = {pattern.removeprefix("**/") for pattern in patterns}
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*names))


@pytest.fixture(scope="session")
def edge_bin(tmp_path_factory) -> Path:
    """The `edge` program in a bare virtualenv, installed exactly as ops/Dockerfile.edge does."""
    root = tmp_path_factory.mktemp("edge-image")
    source, target, install = dockerfile_steps()
    context = root / target.strip("/")
    copy_build_context(REPO / source, context)
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    command = install.split()  # pip install [options] /src/edge
    assert command[-1].rstrip("/") == target.rstrip("/"), "the image installs something else than it copies"
    command[-1] = str(context)
    subprocess.run([env_dir / "bin" / "python", "-m", *command, "-q", "--disable-pip-version-check"],
                   check=True, cwd=root)
    return env_dir / "bin" / "edge"


@pytest.fixture(scope="session")
def edge_api(service_env):
    """The API as in production (gunicorn, HTTPS), with small chunks and batches."""
    directory = tempfile.mkdtemp(prefix="edge-api.")
    server = start_api({**service_env, "CHUNK_SIZE": str(CHUNK_SIZE), "BATCH_CHUNKS": str(BATCH_CHUNKS)}, directory)
    try:
        yield server
    finally:
        stop_api(server)
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Posted:
    group: str
    low: int
    high: int
    kept: set[str]  # message-ids the digest keeps (all but the malware floods)
    dropped: set[str]


def post_articles(inn, group: str, count: int) -> Posted:
    """`count` generated articles posted to a fresh group on INN, with their ground truth."""
    articles = [a for a in generate(count, Config(seed=7, groups=(group,), namespace=group)) if not a.lost]
    assert inn.post(articles) == len(articles)
    with connect(inn.host, inn.reader_port, compress=False) as client:
        info = client.group(group)
    return Posted(group, info.first, info.last,
                  kept={a.message_id for a in articles if not a.truth.is_flood},
                  dropped={a.message_id for a in articles if a.truth.is_flood})


def plan(group: str, spans: list[tuple[int, int]], node_name: str | None = None) -> tuple[str, list[int]]:
    """A node (its token) and a plan of ranges of `group`, in lease order."""
    with session_scope() as s:
        group_row = make_group(s, group)
        _, token = make_node(s, node_name or f"edge-node-{next(_names)}")
        ranges = make_plan(s, group_row, spans)
        return token, [r.id for r in ranges]


def query(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(text(sql), params).all()


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def all_batches_stored(engine) -> bool:
    (row,) = query(engine, "SELECT count(*) FILTER (WHERE state NOT IN ('stored', 'gathered')), count(*)"
                           " FROM seed_batches")
    return row[0] == 0 and row[1] > 0


def stored_message_ids(engine, group: str) -> list[str]:
    rows = query(engine, "SELECT f.message_id FROM fragments f JOIN groups g ON g.id = f.group_id"
                         " WHERE g.name = :group", group=group)
    return [r[0] for r in rows]


@dataclass
class EdgeProcess:
    """`edge run` as a subprocess; its JSON log lines are collected as they come."""

    proc: subprocess.Popen
    events: list[dict] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.other_lines.append(line.rstrip("\n"))

    def wait(self, timeout: float = 120) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in list(self.events):
                if predicate(event):
                    return event
            if self.proc.poll() is not None:
                self._reader.join(5)
                break
            time.sleep(0.05)
        raise AssertionError(f"no such event; log: {self.log()}")

    def named(self, name: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == name]

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.proc.send_signal(signum)

    def log(self) -> str:
        return "\n".join([json.dumps(e) for e in self.events] + self.other_lines)[-6000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def run_edge(edge_bin, tmp_path):
    """Starts `edge run` with the given environment (JSON log on stderr); killed at the end."""
    started: list[EdgeProcess] = []

    def start(env: dict[str, str], *args: str) -> EdgeProcess:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
        proc = subprocess.Popen([str(edge_bin), "run", "--progress", "json", *args], env={**base, **env},
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        process = EdgeProcess(proc)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
