"""Labels in the CLI against a real hub: `metadata.labels` in a Kubernetes-shaped manifest,
`get -l` on workloads and projects, and `-o yaml` round-tripping through `apply` (docs/cli.md)."""

from __future__ import annotations

import pathlib

import yaml

from tests.integration.cli import manifests
from tests.integration.cli.conftest import Runner

OBJECTS = """\
apiVersion: wingsmith.dev/v1
kind: Project
metadata: {name: team-a, labels: {team: a}}
spec: {quotas: {H100-80GB: 16}}
---
apiVersion: wingsmith.dev/v1
kind: Project
metadata: {name: team-b}
---
apiVersion: wingsmith.dev/v1
kind: Cluster
metadata: {name: east}
---
apiVersion: wingsmith.dev/v1
kind: Workload
metadata: {name: chat, labels: {app: chat, env: prod}}
spec:
  project: team-a
  replicas: 0
  device_class: H100-80GB
  serving: {engine: vllm, engine_version: "0.12.0", model: m, tensor_parallel: 1}
  placement: {clusters: [east]}
---
apiVersion: wingsmith.dev/v1
kind: Workload
metadata: {name: rank, labels: {app: rank}}
spec:
  project: team-a
  replicas: 0
  device_class: H100-80GB
  serving: {engine: vllm, engine_version: "0.12.0", model: m, tensor_parallel: 1}
  placement: {clusters: [east]}
"""


def listed(cli: Runner, *argv: str) -> list[str]:
    return cli.ok("get", *argv, "-o", "name").split()


def test_labels_from_metadata_select_with_l_and_round_trip_through_apply(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    cli.ok("apply", "-f", manifests.write(tmp_path, OBJECTS))
    assert listed(cli, "workloads", "-l", "app=chat") == ["workload/chat"]
    assert listed(cli, "wl", "--selector", "app!=chat") == ["workload/rank"]
    assert listed(cli, "workloads", "-l", "env,app==chat") == ["workload/chat"]
    assert listed(cli, "projects", "-l", "team=a") == ["project/team-a"]
    assert listed(cli, "proj", "-l", "!team") == ["project/team-b"]

    shown = yaml.safe_load(cli.ok("get", "workload", "chat", "-o", "yaml"))
    assert shown["metadata"] == {"name": "chat", "labels": {"app": "chat", "env": "prod"}}
    assert "labels" not in shown["spec"] and "labels" not in shown["status"]

    # Changed in the yaml, applied back: the labels alone are configured.
    shown["metadata"]["labels"] = {"app": "chat", "env": "dev"}
    path = manifests.write(tmp_path, yaml.safe_dump(shown), name="chat.yaml")
    assert "workload/chat configured (labels)" in cli.ok("apply", "-f", path)
    assert listed(cli, "workloads", "-l", "env=dev") == ["workload/chat"]
    assert "workload/chat unchanged" in cli.ok("apply", "-f", path)


def test_a_bad_selector_is_the_hubs_400_naming_the_parameter(cli: Runner) -> None:
    result = cli("get", "workloads", "-l", "app in (a)")
    assert result.code != 0
    assert "label_selector" in result.err


def test_every_list_kind_takes_l_and_other_filters_still_name_their_kinds(cli: Runner) -> None:
    for kind in ("clusters", "deployments", "replicas", "allocations", "discovered"):
        assert cli("get", kind, "-l", "a=b").code == 0, kind
    result = cli("get", "clusters", "--workload", "chat")
    assert result.code == 2
    assert "does not filter clusters (filters: --selector)" in result.err
