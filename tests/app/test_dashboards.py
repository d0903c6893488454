"""What ops/ ships for watching the data center: the Grafana dashboard (ops/grafana/usenet-seed.json)
and the Prometheus alert rules (ops/prometheus/alerts.yml, the same as docs/monitoring.md shows).
Every metric they name is one /metrics serves, with the labels they group by."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.db import session_scope
from app.services import operators
from tests.app.factories import BIG, make_group, make_node, make_plan
from tests.app.test_api import API

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "ops/grafana/usenet-seed.json"
ALERTS = REPO / "ops/prometheus/alerts.yml"
# A metric's name in an expression, and the sample suffixes Prometheus adds to a family's name.
NAME = re.compile(r"\bseed_[a-z_]+\b")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")
# The labels an expression groups by or matches on.
LABELS = re.compile(r"(?:by|on) \(([^)]*)\)|\{([^}]*)\}")


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


@pytest.fixture
def served(client, clean_db) -> dict[str, set[str]]:
    """Each metric family /metrics serves (a scrape of the app on the real database and Redis),
    with its labels: those of its help text's samples, or of the code that counts it."""
    with session_scope() as s:
        key = operators.create_key(s, "grafana")[1]
        # A group with a range leased to a node that called: the gauges read at the scrape have
        # samples, and so their labels.
        group = make_group(s, "alt.binaries.test")
        make_plan(s, group, [(BIG, BIG + 999)])
        _, token = make_node(s, "edge-a")
    assert client.post(f"{API}/lease", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    response = client.get("/metrics", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    families: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        families.setdefault(family.name, set()).update(label for sample in family.samples for label in sample.labels)
    from app import metrics  # a labelled counter not counted yet shows no sample: its labels from the code

    for value in vars(metrics).values():
        names = getattr(value, "_labelnames", None)
        if names is not None and getattr(value, "_name", None) in families:
            families[value._name].update(names)
    return families


def family_of(name: str, served: dict[str, set[str]]) -> str | None:
    for candidate in (name, *(name[: -len(s)] for s in SUFFIXES if name.endswith(s))):
        if candidate in served:
            return candidate
    return None


def check(expression: str, served: dict[str, set[str]]) -> None:
    names = set(NAME.findall(expression))
    assert names, expression
    families = {name: family_of(name, served) for name in names}
    assert all(families.values()), (expression, {n for n, f in families.items() if f is None})
    labels = set(served["seed_node_leased_ranges"]) if "on (node)" in expression else set()
    known = set().union(*(served[f] for f in families.values() if f)) | {"le"} | labels
    for by, matchers in LABELS.findall(expression):
        used = (
            [part.strip() for part in by.split(",") if part.strip()]
            if by
            else [m.split("=")[0].rstrip("!~").strip() for m in matchers.split(",") if m.strip()]
        )
        assert set(used) <= known, (expression, set(used) - known)


def test_the_dashboard_names_only_metrics_served(served):
    expressions = dashboard_expressions()
    assert len(expressions) >= 20
    for expression in expressions:
        check(expression, served)
    # The views the fleet needs: each node's rate, its leases and when it was last seen.
    assert any("seed_node_article_numbers_accepted_total" in e and "by (node)" in e for e in expressions)
    assert any("seed_node_leased_ranges" in e for e in expressions)
    assert any("seed_node_last_seen_timestamp_seconds" in e for e in expressions)


def test_the_dashboard_is_one_grafana_reads():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
            assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def test_the_alert_rules_are_the_documented_ones_and_name_only_metrics_served(served):
    documented = re.search(
        r"## Dashboard and alert rules\n.*?```yaml\n(.*?)```", (REPO / "docs/monitoring.md").read_text(), re.S
    )
    assert documented and yaml.safe_load(documented.group(1)) == yaml.safe_load(ALERTS.read_text())
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} >= {"SeedIngestStuck", "SeedNodeGone", "SeedBatchesFailed"}
    for rule in rules:
        check(rule["expr"], served)
