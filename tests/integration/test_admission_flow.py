"""Both pending reasons and their release, on a real hub with real agents."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness import SHORT_GRACE, Hub, SimAgent, running_hub, start_agent, wait_until, workload


def phase(hub: Hub, name: str) -> tuple[str, str | None]:
    d: dict[str, Any] = hub.get(f"/v1/deployments/{name}")
    return d["admission_phase"], d["admission_reason"]


def with_devices(hub: Hub, cluster_id: str) -> None:
    wait_until(lambda: hub.get(f"/v1/clusters/{cluster_id}")["devices"], what="devices reported")


def test_insufficient_quota_waits_and_is_admitted_when_the_quota_grows(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("research", H100_80GB=4)
    agents(cluster_id="east", token=token)
    with_devices(hub, "east")

    # A replica needs 8: none fits the quota of 4, the deployment waits whole.
    big = workload("big", project="research", replicas=2, tp=8, clusters=("east",))
    hub.post("/v1/workloads", big)
    assert phase(hub, "big.east") == ("pending", "insufficient_quota")
    d = hub.get("/v1/deployments/big.east")
    assert "research" in d["admission_message"] and "4" in d["admission_message"]
    assert hub.get("/v1/projects/research")["usage"]["H100-80GB"]["reserved"] == 0

    # Room for one replica: it runs, and only the other waits, as the deployment's own share.
    hub.patch("/v1/projects/research", {"quotas": {"H100-80GB": 8}})
    wait_until(lambda: phase(hub, "big.east")[0] == "running", what="one replica running")
    d = hub.get("/v1/deployments/big.east")
    assert (d["admitted_replicas"], d["admission_reason"]) == (1, "insufficient_quota")
    assert d["admission_message"].startswith("1 of 2 replicas admitted; the other 1 waits: ")

    hub.patch("/v1/projects/research", {"quotas": {"H100-80GB": 16}})
    wait_until(
        lambda: hub.get("/v1/deployments/big.east")["status"]["ready_replicas"] == 2,
        what="both replicas running",
    )
    assert phase(hub, "big.east") == ("running", None)


def test_insufficient_capacity_waits_and_is_admitted_when_devices_free_up(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("lab")
    hub.create_project("search", H100_80GB=64)
    agents(cluster_id="lab", token=token, spec="nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s")
    with_devices(hub, "lab")

    hub.post("/v1/workloads", workload("first", replicas=2, clusters=("lab",)))
    wait_until(lambda: phase(hub, "first.lab")[0] == "running", what="first running")
    hub.post("/v1/workloads", workload("second", replicas=1, clusters=("lab",)))
    assert phase(hub, "second.lab") == ("pending", "insufficient_capacity")

    # Demand changes: scaling the first down frees one replica's devices once its pod is gone.
    hub.patch("/v1/workloads/first", {"replicas": 1})
    wait_until(lambda: phase(hub, "second.lab")[0] == "running", what="second admitted")
    cluster = hub.get("/v1/clusters/lab")["devices"]["H100-80GB"]
    assert cluster["allocated"] == 8 and cluster["free"] == 0


def test_deleting_a_workload_releases_its_devices_for_a_waiting_one(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("lab")
    hub.create_project("search", H100_80GB=64)
    agents(cluster_id="lab", token=token, spec="nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s")
    with_devices(hub, "lab")
    hub.post("/v1/workloads", workload("first", replicas=1, tp=8, clusters=("lab",)))
    wait_until(lambda: phase(hub, "first.lab")[0] == "running")
    hub.post("/v1/workloads", workload("second", replicas=1, tp=8, clusters=("lab",)))
    assert phase(hub, "second.lab") == ("pending", "insufficient_capacity")

    hub.rest("DELETE", "/v1/workloads/first")
    wait_until(lambda: phase(hub, "second.lab")[0] == "running", what="second admitted")
    status, _ = hub.rest("GET", "/v1/workloads/first", check=False)
    assert status == 404


def test_a_disabled_deployment_frees_its_devices_for_a_pending_one(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("lab")
    hub.create_project("search", H100_80GB=64)
    agent = agents(
        cluster_id="lab", token=token, spec="nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
    )
    with_devices(hub, "lab")
    hub.post("/v1/workloads", workload("first", replicas=2, clusters=("lab",)))
    wait_until(lambda: phase(hub, "first.lab")[0] == "running")
    hub.post("/v1/workloads", workload("second", replicas=2, clusters=("lab",)))
    assert phase(hub, "second.lab") == ("pending", "insufficient_capacity")

    disabled = hub.patch("/v1/deployments/first.lab", {"enabled": False})
    assert disabled["enabled"] is False
    assert disabled["admission_phase"] == "pending"
    assert disabled["admission_reason"] == "disabled"
    wait_until(lambda: phase(hub, "second.lab")[0] == "running", what="second admitted")
    assert [d.name for d in agent.cluster.list_dgds()] == ["second"]


def test_a_cluster_with_no_devices_of_the_class_leaves_the_deployment_pending(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("a100s")
    hub.create_project("search", H100_80GB=16)
    agents(cluster_id="a100s", token=token, spec="nodes=1,gpus=8,class=A100-40GB")
    with_devices(hub, "a100s")
    hub.post("/v1/workloads", workload("llama", replicas=1, clusters=("a100s",)))
    assert phase(hub, "llama.a100s") == ("pending", "insufficient_capacity")


def test_replicas_spread_over_clusters_by_free_capacity(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    for cluster_id, spec in (("east", "nodes=2,gpus=8"), ("west", "nodes=1,gpus=8")):
        token = hub.register_cluster(cluster_id, tier="prod")
        agents(cluster_id=cluster_id, token=token, spec=spec + ",class=H100-80GB,ready_after=0.2s")
        with_devices(hub, cluster_id)
    hub.create_project("search", H100_80GB=64)
    body = workload("spread", replicas=6)
    body["placement"] = {"cluster_selector": {"tier": "prod"}}
    created = hub.post("/v1/workloads", body)
    shares = {d["cluster_id"]: d["desired_replicas"] for d in created["deployments"]}
    assert shares == {"east": 4, "west": 2}
    wait_until(lambda: hub.get("/v1/workloads/spread")["phase"] == "running")
    assert hub.get("/v1/workloads/spread")["ready_replicas"] == 6


def test_disabling_a_pending_deployment_shows_the_disabled_reason(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    assert phase(hub, "chat.east") == ("pending", "insufficient_capacity")
    hub.patch("/v1/deployments/chat.east", {"enabled": False})
    assert phase(hub, "chat.east") == ("pending", "disabled")
    assert hub.get("/v1/deployments/chat.east")["admission_message"] == "deployment is disabled"
    hub.patch("/v1/deployments/chat.east", {"enabled": True})
    assert phase(hub, "chat.east") == ("pending", "insufficient_capacity")


def test_the_deployment_list_filters_by_workload_name_or_id(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    created = hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    by_name = hub.get("/v1/deployments?workload_id=chat")["deployments"]
    by_id = hub.get(f"/v1/deployments?workload_id={created['workload_id']}")["deployments"]
    assert by_name == by_id and len(by_name) == 1
    status, _ = hub.rest("GET", "/v1/deployments?workload_id=ghost", check=False)
    assert status == 404


def test_changing_placement_moves_replicas_and_keeps_remaining_shares(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    for cluster_id in ("east", "west"):
        token = hub.register_cluster(cluster_id)
        agents(cluster_id=cluster_id, token=token)
        with_devices(hub, cluster_id)
    hub.create_project("search", H100_80GB=64)
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/chat")["ready_replicas"] == 2, what="running")
    moved = hub.patch("/v1/workloads/chat", {"placement": {"clusters": ["west"]}})
    # Make-before-break (issue 20): east keeps running while west's replacements start.
    assert [(d["cluster_id"], d["desired_replicas"]) for d in moved["deployments"]] == [
        ("east", 2),
        ("west", 2),
    ]
    ready_seen: list[int] = []

    def gone_from_east() -> bool:
        ready_seen.append(hub.get("/v1/workloads/chat")["ready_replicas"])
        return hub.rest("GET", "/v1/deployments/chat.east", check=False)[0] == 404

    wait_until(gone_from_east, what="east removed once west runs")
    assert min(ready_seen) >= 2, f"ready replicas fell during the move: {ready_seen}"
    (move,) = hub.get("/v1/workloads/chat")["failovers"]
    assert (move["cause"], move["state"]) == ("placement", "moved")
    wait_until(lambda: hub.get("/v1/workloads/chat")["phase"] == "running", what="moved")
    wait_until(lambda: not hub.get("/v1/allocations?cluster_id=east")["allocations"])


def test_allocations_by_project(hub: Hub, agents: Callable[..., SimAgent]) -> None:
    token = hub.register_cluster("east")
    agents(cluster_id="east", token=token)
    with_devices(hub, "east")
    hub.create_project("search", H100_80GB=16)
    hub.create_project("ads", H100_80GB=16)
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    hub.post("/v1/workloads", workload("ranker", project="ads", replicas=1, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/ranker")["phase"] == "running")
    wait_until(lambda: len(hub.get("/v1/allocations?project=search")["allocations"]) == 2)
    ads = hub.get("/v1/allocations?project=ads")["allocations"]
    assert len(ads) == 1 and len(ads[0]["device_ids"]) == 4


def test_a_stale_cluster_takes_no_new_admission_until_its_agent_reports_again(
    tmp_path: Path,
) -> None:
    with running_hub(tmp_path, SHORT_GRACE) as (loop, hub):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=64)
        agent = start_agent(loop, hub, cluster_id="east", token=token)
        with_devices(hub, "east")
        hub.post("/v1/workloads", workload("before", replicas=1, clusters=("east",)))
        wait_until(lambda: phase(hub, "before.east")[0] == "running", what="running")

        agent.stop()  # the cluster goes quiet, with 12 of its 16 devices still free
        wait_until(lambda: hub.get("/v1/clusters/east")["stale"], what="stale")
        hub.post("/v1/workloads", workload("after", replicas=1, clusters=("east",)))
        assert phase(hub, "after.east") == ("pending", "insufficient_capacity")
        message = hub.get("/v1/deployments/after.east")["admission_message"]
        assert "cluster east is stale" in message, message
        before = hub.get("/v1/deployments/before.east")
        assert before["admitted_replicas"] == 1, "what was admitted keeps its reservation"

        again = start_agent(loop, hub, cluster_id="east", token=token)
        try:
            wait_until(
                lambda: phase(hub, "after.east")[0] in ("admitted", "placed", "running"),
                what="admitted once the cluster reports again",
            )
            wait_until(lambda: phase(hub, "after.east")[0] == "running", what="running")
        finally:
            again.stop()


def test_a_deployment_waiting_when_its_cluster_goes_stale_says_so(tmp_path: Path) -> None:
    with running_hub(tmp_path, SHORT_GRACE) as (loop, hub):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=64)
        agent = start_agent(loop, hub, cluster_id="east", token=token)
        with_devices(hub, "east")
        # A replica of 32 devices: none fits the 16 of east, so it waits whole.
        hub.post("/v1/workloads", workload("huge", replicas=1, tp=32, clusters=("east",)))
        assert phase(hub, "huge.east") == ("pending", "insufficient_capacity")
        assert "has 16 free" in hub.get("/v1/deployments/huge.east")["admission_message"]
        agent.stop()
        wait_until(
            lambda: "is stale" in hub.get("/v1/deployments/huge.east")["admission_message"],
            what="the waiting deployment learns its cluster is stale",
        )
