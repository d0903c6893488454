"""The edge node against the real services: `edge run` installed as the edge image installs it
(a bare virtualenv with only the edge package), gunicorn over HTTPS, Celery workers, INN 2."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.db import session_scope
from edge.digest.nntp import connect
from simnews.generator import Config, generate
from tests.app.factories import make_group, make_node, make_plan
from tests.fixtures.api_server import start_api, stop_api
from tests.fixtures.edge_process import EdgeProcess, start_edge
from tests.fixtures.queries import query

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "ops" / "Dockerfile.edge"
DOCKERIGNORE = REPO / ".dockerignore"
# Small chunks and batches, so a few thousand articles make several of each.
CHUNK_SIZE = 1000
BATCH_CHUNKS = 3
_names = itertools.count(1)


def dockerfile_steps() -> list[tuple[str, ...]]:
    """The build stage's steps that make the edge's virtualenv, in order, read from
    ops/Dockerfile.edge: ("copy", source, target) and ("pip", the pip install command)."""
    text = DOCKERFILE.read_text()
    build = re.search(r"^FROM \S+ AS build$(.*?)^FROM ", text, re.M | re.S)
    assert build, "ops/Dockerfile.edge has no build stage"
    steps: list[tuple[str, ...]] = []
    for line in build.group(1).splitlines():
        if copy := re.fullmatch(r"COPY\s+(\S+)\s+(\S+)\s*", line):
            steps.append(("copy", copy.group(1), copy.group(2)))
        elif install := re.fullmatch(r"RUN\s+(pip install [^&\\]+?)\s*", line):
            steps.append(("pip", install.group(1)))
    assert [kind for kind, *_ in steps].count("pip") >= 1 and any(
        kind == "copy" and source.rstrip("/") == "edge" for kind, source, *_ in steps
    ), "ops/Dockerfile.edge no longer copies and pip-installs the edge"
    return steps


def copy_build_context(source: Path, target: Path) -> None:
    """`COPY source target` as Docker does it: what .dockerignore excludes stays out."""
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    names = {pattern.removeprefix("**/") for pattern in patterns}
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*names))


@pytest.fixture(scope="session")
def edge_bin(tmp_path_factory) -> Path:
    """The `edge` program in a bare virtualenv, installed exactly as ops/Dockerfile.edge does: its
    build stage's copies and pip installs replayed in order, the image's paths under a directory."""
    root = tmp_path_factory.mktemp("edge-image")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    for kind, *step in dockerfile_steps():
        if kind == "copy":
            source, target = step
            destination = root / target.strip("/")
            if (REPO / source).is_file() and target.endswith("/"):
                destination /= Path(source).name  # COPY file dir/: into the directory
            copy_build_context(REPO / source, destination)
            continue
        command = [argument.strip("'\"") for argument in step[0].split()]
        # The image's absolute paths (/src/...) are this directory's.
        command = [str(root) + argument if argument.startswith("/") else argument for argument in command]
        subprocess.run(
            [env_dir / "bin" / "python", "-m", *command, "-q", "--disable-pip-version-check"], check=True, cwd=root
        )
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
    return Posted(
        group,
        info.first,
        info.last,
        kept={a.message_id for a in articles if not a.truth.is_flood},
        dropped={a.message_id for a in articles if a.truth.is_flood},
    )


def plan(group: str, spans: list[tuple[int, int]], node_name: str | None = None) -> tuple[str, list[int]]:
    """A node (its token) and a plan of ranges of `group`, in lease order."""
    with session_scope() as s:
        group_row = make_group(s, group)
        _, token = make_node(s, node_name or f"edge-node-{next(_names)}")
        ranges = make_plan(s, group_row, spans)
        return token, [r.id for r in ranges]


def all_batches_stored(engine) -> bool:
    (row,) = query(
        engine, "SELECT count(*) FILTER (WHERE state NOT IN ('stored', 'joined')), count(*) FROM seed_batches"
    )
    return row[0] == 0 and row[1] > 0


def stored_message_ids(engine, group: str) -> list[str]:
    rows = query(
        engine,
        "SELECT f.message_id FROM fragments_with_ids f JOIN groups g ON g.id = f.group_id WHERE g.name = :group",
        group=group,
    )
    return [r[0] for r in rows]


@pytest.fixture
def run_edge(edge_bin, tmp_path):
    """Starts `edge run` with the given environment (JSON log on stderr); killed at the end."""
    started: list[EdgeProcess] = []

    def start(env: dict[str, str], *args: str) -> EdgeProcess:
        process = start_edge(edge_bin, env, *args, home=tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
