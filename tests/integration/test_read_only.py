"""Read-only agents: sync and store desired state, report everything, apply nothing."""

from __future__ import annotations

from collections.abc import Callable

from tests.harness import Hub, SimAgent, wait_until, workload


def test_a_read_only_agent_stores_desired_state_reports_and_writes_nothing(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token, read_only=True)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices reported")
    cluster = hub.get("/v1/clusters/east")
    assert cluster["read_only"] is True and cluster["connected"] is True

    created = hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    deployment_id = created["deployments"][0]["deployment_id"]
    wait_until(lambda: deployment_id in agent.agent.desired.deployments, what="desired stored")
    wait_until(lambda: hub.get("/v1/deployments/chat.east")["sync"]["applied"], what="acked")

    # Let several reconcile rounds pass (resync is 1 s in tests): each would have applied.
    rounds = agent.agent.reconciles
    wait_until(lambda: agent.agent.reconciles >= rounds + 2, what="two more reconciles")
    assert agent.cluster.list_dgds() == []
    assert agent.cluster.mutations_refused == 0, "no mutating call was even attempted"
    assert agent.agent.applied == 0
    deployment = hub.get("/v1/deployments/chat.east")
    assert deployment["admission_phase"] == "admitted"  # admitted, never placed
    assert deployment["status"] is None
