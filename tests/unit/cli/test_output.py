"""Tables, JSON and YAML of each kind, from small JSON objects."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from cli import columns, jsonpath, kinds, output
from tests.unit.cli import builders


def row(kind: str, item: dict[str, Any]) -> list[str]:
    return [cell(item) for _, cell in columns.COLUMNS[kind]]


def headers(kind: str) -> list[str]:
    return [header for header, _ in columns.COLUMNS[kind]]


def cells(kind: str, item: dict[str, Any]) -> dict[str, str]:
    """A row by column name."""
    return dict(zip(headers(kind), row(kind, item), strict=True))


def test_every_kind_has_a_table() -> None:
    # Every kind has a table (tokens and the audit log have theirs too).
    assert {kind.name for kind in kinds.KINDS} <= set(columns.COLUMNS)


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("workload", "NAME PROJECT PHASE READY/DESIRED DEVICE-CLASS DEPLOYMENTS PRIORITY"),
        (
            "deployment",
            "NAME CLUSTER PHASE REASON READY/DESIRED ADMITTED ROLLOUT GENERATION DIGEST AUTHORITY"
            " DRIFT ENABLED STALE",
        ),
        ("cluster", "CLUSTER MODE CONNECTED STALE LAST-SEEN NODES DEVICES DGD SCHEDULING"),
        ("replica", "NAME DEPLOYMENT NODE READY DEVICES DIGEST"),
        ("allocation", "REPLICA POD NODE DEVICES PROJECT"),
        ("discovered", "NAME STATE GONE ENGINE VERSION READY/DESIRED DEVICE-CLASS WORKLOAD"),
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
            ["llama", "team-a", "running", "4/4", "H100-80GB", "east,west", "normal"],
        ),
        (
            "workload",
            builders.workload(phase="running", degraded=True, ready_replicas=3, priority="high"),
            ["llama", "team-a", "running (degraded)", "3/4", "H100-80GB", "east,west", "high"],
        ),
        (
            "workload",
            # A hub from before priorities sends none: the default it means.
            builders.workload(phase=None, ready_replicas=0, deployments=[], priority=None),
            ["llama", "team-a", "-", "0/4", "H100-80GB", "-", "normal"],
        ),
        (
            "deployment",
            builders.deployment(),
            ["llama.east", "east", "running", "-", "2/2", "2", "converged", "3", "svg_ab12",
             "managed", "-", "true", "false"],
        ),
        (
            "deployment",
            builders.deployment(
                admission_phase="pending",
                admission_reason="insufficient_quota",
                admitted_replicas=0,
                status=None,
                rollout=None,
                enabled=False,
            ),
            ["llama.east", "east", "pending", "insufficient_quota", "-/2", "0", "-", "3",
             "svg_ab12", "managed", "-", "false", "-"],
        ),
        (
            "deployment",
            builders.deployment(status={"ready_replicas": 1, "stale": True}, degraded=True),
            ["llama.east", "east", "running (degraded)", "-", "1/2", "2", "converged", "3",
             "svg_ab12", "managed", "-", "true", "true"],
        ),
        (
            "cluster",
            builders.cluster(),
            ["east", "managing", "true", "false", "2026-01-31T12:00:05Z", "2",
             "A100-40GB 0/8 free, H100-80GB 12/16 free", "v1beta1", "open"],
        ),
        (
            "cluster",
            builders.cluster(read_only=True, cordoned=True),
            ["east", "read-only", "true", "false", "2026-01-31T12:00:05Z", "2",
             "A100-40GB 0/8 free, H100-80GB 12/16 free", "v1beta1", "cordoned"],
        ),
        (
            "cluster",
            builders.cluster(cordoned_device_classes=["A100-40GB"], cordoned_nodes=["n2"]),
            ["east", "managing", "true", "false", "2026-01-31T12:00:05Z", "2",
             "A100-40GB 0/8 free, H100-80GB 12/16 free", "v1beta1",
             "cordoned: A100-40GB, node n2"],
        ),
        (
            "cluster",
            builders.cluster(connected=False, last_seen="2026-01-31T12:00:05Z", devices={}),
            ["east", "managing", "false", "false", "2026-01-31T12:00:05Z", "2", "-", "v1beta1",
             "open"],
        ),
        (
            # Never heard from: neither "false" for stale nor "0/0 free" (nothing was reported).
            "cluster",
            builders.cluster(
                connected=False,
                never_connected=True,
                last_seen=None,
                nodes=[],
                devices={"H100-80GB": {"total": 0, "free": 0}},
                dgd_version="",
            ),
            ["east", "-", "never", "-", "-", "0", "-", "-", "open"],
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
            ["llama-worker-0", "dep_1", "n1", "unknown (stale)", "0", "-"],
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


@pytest.mark.parametrize(
    ("deployment", "rollout", "drift"),
    [
        (builders.deployment(), "converged", "-"),
        (builders.deployment(rollout=None, status=None), "-", "-"),
        (builders.deployment(rollout=builders.rollout(state=None)), "-", "-"),
        (
            builders.deployment(
                rollout=builders.rollout(state="rolling", ready_on_target=1, surge_replicas=1)
            ),
            "rolling 1/2 (+1 surge)",
            "-",
        ),
        (
            builders.deployment(
                rollout=builders.rollout(state="rolling", ready_on_target=0, replicas_on_older=2)
            ),
            "rolling 0/2",
            "-",
        ),
        (
            builders.deployment(
                authority="observed",
                drift=[builders.difference(), builders.difference("engine_args", "", "--x")],
            ),
            "converged",
            "2",
        ),
    ],
)
def test_a_deployment_row_shows_its_rollout_and_how_much_it_drifted(
    deployment: dict[str, Any], rollout: str, drift: str
) -> None:
    shown = cells("deployment", deployment)
    assert (shown["ROLLOUT"], shown["DRIFT"]) == (rollout, drift)


@pytest.mark.parametrize(
    ("summaries", "expected"),
    [
        ([{"cluster_id": "east", "authority": "managed", "rollout_state": "converged"}], "east"),
        ([{"cluster_id": "east", "authority": "managed", "rollout_state": None}], "east"),
        (
            [
                {"cluster_id": "east", "authority": "managed", "rollout_state": "rolling"},
                {"cluster_id": "west", "authority": "observed", "rollout_state": "converged"},
            ],
            "east (rolling),west (observed)",
        ),
        (
            [{"cluster_id": "west", "authority": "observed", "rollout_state": "rolling"}],
            "west (observed, rolling)",
        ),
    ],
)
def test_a_workload_row_notes_observed_and_rolling_deployments(
    summaries: list[dict[str, Any]], expected: str
) -> None:
    shown = cells("workload", builders.workload(deployments=summaries))
    assert shown["DEPLOYMENTS"] == expected


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            builders.discovered(),
            ["east.ml.legacy-qwen", "new", "false", "vllm", "0.9.1", "2/2", "H100-80GB", "-"],
        ),
        (
            builders.discovered(state="promoted", workload_id="wl_9"),
            ["east.ml.legacy-qwen", "promoted", "false", "vllm", "0.9.1", "2/2", "H100-80GB",
             "wl_9"],
        ),
        (
            builders.discovered(
                state="ignored", gone=True, ready_replicas=0, device_class="", engine_version=""
            ),
            ["east.ml.legacy-qwen", "ignored", "true", "vllm", "-", "0/2", "-", "-"],
        ),
    ],
)  # fmt: skip
def test_a_discovered_row_shows_its_ref_state_and_what_runs(
    item: dict[str, Any], expected: list[str]
) -> None:
    assert row("discovered", item) == expected


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


def test_json_shows_the_hubs_json_unchanged_and_a_list_as_kubectls_list() -> None:
    items = [builders.deployment(status=None), builders.deployment(name="llama.west")]
    assert json.loads(output.render(items, fmt="json", kind="deployment")) == {
        "apiVersion": "v1",
        "items": items,
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }
    one = json.loads(output.render(items[0], fmt="json", kind="deployment"))
    assert one == items[0]


def test_yaml_shows_a_resource_as_a_manifest_spec_declared_status_reported() -> None:
    project = builders.project()
    shown = yaml.safe_load(output.render([project], fmt="yaml", kind="project"))
    assert shown["kind"] == "List" and len(shown["items"]) == 1
    obj = shown["items"][0]
    assert list(obj) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert obj["apiVersion"] == "wingsmith.dev/v1" and obj["kind"] == "Project"
    assert obj["metadata"] == {"name": project["name"]}
    assert obj["spec"]["quotas"] == project["quotas"]
    assert "usage" in obj["status"] and "quotas" not in obj["status"]
    # Every field of the hub's JSON is in the manifest once, under spec or status.
    assert {**obj["spec"], **obj["status"], "name": obj["metadata"]["name"]} == project


def test_a_kind_with_nothing_to_declare_has_only_status() -> None:
    shown = yaml.safe_load(output.render(builders.allocation(), fmt="yaml", kind="allocation"))
    assert shown["kind"] == "Allocation" and "spec" not in shown


@pytest.mark.parametrize(
    ("path", "names"),
    [
        (".replicas", ["c", "b", "a"]),
        ("{.name}", ["a", "b", "c"]),
        (".quotas.x", ["a", "c", "b"]),
    ],
)
def test_sort_by_orders_by_the_value_at_a_jsonpath_numbers_as_numbers_null_first(
    path: str, names: list[str]
) -> None:
    items = [
        {"name": "b", "replicas": 10, "quotas": {"x": 9}},
        {"name": "c", "replicas": 2, "quotas": {"x": 3}},
        {"name": "a", "replicas": 11, "quotas": {"x": None}},
    ]
    assert [i["name"] for i in output.sort_items(items, path)] == names


def test_sort_by_a_field_the_items_lack_is_refused() -> None:
    with pytest.raises(jsonpath.MissingField, match="did you mean 'replicas'"):
        output.sort_items([{"name": "a", "replicas": 1}], ".replica")


def test_custom_columns_draw_the_paths_a_user_names_none_for_empty() -> None:
    items = [
        {"name": "a", "s": {"ready": 2}, "tags": ["x", "y"]},
        {"name": "b", "s": None, "tags": []},
    ]
    fmt = "custom-columns=NAME:.name,READY:.s.ready,TAGS:.tags[*]"
    assert output.parse_format(fmt) == fmt
    assert output.serialize(items, fmt=fmt).splitlines() == [
        "NAME  READY   TAGS",
        "a     2       x,y",
        "b     <none>  <none>",
    ]
    assert output.serialize(items, fmt=fmt, headers=False).splitlines()[0] == "a  2       x,y"


@pytest.mark.parametrize("fmt", ["custom-columns=", "custom-columns=NAME", "custom-columns=A:{"])
def test_a_bad_custom_columns_spec_is_refused_before_the_hub_is_asked(fmt: str) -> None:
    with pytest.raises(ValueError, match=r"custom-columns|jsonpath"):
        output.parse_format(fmt)


def test_a_mistyped_format_gets_a_suggestion() -> None:
    with pytest.raises(ValueError, match="did you mean 'yaml'"):
        output.parse_format("ymal")


def test_json_keeps_the_hubs_key_order() -> None:
    text = output.serialize({"name": "x", "quotas": {}, "create_time": None}, fmt="json")
    assert list(json.loads(text)) == ["name", "quotas", "create_time"]


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        output.serialize({}, fmt="xml")
