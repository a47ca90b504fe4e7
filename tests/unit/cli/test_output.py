"""Tables, JSON and YAML of each kind, from small JSON objects."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from cli import kinds, output
from tests.unit.cli import builders


def row(kind: str, item: dict[str, Any]) -> list[str]:
    return [cell(item) for _, cell in output.COLUMNS[kind]]


def headers(kind: str) -> list[str]:
    return [header for header, _ in output.COLUMNS[kind]]


def test_every_kind_has_a_table() -> None:
    assert set(output.COLUMNS) == {kind.name for kind in kinds.KINDS}


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("workload", "NAME PROJECT PHASE READY/DESIRED DEVICE-CLASS DEPLOYMENTS"),
        (
            "deployment",
            "NAME CLUSTER PHASE REASON READY/DESIRED GENERATION DIGEST AUTHORITY ENABLED STALE",
        ),
        ("cluster", "CLUSTER CONNECTED STALE LAST-SEEN NODES DEVICES"),
        ("replica", "NAME DEPLOYMENT NODE READY DEVICES DIGEST"),
        ("allocation", "REPLICA POD NODE DEVICES PROJECT"),
    ],
)
def test_each_kind_has_its_columns(kind: str, columns: str) -> None:
    assert headers(kind) == columns.split()


@pytest.mark.parametrize(
    ("kind", "item", "expected"),
    [
        (
            "workload",
            builders.workload(),
            ["llama", "team-a", "running", "4/4", "H100-80GB", "east,west"],
        ),
        (
            "workload",
            builders.workload(phase="running", degraded=True, ready_replicas=3),
            ["llama", "team-a", "running (degraded)", "3/4", "H100-80GB", "east,west"],
        ),
        (
            "workload",
            builders.workload(phase=None, ready_replicas=0, deployments=[]),
            ["llama", "team-a", "-", "0/4", "H100-80GB", "-"],
        ),
        (
            "deployment",
            builders.deployment(),
            ["llama.east", "east", "running", "-", "2/2", "3", "svg_ab12", "managed", "true",
             "false"],
        ),
        (
            "deployment",
            builders.deployment(
                admission_phase="pending",
                admission_reason="insufficient_quota",
                status=None,
                enabled=False,
            ),
            ["llama.east", "east", "pending", "insufficient_quota", "-/2", "3", "svg_ab12",
             "managed", "false", "-"],
        ),
        (
            "deployment",
            builders.deployment(status={"ready_replicas": 1, "stale": True}, degraded=True),
            ["llama.east", "east", "running (degraded)", "-", "1/2", "3", "svg_ab12", "managed",
             "true", "true"],
        ),
        (
            "cluster",
            builders.cluster(),
            ["east", "true", "false", "2026-01-31T12:00:05Z", "2",
             "A100-40GB 0/8 free, H100-80GB 12/16 free"],
        ),
        (
            "cluster",
            builders.cluster(connected=False, last_seen=None, nodes=[], devices={}),
            ["east", "false", "false", "-", "0", "-"],
        ),
        (
            "project",
            builders.project(),
            ["team-a", "H100-80GB 8+2/16"],
        ),
        (
            "project",
            builders.project(quotas={"H100-80GB": 0, "A100-40GB": 4}, usage={}),
            ["team-a", "A100-40GB 0+0/4, H100-80GB 0+0/0"],
        ),
        (
            "project",
            builders.project(quotas={}, usage={}),
            ["team-a", "-"],
        ),
        (
            "replica",
            builders.replica(),
            ["llama-worker-0", "dep_1", "n1", "true", "2", "svg_ab12"],
        ),
        (
            "replica",
            builders.replica(ready=False, stale=True, device_ids=[], serving_digest=""),
            ["llama-worker-0", "dep_1", "n1", "false (stale)", "0", "-"],
        ),
        (
            "allocation",
            builders.allocation(),
            ["rep_1", "llama-worker-0", "n1", "GPU-a,GPU-b", "team-a"],
        ),
    ],
)  # fmt: skip
def test_a_row_shows_each_column(kind: str, item: dict[str, Any], expected: list[str]) -> None:
    assert row(kind, item) == expected


def test_a_table_aligns_columns_without_trailing_blanks() -> None:
    table = output.table(
        "allocation",
        [builders.allocation(), builders.allocation(replica_id="rep_22", device_ids=[])],
    )
    assert table.splitlines() == [
        "REPLICA  POD             NODE  DEVICES      PROJECT",
        "rep_1    llama-worker-0  n1    GPU-a,GPU-b  team-a",
        "rep_22   llama-worker-0  n1    -            team-a",
    ]


def test_one_resource_renders_as_a_one_row_table() -> None:
    lines = output.render(builders.project(), fmt="table", kind="project").splitlines()
    assert len(lines) == 2
    assert lines[1].split() == ["team-a", "H100-80GB", "8+2/16"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_json_and_yaml_show_the_hubs_json_unchanged(fmt: str) -> None:
    items = [builders.deployment(status=None), builders.deployment(name="llama.west")]
    text = output.render(items, fmt=fmt, kind="deployment")
    assert (json.loads(text) if fmt == "json" else yaml.safe_load(text)) == items


def test_json_keeps_the_hubs_key_order() -> None:
    text = output.serialize({"name": "x", "quotas": {}, "create_time": None}, fmt="json")
    assert list(json.loads(text)) == ["name", "quotas", "create_time"]


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        output.serialize({}, fmt="xml")
