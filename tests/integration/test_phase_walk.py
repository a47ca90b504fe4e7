"""A workload's walk through the phases on a real hub with a real simulated agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness import Hub, SimAgent, wait_until, workload


def deployment_of(hub: Hub, name: str) -> dict[str, Any]:
    return hub.get(f"/v1/deployments/{name}")


def ready(deployment: dict[str, Any]) -> int:
    return int((deployment["status"] or {}).get("ready_replicas", 0))


def test_a_workload_goes_pending_admitted_placed_running(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east", region="us-east")
    hub.create_project("search", H100_80GB=16)

    # No agent yet: the cluster has reported no devices, so the deployment waits.
    created = hub.post("/v1/workloads", workload("llama-70b", replicas=2, clusters=("east",)))
    assert created["phase"] == "pending"
    first = deployment_of(hub, "llama-70b.east")
    assert first["admission_phase"] == "pending"
    assert first["admission_reason"] == "insufficient_capacity"
    assert first["status"] is None, "status is null until the cluster reports"

    agents(cluster_id="east", token=token, spec="nodes=2,gpus=8,class=H100-80GB,ready_after=1.5s")

    seen: list[str] = []

    def walked_to_running() -> bool:
        phase = deployment_of(hub, "llama-70b.east")["admission_phase"]
        if not seen or seen[-1] != phase:
            seen.append(phase)
        return phase == "running"

    wait_until(walked_to_running, what="running", interval=0.02)
    assert seen[0] == "pending" and seen[-1] == "running"
    assert "placed" in seen, f"placed comes before running: {seen}"
    order = ["pending", "admitted", "placed", "running"]
    assert [order.index(p) for p in seen] == sorted(order.index(p) for p in seen), seen

    running = wait_until(
        lambda: ready(d := deployment_of(hub, "llama-70b.east")) == 2 and d,
        what="both replicas ready",
    )
    assert running["status"]["desired_replicas"] == 2
    assert running["degraded"] is False
    assert running["live_digests"] == {running["serving_digest"]: 2}
    assert running["sync"]["applied"] is True
    assert hub.get("/v1/workloads/llama-70b")["phase"] == "running"

    replicas = hub.get(f"/v1/replicas?deployment_id={running['deployment_id']}")["replicas"]
    assert len(replicas) == 2
    assert all(r["ready"] and len(r["device_ids"]) == 4 for r in replicas)
    assert all(r["serving_digest"] == running["serving_digest"] for r in replicas)
    assert all(r["engine_version"] == "0.11.0" for r in replicas)

    # "Which devices does this replica use" is one call.
    one = replicas[0]
    (allocation,) = hub.get(f"/v1/allocations?replica_id={one['replica_id']}")["allocations"]
    assert sorted(allocation["device_ids"]) == sorted(one["device_ids"])
    assert allocation["project"] == "search"

    project = hub.get("/v1/projects/search")
    assert project["usage"]["H100-80GB"] == {"used": 8, "reserved": 0, "limit": 16}
    cluster = hub.get("/v1/clusters/east")
    assert cluster["connected"] is True and cluster["stale"] is False
    assert cluster["devices"]["H100-80GB"]["total"] == 16
    assert cluster["devices"]["H100-80GB"]["allocated"] == 8
    assert cluster["devices"]["H100-80GB"]["free"] == 8
    assert len(cluster["nodes"]) == 2


def test_degraded_shows_while_fewer_replicas_are_ready_than_desired(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices reported")
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(lambda: ready(deployment_of(hub, "chat.east")) == 2, what="2 ready")

    pods = [p for p in agent.cluster.list_pods() if "worker" in p.name]
    agent.cluster.fail_pod(pods[0].namespace, pods[0].name, reason="OOMKilled")
    agent.agent.cluster_changed()
    degraded = wait_until(
        lambda: (d := deployment_of(hub, "chat.east"))["degraded"] and d, what="degraded"
    )
    assert degraded["status"]["ready_replicas"] < 2
    assert degraded["admission_phase"] == "running"  # one replica still serves
    assert hub.get("/v1/workloads/chat")["degraded"] is True
