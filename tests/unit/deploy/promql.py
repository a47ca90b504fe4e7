"""What our monitoring files ask Prometheus: the PromQL of deploy/monitoring's alert rules and
Grafana dashboard, and the metric names each expression reads (to hold them to what the hub
exports: tests/integration/test_operator_metrics.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.unit.deploy.manifests import DEPLOY

MONITORING = DEPLOY / "monitoring"
RULES = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
# Grafana's variables, as a value PromQL accepts, so an expression can be checked as written.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$cluster": "east", "$project": "search"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's spec: a Prometheus rules file (groups) as promtool reads it."""
    spec: dict[str, Any] = yaml.safe_load(RULES.read_text())["spec"]
    return spec


def alerts() -> list[dict[str, Any]]:
    return [rule for group in rule_groups()["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return found


def dashboard_expressions() -> list[str]:
    """Every query of the dashboard: panel targets and template variables, variables filled."""
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            assert inner, f"unexpected variable query {query!r}"
            exprs.append(inner.group(1))
    return [_filled(e) for e in exprs]


def _filled(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (not its functions, labels or keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    # label lists of by, without, on, ignoring, group_left, group_right
    text = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text, flags=re.I
    )
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        word = match.group(0)
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]", word) or text[match.start() - 1 : match.start()].isdigit():
            continue
        names.add(word)
    return names


def rules_file(path: Path, groups: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(groups, sort_keys=False))
    return path
