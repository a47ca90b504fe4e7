"""deploy/monitoring: the alert rules pass `promtool check rules` and their unit tests
(alerts_test.yaml beside this file) under `promtool test rules`; every alert is tested
firing; every dashboard query is PromQL promtool accepts; the ServiceMonitor and the scrape
annotations point at the port that serves /metrics. (That every query names a metric the hub
exports is checked against a live hub: tests/integration/test_operator_metrics.py.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.deploy import manifests, promql
from tests.unit.deploy.manifests import one

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool missing (Debian: apt-get install prometheus; .ci/run installs it)",
)
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@needs_promtool
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    promql.rules_file(tmp_path / "rules.yaml", promql.rule_groups())
    done = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(promql.alerts())} rules found" in done.stdout


@needs_promtool
def test_the_rules_pass_their_promtool_unit_tests(tmp_path: Path) -> None:
    promql.rules_file(tmp_path / "rules.yaml", promql.rule_groups())
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    done = _promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_unit_tests_fail_when_a_threshold_moves(tmp_path: Path) -> None:
    """The unit tests hold the thresholds: a stale cluster alerting only after 10 minutes
    fails them."""
    groups = promql.rule_groups()
    (stale,) = [
        r for g in groups["groups"] for r in g["rules"] if r["alert"] == "WingsmithClusterStale"
    ]
    stale["for"] = "10m"
    promql.rules_file(tmp_path / "rules.yaml", groups)
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    done = _promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert done.returncode != 0 and "WingsmithClusterStale" in done.stdout + done.stderr


def test_every_alert_is_tested_firing_and_says_what_and_how_bad() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    for rule in promql.alerts():
        assert rule["alert"] in fired, f"{rule['alert']}: no unit test sees it fire"
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


@needs_promtool
def test_every_dashboard_query_is_promql(tmp_path: Path) -> None:
    exprs = promql.dashboard_expressions()
    assert len(exprs) >= 20
    rules = [{"record": f"wingsmith:dashboard_query_{i}", "expr": e} for i, e in enumerate(exprs)]
    promql.rules_file(tmp_path / "queries.yaml", {"groups": [{"name": "q", "rules": rules}]})
    done = _promtool("check", "rules", "queries.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_shows_the_fleet_a_cluster_and_a_project() -> None:
    board = promql.dashboard()
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows == ["Fleet", "Cluster $cluster", "Project $project"]
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "cluster", "project"} <= variables
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(a_bucket{job="x", le=~"1.*"}[5m]))', {"a_bucket"}),
        ("max by (cluster) (a) > 0 and on (cluster) b == 1", {"a", "b"}),
        ("count(a == 1) or vector(0)", {"a"}),
        ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[1h]))) > 900", {"h_bucket"}),
        ('absent(up{job="wingsmith-hub"})', {"up"}),
    ],
)
def test_metric_names_are_read_from_promql(expr: str, names: set[str]) -> None:
    assert promql.metric_names(expr) == names


def test_the_service_monitor_scrapes_the_hubs_metrics_port(hub_build: Any) -> None:
    monitor = one(manifests.build(promql.MONITORING), "ServiceMonitor")
    service = one(hub_build, "Service", "wingsmith-hub")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "https")
    # job="wingsmith-hub", which the rules select
    label = monitor["spec"]["jobLabel"]
    assert service["metadata"]["labels"][label] == "wingsmith-hub"


def test_the_hub_pods_carry_scrape_annotations_for_their_metrics_port(hub_build: Any) -> None:
    deployment = one(hub_build, "Deployment", "wingsmith-hub")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    hub = manifests.container(deployment, "hub")
    ports = {str(p["containerPort"]) for p in hub["ports"] if p["name"] == "http"}
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] in ports
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/scheme"] == "https"


def test_the_rule_is_the_one_the_monitoring_tree_applies() -> None:
    build = manifests.build(promql.MONITORING)
    assert one(build, "PrometheusRule")["spec"] == promql.rule_groups()
