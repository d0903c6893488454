"""compose.yaml against the Compose specification's JSON schema (no Docker engine runs here).

The schema comes with Debian's docker-compose package (ops/setup installs it), so the check
works offline."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_SPEC = Path("/usr/lib/python3/dist-packages/compose/config/compose_spec.json")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft201909Validator:
    assert COMPOSE_SPEC.is_file(), f"{COMPOSE_SPEC} missing: run ops/setup (it installs docker-compose)"
    schema = json.loads(COMPOSE_SPEC.read_text())
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def test_compose_file_follows_the_compose_specification(validator, compose):
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []


def test_the_schema_check_catches_mistakes(validator, compose):
    edge = compose["services"]["edge"]
    broken = {**compose, "services": {**compose["services"], "edge": {**edge, "stop_grace_periode": "30s"}}}
    assert any("stop_grace_periode" in e.message for e in validator.iter_errors(broken))


def test_the_edge_service_builds_the_edge_image_and_needs_only_two_settings(compose):
    edge = compose["services"]["edge"]
    assert edge["build"]["dockerfile"] == "ops/Dockerfile.edge"
    assert edge["profiles"] == ["edge"]
    assert {"COORDINATOR_URL", "NODE_TOKEN"} <= set(edge["environment"])
    # The node gives its ranges back on SIGTERM: compose must wait for that before killing it.
    assert int(edge["stop_grace_period"].rstrip("s")) >= 10
    assert not any(key in edge for key in ("depends_on", "links")), "the edge needs nothing of the data center"
    assert any(volume.endswith(":/home/edge/spool") for volume in edge["volumes"])
