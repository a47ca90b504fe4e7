"""Read-only agents: sync and store desired state, report everything, apply nothing."""

from __future__ import annotations

from collections.abc import Callable

from cli import output
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
    # Nothing admitted (nor reserved): its agent would never create the replica (issue 20).
    assert deployment["admission_phase"] == "pending"
    assert deployment["status"] is None
    # And it says why it does not run, in the API and in the CLI's tables.
    assert deployment["admission_reason"] == "cluster_read_only"
    assert "east's agent runs read-only" in deployment["admission_message"]
    summary = hub.get("/v1/workloads/chat")["deployments"][0]
    assert summary["admission_reason"] == "cluster_read_only"
    clusters = output.render([hub.get("/v1/clusters/east")], fmt="table", kind="cluster")
    assert clusters.splitlines()[0].split()[:3] == ["CLUSTER", "MODE", "CONNECTED"]
    assert clusters.splitlines()[1].split()[:2] == ["east", "read-only"], clusters
    row = output.render([deployment], fmt="table", kind="deployment").splitlines()[1]
    assert row.split()[2:4] == ["pending", "cluster_read_only"], row


def test_a_read_only_cluster_turned_managing_runs_its_deployment_and_drops_the_reason(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    reader = agents(cluster_id="east", token=token, read_only=True)
    wait_until(lambda: hub.get("/v1/clusters/east")["read_only"], what="read-only session")
    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    wait_until(
        lambda: hub.get("/v1/deployments/chat.east")["admission_reason"] == "cluster_read_only",
        what="the read-only reason",
    )
    reader.stop()
    agents(cluster_id="east", token=token)  # the operator switches the agent to managing
    wait_until(
        lambda: hub.get("/v1/deployments/chat.east")["admission_phase"] == "running",
        what="running once managed",
    )
    deployment = hub.get("/v1/deployments/chat.east")
    assert deployment["admission_reason"] is None
    assert deployment["admission_message"] == ""
    cluster = output.render([hub.get("/v1/clusters/east")], fmt="table", kind="cluster")
    assert cluster.splitlines()[1].split()[:2] == ["east", "managing"], cluster
