"""Cordon and uncordon on a real hub with real agents on simulated clusters.

A cordon takes no new placements or admissions (the whole cluster, one device class, or one
node's idle devices) and moves nothing that runs; uncordon admits what waited
(docs/placement.md, "Cordon and drain").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness import Hub, SimAgent, wait_until, workload

SPEC = "nodes=2,gpus=8,class=H100-80GB,ready_after=0.2s"


def deployment(hub: Hub, name: str) -> dict[str, Any]:
    return hub.get(f"/v1/deployments/{name}")


def ready(hub: Hub, name: str, count: int) -> bool:
    status = deployment(hub, name).get("status") or {}
    return bool(status.get("ready_replicas") == count)


def fleet(hub: Hub, agents: Callable[..., SimAgent], *clusters: str, spec: str = SPEC) -> None:
    hub.create_project("search", H100_80GB=64)
    for cluster_id in clusters:
        agents(cluster_id=cluster_id, token=hub.register_cluster(cluster_id), spec=spec)
    for cluster_id in clusters:
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")


def test_a_cordoned_cluster_takes_nothing_new_and_keeps_what_runs(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    fleet(hub, agents, "east", "west")
    hub.post("/v1/workloads", workload("pinned", replicas=1, clusters=("east",)))
    wait_until(lambda: ready(hub, "pinned.east", 1), what="pinned running on east")

    cluster = hub.post("/v1/clusters/east:cordon", {})
    assert (cluster["cordoned"], cluster.get("draining", False)) == (True, False)
    assert hub.get("/v1/clusters/east")["cordoned"] is True

    # A new workload that may go anywhere goes to the open cluster only.
    spread = hub.post("/v1/workloads", workload("spread", replicas=3))
    assert {d["cluster_id"]: d["desired_replicas"] for d in spread["deployments"]} == {"west": 3}

    # Pinned to the cordoned cluster: its scale-up waits there, what runs stays.
    hub.patch("/v1/workloads/pinned", {"replicas": 2})
    pinned = deployment(hub, "pinned.east")
    assert (pinned["admitted_replicas"], pinned["admission_reason"]) == (1, "cordoned")
    assert "cluster east is cordoned" in pinned["admission_message"]
    assert "wingsmith uncordon cluster east" in pinned["admission_message"]
    assert ready(hub, "pinned.east", 1)

    # Uncordon: what waited is admitted and runs.
    cluster = hub.post("/v1/clusters/east:uncordon", {})
    assert cluster.get("cordoned", False) is False
    wait_until(lambda: ready(hub, "pinned.east", 2), what="scale-up admitted after uncordon")
    assert deployment(hub, "pinned.east").get("admission_reason") is None


def test_a_device_class_cordon_and_a_node_cordon(hub: Hub, agents: Callable[..., SimAgent]) -> None:
    fleet(hub, agents, "east", spec="nodes=2,gpus=4,class=H100-80GB,ready_after=0.2s")
    hub.post("/v1/workloads", workload("llama", replicas=1, clusters=("east",)))
    wait_until(lambda: ready(hub, "llama.east", 1), what="llama running")

    # The class of its devices cordoned (a driver upgrade): a scale-up waits, naming the class.
    cluster = hub.post("/v1/clusters/east:cordon", {"device_class": "H100-80GB"})
    assert (cluster.get("cordoned", False), cluster["cordoned_device_classes"]) == (
        False,
        ["H100-80GB"],
    )
    hub.patch("/v1/workloads/llama", {"replicas": 2})
    waiting = deployment(hub, "llama.east")
    assert waiting["admission_reason"] == "cordoned"
    assert "cordoned for H100-80GB" in waiting["admission_message"]
    hub.post("/v1/clusters/east:uncordon", {"device_class": "H100-80GB"})
    wait_until(lambda: ready(hub, "llama.east", 2), what="both replicas after uncordon")
    hub.patch("/v1/workloads/llama", {"replicas": 1})
    wait_until(
        lambda: hub.get("/v1/clusters/east")["devices"]["H100-80GB"]["free"] == 4,
        what="one node's devices free again",
    )

    # The node that is free cordoned: its idle devices are no capacity for new demand.
    replicas = hub.get("/v1/replicas?cluster_id=east")["replicas"]
    busy = {r["node_id"] for r in replicas}
    nodes = [n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]]
    (idle,) = [n for n in nodes if n not in busy]
    cluster = hub.post("/v1/clusters/east:cordon", {"node": idle})
    assert cluster["cordoned_nodes"] == [idle]
    assert [n.get("cordoned", False) for n in cluster["nodes"]] == [n == idle for n in nodes]
    hub.patch("/v1/workloads/llama", {"replicas": 2})
    assert deployment(hub, "llama.east")["admission_reason"] == "insufficient_capacity"
    assert ready(hub, "llama.east", 1)

    # Uncordon without a scope lifts every cordon of the cluster.
    cluster = hub.post("/v1/clusters/east:uncordon", {})
    assert not cluster.get("cordoned_nodes")
    wait_until(lambda: ready(hub, "llama.east", 2), what="admitted after the node uncordon")


def test_cordon_refuses_bad_requests_saying_what_to_fix(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    fleet(hub, agents, "east")
    status, answer = hub.rest(
        "POST", "/v1/clusters/east:cordon", {"node": "n1", "device_class": "H100-80GB"}, check=False
    )
    assert status == 400 and "not both" in answer["error"]["message"]
    status, answer = hub.rest("POST", "/v1/clusters/east:cordon", {"node": "nope"}, check=False)
    assert status == 404 and "node 'nope' not found" in answer["error"]["message"]
    status, answer = hub.rest("POST", "/v1/clusters/east:cordon", {"node": "Bad_Name"}, check=False)
    assert status == 400 and "invalid node name" in answer["error"]["message"]
    status, _ = hub.rest("POST", "/v1/clusters/ghost:cordon", {}, check=False)
    assert status == 404
    # Cordoning twice is one cordon.
    hub.post("/v1/clusters/east:cordon", {})
    assert hub.post("/v1/clusters/east:cordon", {})["cordoned"] is True
