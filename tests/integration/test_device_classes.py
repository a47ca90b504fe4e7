"""A device class means the pods land on that class: a mixed cluster, end to end.

The simulated cluster lists its H100 node first, so a scheduler that ignored the class (first
fit on any free nvidia.com/gpu) would put an A100 workload's pods there. The rendered node
affinity keeps them on A100 nodes, and the hub's accounting then agrees with what runs: quota
usage, free devices and allocations, per class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.cluster.simulated.cluster import NodeGroup
from tests.harness import Hub, SimAgent, wait_until, workload

MIXED = "nodes=1,gpus=8,class=H100-80GB;nodes=1,gpus=8,class=A100-40GB,ready_after=0.1s"


def _device_classes(hub: Hub, cluster_id: str) -> dict[str, tuple[str, str]]:
    """device uuid -> (node, class), as the hub holds the cluster's NVML reports."""
    cluster = hub.get(f"/v1/clusters/{cluster_id}")
    return {
        device["uuid"]: (node["node_id"], device["device_class"])
        for node in cluster.get("nodes", [])
        for device in node.get("devices", [])
    }


def _allocations(hub: Hub, deployment_id: str) -> list[dict[str, Any]]:
    return list(hub.get(f"/v1/allocations?deployment_id={deployment_id}")["allocations"])


def _running(hub: Hub, deployment_id: str, devices: int) -> list[dict[str, Any]]:
    allocations = _allocations(hub, deployment_id)
    held = sum(len(a["device_ids"]) for a in allocations)
    phase = hub.get(f"/v1/deployments/{deployment_id}")["admission_phase"]
    return allocations if held == devices and phase == "running" else []


def test_each_class_runs_on_its_own_nodes_and_is_counted_there(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8, A100_40GB=8)
    agents(cluster_id="east", token=token, spec=MIXED)
    devices = wait_until(
        lambda: len(_device_classes(hub, "east")) == 16 and _device_classes(hub, "east"),
        what="both nodes' devices",
    )
    a100_nodes = {node for node, cls in devices.values() if cls == "A100-40GB"}
    h100_nodes = {node for node, cls in devices.values() if cls == "H100-80GB"}

    hub.post(
        "/v1/workloads",
        workload("small", replicas=2, tp=4, device_class="A100-40GB", clusters=("east",)),
    )
    allocations = wait_until(lambda: _running(hub, "small.east", 8), what="A100 workload running")
    assert {a["node_id"] for a in allocations} == a100_nodes
    assert {devices[d] for a in allocations for d in a["device_ids"]} == {
        (node, "A100-40GB") for node in a100_nodes
    }

    capacity = hub.get("/v1/clusters/east")["devices"]
    assert (capacity["A100-40GB"]["allocated"], capacity["A100-40GB"]["free"]) == (8, 0)
    assert (capacity["H100-80GB"]["allocated"], capacity["H100-80GB"]["free"]) == (0, 8)
    usage = hub.get("/v1/projects/search")["usage"]
    assert usage["A100-40GB"].get("used", 0) == 8
    assert usage["H100-80GB"].get("used", 0) == 0

    # The H100 devices are really free: an H100 workload of all of them runs, on them.
    hub.post(
        "/v1/workloads",
        workload("big", replicas=1, tp=8, device_class="H100-80GB", clusters=("east",)),
    )
    allocations = wait_until(lambda: _running(hub, "big.east", 8), what="H100 workload running")
    assert {a["node_id"] for a in allocations} == h100_nodes
    assert {devices[d][1] for a in allocations for d in a["device_ids"]} == {"H100-80GB"}
    capacity = hub.get("/v1/clusters/east")["devices"]
    assert capacity["H100-80GB"]["free"] == 0 and capacity["A100-40GB"]["free"] == 0
    usage = hub.get("/v1/projects/search")["usage"]
    assert usage["H100-80GB"].get("used", 0) == 8 and usage["A100-40GB"].get("used", 0) == 8


def test_pods_of_a_class_the_cluster_lacks_wait_with_the_schedulers_reason(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    """What the agent rendered for a class no node has cannot take another class's devices."""
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8, A100_40GB=8)
    agent = agents(
        cluster_id="east", token=token, spec="nodes=1,gpus=8,class=H100-80GB,ready_after=0.1s"
    )
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    hub.post(
        "/v1/workloads",
        workload("chat", replicas=1, tp=8, device_class="H100-80GB", clusters=("east",)),
    )
    wait_until(lambda: _running(hub, "chat.east", 8), what="H100 workload running")

    # The node is swapped for an A100 node: the H100 pods must not move onto it.
    [old] = [n.name for n in agent.cluster.list_nodes()]
    agent.cluster.add_node(
        NodeGroup(
            gpus=8,
            device_class="A100-40GB",
            memory_bytes=40 * 2**30,
            product_name="NVIDIA A100-SXM4-40GB",
        )
    )
    agent.cluster.remove_node(old)
    agent.agent.cluster_changed()

    def waiting() -> list[str]:
        return [
            p.reason
            for p in agent.cluster.list_pods()
            if p.gpu_request and p.phase == "Pending" and p.reason
        ]

    reasons = wait_until(waiting, what="the H100 worker pending")
    assert reasons == [
        "Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node"
        " affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not"
        " helpful for scheduling."
    ]
    assert not [p for p in agent.cluster.list_pods() if p.gpu_request and p.node_name]
