"""compose.yaml (the data center) and compose.edge.yaml (an edge node) against the Compose
specification's JSON schema, and what they must say to deploy: no Docker engine runs here (the
images themselves are built and run with podman in tests/e2e/test_edge_image.py).

Two schemas, both offline: the one Debian's docker-compose package ships (ops/setup installs it)
through jsonschema, and the current specification's that check-jsonschema ships
(`--builtin-schema vendor.compose-spec`, as ops/test runs it). Debian's docker-compose also
interpolates the files (`config`), which checks the required variables."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_SPEC = Path("/usr/lib/python3/dist-packages/compose/config/compose_spec.json")
FILES = ("compose.yaml", "compose.edge.yaml")
DATA_CENTER_SECRETS = {"POSTGRES_PASSWORD": "s3cret", "FLOWER_BASIC_AUTH": "admin:s3cret"}
EDGE_SECRETS = {"COORDINATOR_URL": "https://seed.example.net:8443", "NODE_TOKEN": "t0ken"}
WORKERS = ("worker-ingest", "worker-control")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft201909Validator:
    assert COMPOSE_SPEC.is_file(), f"{COMPOSE_SPEC} missing: run ops/setup (it installs docker-compose)"
    schema = json.loads(COMPOSE_SPEC.read_text())
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


def load(name: str) -> dict:
    return yaml.safe_load((REPO / name).read_text())


@pytest.fixture(scope="module")
def compose() -> dict:
    return load("compose.yaml")


@pytest.fixture(scope="module")
def edge() -> dict:
    return load("compose.edge.yaml")["services"]["edge"]


def compose_config(name: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """`docker-compose config` of one file with only `env` set (an empty env file: a developer's
    .env must not decide the test)."""
    empty = tmp_path / "empty.env"
    empty.write_text("")
    return subprocess.run(
        ["docker-compose", "--env-file", str(empty), "-f", str(REPO / name), "config"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("name", FILES)
def test_the_file_follows_the_compose_specification(validator, name):
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(load(name))]
    assert errors == []


def test_the_files_follow_the_current_compose_specification():
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", *FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_mistakes(validator, compose, tmp_path):
    api = compose["services"]["api"]
    broken = {**compose, "services": {**compose["services"], "api": {**api, "stop_grace_periode": "30s"}}}
    assert any("stop_grace_periode" in e.message for e in validator.iter_errors(broken))
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(broken))
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "stop_grace_periode" in result.stdout + result.stderr


@pytest.mark.parametrize("name, secrets", [("compose.yaml", DATA_CENTER_SECRETS), ("compose.edge.yaml", EDGE_SECRETS)])
def test_each_required_secret_stops_compose_with_its_message_when_missing(name, secrets, tmp_path):
    assert compose_config(name, secrets, tmp_path).returncode == 0
    for missing in secrets:
        result = compose_config(name, {k: v for k, v in secrets.items() if k != missing}, tmp_path)
        assert result.returncode != 0 and f"set {missing}" in result.stderr, (missing, result.stderr)
        # Empty is missing too (`:?`): a blank line in .env must not start a service without it.
        result = compose_config(name, {**secrets, missing: ""}, tmp_path)
        assert result.returncode != 0 and f"set {missing}" in result.stderr, (missing, result.stderr)


def test_no_secret_has_a_default():
    for name in FILES:
        text = (REPO / name).read_text()
        assert "change-me" not in text
        for variable in ("POSTGRES_PASSWORD", "FLOWER_BASIC_AUTH", "NODE_TOKEN", "COORDINATOR_URL"):
            assert not re.search(rf"\${{{variable}:?-", text), f"{name}: {variable} has a default"


def test_the_api_and_workers_start_after_the_migration_and_the_services_they_need(compose):
    services = compose["services"]
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    assert services["migrate"]["restart"] == "no"
    for name in ("api", *WORKERS, "beat"):
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }, name


def test_every_service_has_a_health_check(compose, edge):
    services = {**compose["services"], "edge": edge}
    for name, service in services.items():
        if name == "migrate":  # runs once; the others wait for it to complete
            continue
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), name
    checks = {name: " ".join(service.get("healthcheck", {}).get("test", [])) for name, service in services.items()}
    assert "https://127.0.0.1:8443/readyz" in checks["api"]
    assert "pg_isready" in checks["postgres"] and "redis-cli ping" in checks["redis"]
    for worker, node in zip(WORKERS, ("ingest", "control")):
        # The ping goes to the worker's own node name, as its command names it.
        assert f"-n {node}@%h" in " ".join(services[worker]["command"])
        assert "inspect ping" in checks[worker] and f"-d {node}@$${{HOSTNAME}}" in checks[worker], checks[worker]
    assert "celerybeat-schedule" in checks["beat"] and "-s /tmp/celerybeat-schedule" in " ".join(
        services["beat"]["command"]
    )
    assert "/healthcheck" in checks["flower"]
    assert "/livez" in checks["edge"] and "COORDINATOR_CAFILE" in checks["edge"]


def test_images_are_pinned_to_exact_versions(compose, edge):
    for name in ("postgres", "redis"):
        image = compose["services"][name]["image"]
        assert re.fullmatch(rf"{name}:\d+\.\d+(\.\d+)?-[a-z]+", image), image
    for service in (compose["services"]["api"], edge):
        assert re.fullmatch(r"usenet-seed/[a-z]+:\d+\.\d+\.\d+", service["image"]), service["image"]
    for dockerfile in ("ops/Dockerfile.edge", "ops/Dockerfile.datacenter"):
        text = (REPO / dockerfile).read_text()
        # The base is a build argument, the public image by default, at an exact version.
        assert re.search(r"^ARG BASE=python:3\.11\.\d+-slim-bookworm$", text, re.M), dockerfile
        assert re.findall(r"^FROM (\S+)", text, re.M) and all(
            base == "$BASE" for base in re.findall(r"^FROM (\S+)", text, re.M)
        ), dockerfile


def test_the_api_has_time_to_finish_its_requests_when_stopped(compose):
    graceful = int(re.search(r"^graceful_timeout = (\d+)$", (REPO / "ops/gunicorn.conf.py").read_text(), re.M)[1])
    grace = int(compose["services"]["api"]["stop_grace_period"].removesuffix("s"))
    assert graceful < grace <= graceful + 10


def test_flower_asks_for_a_login_and_listens_on_the_loopback_only(compose):
    flower = compose["services"]["flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")
    assert flower["ports"] == ["${FLOWER_PUBLISH:-127.0.0.1:5555}:5555"]


def test_the_api_and_workers_share_one_metrics_directory_emptied_at_start(compose):
    services = compose["services"]
    for name in ("api", *WORKERS):
        directory = services[name]["environment"]["PROMETHEUS_MULTIPROC_DIR"]
        assert f"metrics:{directory}" in services[name]["volumes"], name
    # In memory: the directory is empty whenever the data center starts.
    assert compose["volumes"]["metrics"]["driver_opts"]["type"] == "tmpfs"


def test_the_edge_needs_only_its_url_token_and_ca_file(edge):
    assert edge["build"]["dockerfile"] == "ops/Dockerfile.edge"
    assert {"COORDINATOR_URL", "NODE_TOKEN", "COORDINATOR_CAFILE"} <= set(edge["environment"])
    # The CA file is a secret, mounted where the node is told to read it.
    (secret,) = edge["secrets"]
    assert edge["environment"]["COORDINATOR_CAFILE"] == f"/run/secrets/{secret}"
    assert load("compose.edge.yaml")["secrets"][secret]["file"].startswith("${COORDINATOR_CA_FILE:-")
    # The node gives its ranges back on SIGTERM: compose must wait for that before killing it.
    assert int(edge["stop_grace_period"].rstrip("s")) >= 10
    assert not any(key in edge for key in ("depends_on", "links")), "the edge needs nothing of the data center"
    assert any(volume.endswith(":/home/edge/spool") for volume in edge["volumes"])


def test_the_data_center_image_installs_the_lock(compose):
    dockerfile = (REPO / "ops/Dockerfile.datacenter").read_text()
    assert "pip install --no-cache-dir --require-hashes -r ops/requirements-datacenter.txt" in dockerfile
    assert "pip install --no-cache-dir --no-deps -e ./edge -e ." in dockerfile


def requirement_name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement)[0].lower().replace("_", "-")


# Each lock (made by ops/lock from its .in file) and what it must pin: (pyproject, extras) pairs.
LOCKS = {
    "datacenter": (("pyproject.toml", ()), ("edge/pyproject.toml", ("fast",))),
    "edge": (("edge/pyproject.toml", ("fast",)),),
    "test": (("pyproject.toml", ("test",)), ("edge/pyproject.toml", ("fast",))),
}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_each_lock_pins_every_dependency_the_project_declares(lock):
    text = (REPO / f"ops/requirements-{lock}.txt").read_text()
    assert f"uv pip compile ops/requirements-{lock}.in --universal" in text.splitlines()[1]
    assert lock in re.search(r"for lock in ([a-z ]+);", (REPO / "ops/lock").read_text()).group(1).split()
    pinned = {requirement_name(line): line for line in text.splitlines() if re.match(r"[A-Za-z0-9]", line)}
    assert all(re.match(r"\S+==\S+", line) for line in pinned.values()), "every line of the lock pins a version"
    assert all(
        "--hash=sha256:" in entry for entry in re.split(r"\n(?=[A-Za-z0-9])", text) if re.match(r"[A-Za-z0-9]", entry)
    )
    declared = set()
    for pyproject, extras in LOCKS[lock]:
        project = tomllib.loads((REPO / pyproject).read_text())["project"]
        for requirement in project["dependencies"] + [r for e in extras for r in project["optional-dependencies"][e]]:
            declared.add(requirement_name(requirement))
    missing = declared - set(pinned) - {"seed-edge"}  # the edge distribution comes from this tree
    assert not missing, (
        f"ops/requirements-{lock}.txt lacks {sorted(missing)}: make it again with ops/lock (docs/deploy.md)"
    )
    assert "seed-edge" not in pinned and "usenet-seed" not in pinned


def test_the_edge_image_and_the_tests_install_their_locks():
    dockerfile = (REPO / "ops/Dockerfile.edge").read_text()
    assert "pip install --no-cache-dir --require-hashes -r /src/ops/requirements-edge.txt" in dockerfile
    assert 'pip install --no-cache-dir --no-deps "/src/edge[fast]"' in dockerfile
    setup = (REPO / "ops/setup").read_text()
    assert "--require-hashes -r ops/requirements-test.txt" in setup and "--no-deps -e ./edge -e ." in setup


def test_the_replica_runs_with_its_profile_and_the_catalog_reads_from_it_when_told(tmp_path):
    """docs/deploy.md: COMPOSE_PROFILES=replica adds a hot standby made from the primary, which
    lets it stream (ops/postgres/allow-replication.sh); DATABASE_READ_URL sends the reads there."""
    plain = compose_config("compose.yaml", DATA_CENTER_SECRETS, tmp_path)
    assert plain.returncode == 0, plain.stderr
    # Without the profile the replica is not started, and the reads are the primary's (empty: unset).
    assert yaml.safe_load(plain.stdout)["services"]["postgres-replica"]["profiles"] == ["replica"]
    assert yaml.safe_load(plain.stdout)["services"]["api"]["environment"]["DATABASE_READ_URL"] == ""
    read_url = "postgresql+psycopg://seed:x@postgres-replica:5432/seed"
    result = compose_config(
        "compose.yaml", {**DATA_CENTER_SECRETS, "COMPOSE_PROFILES": "replica", "DATABASE_READ_URL": read_url}, tmp_path
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    replica = services["postgres-replica"]
    assert replica["image"] == services["postgres"]["image"]
    script = replica["entrypoint"][-1]
    assert (
        "pg_basebackup -h postgres -U seed" in script and " -R " in script and script.rstrip().endswith("exec postgres")
    )
    assert any(
        "/docker-entrypoint-initdb.d/allow-replication.sh" in str(volume) for volume in services["postgres"]["volumes"]
    )
    for name in ("api", *WORKERS):
        assert services[name]["environment"]["DATABASE_READ_URL"] == read_url
