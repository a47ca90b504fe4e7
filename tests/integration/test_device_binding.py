"""A cluster's agent reports only its own devices: two real agents on a real hub.

`east` and `west` each run a real agent on a simulated cluster. West's agent is then made to
lie as a compromised or misconfigured node would: its NVML and kubelet report one of east's
GPU UUIDs (verified, healthy) in place of one of its own, and its kubelet names one of east's
GPUs among a pod's devices. The hub must store neither: east's device stays east's, west counts
only the devices it owns, the allocation keeps only west's own devices, the agent is told why
(field by field), and the refusals are counted in metrics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from agent.cluster.simulated import SimulatedCluster
from agent.kubelet.model import PodDevices
from tests.harness import Hub, SimAgent, wait_until, workload

SPEC = "nodes=1,gpus=4,class=H100-80GB,ready_after=0.3s"


def uuids(hub: Hub, cluster_id: str) -> dict[str, list[str]]:
    cluster = hub.get(f"/v1/clusters/{cluster_id}")
    return {
        node["node_id"]: [d["uuid"] for d in node.get("devices", []) if d.get("verified")]
        for node in cluster.get("nodes", [])
    }


def lie(cluster: SimulatedCluster, *, own: str, stolen: str) -> None:
    """Make this simulated node report `stolen` in place of its GPU `own` (NVML and the
    kubelet's allocatable list), and add `stolen` to every pod's devices."""
    gpus: Callable[[str], Any] = cluster.node_gpus
    allocatable: Callable[[str], tuple[str, ...]] = cluster.node_allocatable
    pod_devices: Callable[[str], list[PodDevices]] = cluster.node_pod_devices

    def swap(uuid: str) -> str:
        return stolen if uuid == own else uuid

    cluster.node_gpus = lambda node: tuple(  # type: ignore[method-assign]
        dataclasses.replace(g, uuid=swap(g.uuid)) for g in gpus(node)
    )
    cluster.node_allocatable = lambda node: tuple(  # type: ignore[method-assign]
        swap(u) for u in allocatable(node)
    )
    cluster.node_pod_devices = lambda node: [  # type: ignore[method-assign]
        dataclasses.replace(p, device_ids=(*p.device_ids, stolen)) for p in pod_devices(node)
    ]


def test_a_device_of_another_cluster_and_an_allocation_of_it_are_refused(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    east_token = hub.register_cluster("east")
    west_token = hub.register_cluster("west")
    hub.create_project("p", H100_80GB=8)
    agents(cluster_id="east", token=east_token, spec=SPEC)
    east_devices = wait_until(
        lambda: uuids(hub, "east") if sum(map(len, uuids(hub, "east").values())) == 4 else None,
        what="east's 4 verified devices",
    )
    ((east_node, east_uuids),) = east_devices.items()
    west = agents(cluster_id="west", token=west_token, spec=SPEC)
    ((west_node, west_uuids),) = wait_until(
        lambda: uuids(hub, "west") if sum(map(len, uuids(hub, "west").values())) == 4 else None,
        what="west's 4 verified devices",
    ).items()
    created = hub.post(
        "/v1/workloads",
        workload("wl", project="p", tp=1) | {"placement": {"clusters": ["west"]}},
    )
    deployment = created["deployments"][0]["deployment_id"]
    wait_until(
        lambda: hub.get(f"/v1/allocations?deployment_id={deployment}")["allocations"],
        what="west's pod holds a device",
    )

    stolen = east_uuids[0]
    held = {
        d
        for a in hub.get("/v1/allocations?cluster_id=west")["allocations"]
        for d in a["device_ids"]
    }
    own = next(u for u in west_uuids if u not in held)  # one west GPU no pod holds
    lie(west.cluster, own=own, stolen=stolen)

    wait_until(
        lambda: (
            hub.metric(
                "wingsmith_device_reports_refused_total", cluster="west", kind="device_bound"
            )
            >= 1
            and hub.metric(
                "wingsmith_device_reports_refused_total", cluster="west", kind="foreign_allocation"
            )
            >= 1
        ),
        what="both refusals counted",
    )
    wait_until(
        lambda: own not in uuids(hub, "west")[west_node],
        what="west's report without its swapped GPU written",
    )
    assert stolen not in uuids(hub, "west")[west_node], "east's GPU is not stored under west"
    assert len(uuids(hub, "west")[west_node]) == 3, "west counts only the devices it owns"
    assert uuids(hub, "east") == {east_node: east_uuids}, "east's devices untouched"
    capacity = hub.get("/v1/clusters/west")["devices"]["H100-80GB"]
    assert capacity["total"] == 3, capacity
    for allocation in hub.get("/v1/allocations?cluster_id=west")["allocations"]:
        assert stolen not in allocation["device_ids"], allocation
        assert set(allocation["device_ids"]) <= set(west_uuids)
    # The agent was told which field and why.
    problems = west.agent.client.stats.problems
    assert any("bound to another cluster" in p and stolen in p for p in problems), problems
    assert any("not a device of node" in p for p in problems), problems
