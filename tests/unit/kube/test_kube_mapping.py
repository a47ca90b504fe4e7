"""Kubernetes objects -> the port's Pod, Node and Dgd: table-driven on the pure mapping, and
once end to end through the emulator's wire."""

from __future__ import annotations

from typing import Any

import pytest

from agent.cluster.kube import mapping
from agent.cluster.port import DYNAMO_GRAPH, Dgd, Node, Pod
from tests.fake_kube import DGDS, NODES, PODS, KubeEmulator
from tests.unit.cluster.builders import aggregated
from tests.unit.kube import builders
from tests.unit.kube.conftest import MakeCluster

ENGINE = ("python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B")


def test_a_ready_worker_pod_maps_to_a_ready_replica_with_its_gpus_and_argv() -> None:
    pod = mapping.pod(builders.pod(containers=[builders.container(gpus=2)]))
    assert pod == Pod(
        name="llama-worker-0",
        namespace="default",
        labels={"nvidia.com/dynamo-component-type": "worker", DYNAMO_GRAPH: "llama"},
        node_name="gpu-node-1",
        phase="Running",
        ready=True,
        gpu_request=2,
        image=builders.IMAGE,
        argv=ENGINE,
        reason="",
        created_unix=builders.CREATED_UNIX,
    )


@pytest.mark.parametrize(
    ("containers", "gpus", "argv"),
    [
        # The container named main wins, wherever it stands.
        (
            [
                builders.container("sidecar", gpus=None, command=("envoy",), args=()),
                builders.container("main", gpus=4),
            ],
            4,
            ENGINE,
        ),
        # No main: the first container.
        (
            [builders.container("engine", gpus=1, command=("vllm",), args=("serve",))],
            1,
            ("vllm", "serve"),
        ),
        # Requests only (no limits).
        ([builders.container(gpus=8, where="requests")], 8, ENGINE),
        # No GPU at all (a frontend).
        ([builders.container(gpus=None, args=())], 0, ("python3", "-m", "dynamo.vllm")),
        # A quantity that is not an integer counts as none.
        ([builders.container(gpus="1.5")], 0, ENGINE),
    ],
)
def test_the_main_container_gives_gpus_and_argv(
    containers: list[dict[str, Any]], gpus: int, argv: tuple[str, ...]
) -> None:
    pod = mapping.pod(builders.pod(containers=containers))
    assert (pod.gpu_request, pod.argv) == (gpus, argv)


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (
            builders.unschedulable(),
            "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        ),
        (builders.pod(ready=False), "ContainersNotReady"),
        (
            builders.pod(
                ready=False,
                container_statuses=[
                    {
                        "name": "main",
                        "state": {
                            "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}
                        },
                    }
                ],
            ),
            "CrashLoopBackOff: back-off 5m0s",
        ),
        (
            builders.pod(
                phase="Failed",
                ready=False,
                container_statuses=[
                    {"name": "sidecar", "state": {"running": {}}},
                    {"name": "main", "state": {"terminated": {"reason": "OOMKilled"}}},
                ],
            ),
            "OOMKilled",
        ),
        (
            builders.pod(
                phase="Failed",
                ready=False,
                reason="Evicted",
                message="The node was low on resource: memory.",
            ),
            "Evicted: The node was low on resource: memory.",
        ),
        # Ready pods have no reason, whatever an old container status says.
        (
            builders.pod(
                container_statuses=[
                    {
                        "name": "main",
                        "state": {"running": {}},
                        "lastState": {"terminated": {"reason": "Error"}},
                    }
                ]
            ),
            "",
        ),
    ],
)
def test_why_a_pod_is_not_ready(obj: dict[str, Any], reason: str) -> None:
    assert mapping.pod(obj).reason == reason


def test_an_unscheduled_pod_has_no_node_and_is_pending() -> None:
    pod = mapping.pod(builders.unschedulable())
    assert (pod.node_name, pod.phase, pod.ready) == ("", "Pending", False)


def test_a_pod_with_missing_fields_still_maps() -> None:
    pod = mapping.pod({"metadata": {"name": "bare", "namespace": "x"}})
    assert pod == Pod(
        name="bare",
        namespace="x",
        labels={},
        node_name="",
        phase="Pending",
        ready=False,
        gpu_request=0,
    )


@pytest.mark.parametrize(("gpus", "allocatable"), [(8, 8), (None, 0), (0, 0)])
def test_nodes_report_allocatable_gpus(gpus: int | None, allocatable: int) -> None:
    node = mapping.node(builders.node("n1", gpus=gpus, labels={"zone": "a"}))
    assert node == Node(name="n1", labels={"zone": "a"}, allocatable_gpus=allocatable)


def test_a_dgd_keeps_spec_status_labels_annotations_and_generation() -> None:
    manifest = aggregated(labels=builders.ours())
    manifest["metadata"].update(annotations={"wingsmith.dev/spec-hash": "abc"}, generation=3)
    manifest["status"] = {"state": "successful"}
    assert mapping.dgd(manifest) == Dgd(
        namespace="default",
        name="llama",
        labels=builders.ours(),
        spec=manifest["spec"],
        status={"state": "successful"},
        generation=3,
        annotations={"wingsmith.dev/spec-hash": "abc"},
    )


def test_objects_read_over_the_wire_map_the_same(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.apply(DGDS, "default", "llama", aggregated(), manager="helm", force=False)
    emulator.store.update(PODS, builders.unschedulable(), manager="kubelet")
    emulator.store.update(NODES, builders.node(gpus=8), manager="kubelet")
    cluster = make_cluster()

    [dgd], [pod], [node] = cluster.list_dgds(), cluster.list_pods(), cluster.list_nodes()
    assert (dgd.name, dgd.generation, dgd.spec) == ("llama", 1, aggregated()["spec"])
    assert pod == mapping.pod(builders.unschedulable())
    assert pod.reason.startswith("Unschedulable: ")
    assert node.allocatable_gpus == 8
