"""`wingsmith label` and `-l` on every list, against a real hub (docs/cli.md "Labels"):
kubectl's label verb on workloads, projects and clusters (set, --overwrite, remove, no change,
dry run), clusters selected by the labels an operator set, deployments by their workload's,
every list kind taking -l, and the refusals: a watch of a streamed kind with -l, a malformed
change (before any call), a bad selector (the hub's 400 naming the term)."""

from __future__ import annotations

import pathlib

import pytest

from tests.integration.cli import manifests
from tests.integration.cli.conftest import Runner

OBJECTS = """\
apiVersion: wingsmith.dev/v1
kind: Project
metadata: {name: team-a}
spec: {quotas: {H100-80GB: 16}}
---
apiVersion: wingsmith.dev/v1
kind: Cluster
metadata: {name: east}
spec: {labels: {region: eu}}
---
apiVersion: wingsmith.dev/v1
kind: Cluster
metadata: {name: west}
---
apiVersion: wingsmith.dev/v1
kind: Workload
metadata: {name: chat, labels: {app: chat}}
spec:
  project: team-a
  replicas: 1
  device_class: H100-80GB
  serving: {engine: vllm, engine_version: "0.12.0", model: m, tensor_parallel: 1}
  placement: {clusters: [east]}
---
apiVersion: wingsmith.dev/v1
kind: Workload
metadata: {name: rank}
spec:
  project: team-a
  replicas: 1
  device_class: H100-80GB
  serving: {engine: vllm, engine_version: "0.12.0", model: m, tensor_parallel: 1}
  placement: {clusters: [west]}
"""


@pytest.fixture
def fleet(cli: Runner, tmp_path: pathlib.Path) -> None:
    cli.ok("apply", "-f", manifests.write(tmp_path, OBJECTS))


def listed(cli: Runner, *argv: str) -> list[str]:
    return cli.ok("get", *argv, "-o", "name").split()


def labels(cli: Runner, kind: str, ref: str) -> str:
    return cli.ok("get", kind, ref, "-o", "jsonpath={.labels}")


@pytest.mark.usefixtures("fleet")
def test_label_sets_overwrites_and_removes_as_kubectl(cli: Runner) -> None:
    assert cli.ok("label", "cluster", "west", "region=us", "tier=gold").strip() == (
        "cluster/west labeled"
    )
    assert listed(cli, "clusters", "-l", "region=us") == ["cluster/west"]
    assert listed(cli, "cl", "-l", "region") == ["cluster/east", "cluster/west"]

    # A new value for a key that has one needs --overwrite; nothing is written without it.
    refused = cli("label", "cluster", "west", "region=eu")
    assert refused.code == 1 and "--overwrite" in refused.err and "'us'" in refused.err
    assert listed(cli, "clusters", "-l", "region=eu") == ["cluster/east"]
    cli.ok("label", "cluster", "west", "region=eu", "--overwrite")
    assert listed(cli, "clusters", "-l", "region=eu") == ["cluster/east", "cluster/west"]

    assert cli.ok("label", "cl", "west", "tier-").strip() == "cluster/west labeled"
    assert listed(cli, "clusters", "-l", "!tier") == ["cluster/east", "cluster/west"]
    # The same value again, or removing a label that is not there: nothing to write.
    same = cli("label", "cluster", "west", "region=eu", "gone-")
    assert same.code == 0 and same.out.strip() == "cluster/west not labeled"
    assert "label 'gone' not found" in same.err

    cli.ok("label", "project", "team-a", "team=a")
    assert listed(cli, "projects", "-l", "team=a") == ["project/team-a"]
    cli.ok("label", "wl", "rank", "app=rank")
    assert listed(cli, "workloads", "-l", "app=rank") == ["workload/rank"]


@pytest.mark.usefixtures("fleet")
def test_label_dry_run_writes_nothing(cli: Runner) -> None:
    out = cli.ok("label", "workload", "chat", "env=prod", "--dry-run")
    assert "workload/chat labeled (dry run)" in out
    assert listed(cli, "workloads", "-l", "env") == []
    out = cli.ok("label", "cluster", "east", "region-", "--dry-run")
    assert "cluster/east labeled (dry run)" in out
    assert listed(cli, "clusters", "-l", "region=eu") == ["cluster/east"]


@pytest.mark.usefixtures("fleet")
def test_deployments_select_by_their_workloads_labels(cli: Runner) -> None:
    assert listed(cli, "deployments", "-l", "app=chat") == ["deployment/chat.east"]
    assert listed(cli, "dep", "-l", "!app") == ["deployment/rank.west"]
    cli.ok("label", "workload", "rank", "app=rank")
    assert sorted(listed(cli, "deployments", "-l", "app")) == [
        "deployment/chat.east",
        "deployment/rank.west",
    ]


@pytest.mark.usefixtures("fleet")
@pytest.mark.parametrize("kind", ["replicas", "allocations", "discovered"])
def test_every_list_takes_l(cli: Runner, kind: str) -> None:
    """No agent runs here, so these lists are empty: -l reaches the hub (a bad term is its
    400) and an empty selection says so."""
    result = cli("get", kind, "-l", "app=chat")
    assert result.code == 0 and f"no {kind} found" in result.err
    bad = cli("get", kind, "-l", "app=chat,-bad")
    assert bad.code == 1
    assert "label_selector" in bad.err and "-bad" in bad.err


@pytest.mark.usefixtures("fleet")
@pytest.mark.parametrize("kind", ["workloads", "deployments", "clusters"])
def test_a_watch_with_l_of_a_streamed_kind_is_refused_saying_what_to_do(
    cli: Runner, kind: str
) -> None:
    result = cli("get", kind, "-l", "app=chat", "-w")
    assert result.code == 2
    assert "does not select by labels" in result.err and f"get {kind} -l" in result.err


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (["app"], "key=value to set a label, key- to remove one"),
        (["a/b/c=x"], "is not a label key"),
        (["app=a", "app-"], "given twice"),
    ],
)
def test_a_malformed_change_is_a_usage_error_before_any_call(
    cli: Runner, changes: list[str], problem: str
) -> None:
    result = cli("label", "workload", "chat", *changes, url="http://127.0.0.1:9")
    assert result.code == 2 and problem in result.err


def test_label_of_a_kind_without_labels_is_a_usage_error(
    cli: Runner, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as usage:
        cli("label", "deployment", "chat.east", "a=b")
    assert usage.value.code == 2
    assert "invalid choice: 'deployment'" in capsys.readouterr().err


@pytest.mark.usefixtures("fleet")
def test_label_of_an_unknown_name_suggests_the_closest(cli: Runner) -> None:
    result = cli("label", "workload", "chta", "a=b")
    assert result.code == 1 and "workload/chat" in result.err


@pytest.mark.usefixtures("fleet")
def test_apply_changes_a_clusters_labels(cli: Runner, tmp_path: pathlib.Path) -> None:
    """Cluster labels are mutable now (UpdateCluster): apply PATCHes them instead of refusing."""
    changed = "apiVersion: wingsmith.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
    changed += "spec: {labels: {region: eu, tier: gold}}\n"
    path = manifests.write(tmp_path, changed, name="east.yaml")
    assert "cluster/east configured (labels)" in cli.ok("apply", "-f", path)
    assert listed(cli, "clusters", "-l", "tier=gold") == ["cluster/east"]
    assert "cluster/east unchanged" in cli.ok("apply", "-f", path)


@pytest.mark.usefixtures("fleet")
def test_a_polled_watch_selects_with_l(cli: Runner) -> None:
    """Kinds `get -w` polls (projects, replicas, allocations, discovered) pass -l to each list."""
    cli.hub.client().post("/v1/projects", {"name": "team-b"})
    cli.ok("label", "project", "team-a", "team=a")
    out = cli.ok(
        "get", "projects", "-l", "team=a", "-w", "--watch-interval", "0.1", "--watch-timeout", "0.5"
    )
    assert "team-a" in out and "team-b" not in out
