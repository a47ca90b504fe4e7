"""Priority and preemption on a real hub (--preemption) with real agents on simulated clusters:
a high-priority workload takes a low-priority one's replica, which waits (reason preempted,
naming the preemptor) and comes back when the room does; across projects only by policy."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import FAST, Hub, SimAgent, running_hub, start_agent, wait_until, workload
from tests.integration.test_adoption import legacy_dgd, seeded

ONE_NODE = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"


@pytest.fixture
def env(tmp_path: Any) -> Iterator[tuple[Any, Hub]]:
    with running_hub(tmp_path, dataclasses.replace(FAST, preemption=True)) as pair:
        yield pair


def deployment(hub: Hub, name: str) -> dict[str, Any]:
    return hub.get(f"/v1/deployments/{name}")


def ready(hub: Hub, name: str) -> int:
    return int((deployment(hub, name).get("status") or {}).get("ready_replicas") or 0)


def start_lab(hub: Hub, agents: Callable[..., SimAgent]) -> SimAgent:
    token = hub.register_cluster("lab")
    hub.create_project("search", H100_80GB=64)
    hub.create_project("ads", H100_80GB=64)
    agent = agents(cluster_id="lab", token=token, spec=ONE_NODE)
    wait_until(lambda: hub.get("/v1/clusters/lab")["devices"], what="devices reported")
    return agent


def test_a_high_priority_workload_preempts_a_low_one_which_returns_when_room_does(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    start_lab(hub, agents)
    batch = hub.post(
        "/v1/workloads", {**workload("batch", replicas=2, clusters=("lab",)), "priority": "low"}
    )
    assert batch["priority"] == "low"
    wait_until(lambda: ready(hub, "batch.lab") == 2, what="batch running on all 8 devices")

    # A dry run says what the create would preempt, and changes nothing.
    chat_body = {**workload("chat", replicas=1, clusters=("lab",)), "priority": "high"}
    preview = hub.post("/v1/workloads?validate_only=true", chat_body)["dry_run"]
    effects = {c["name"]: c["effects"] for c in preview["changes"]}
    assert "preempted" in effects["batch.lab"], preview
    assert deployment(hub, "batch.lab")["admitted_replicas"] == 2

    chat = hub.post("/v1/workloads", chat_body)
    assert chat["priority"] == "high"
    victim = deployment(hub, "batch.lab")
    assert victim["admitted_replicas"] == 1
    assert victim["admission_reason"] == "preempted"
    assert victim["admission_message"] == (
        "1 of its 2 admitted replicas preempted by chat (priority high, project search) on"
        " cluster lab; it waits until room returns"
    )
    assert victim["priority"] == "low"
    # The agent scales the victim down; its devices go to the preemptor.
    wait_until(lambda: ready(hub, "chat.lab") == 1, what="chat running on the freed devices")
    assert ready(hub, "batch.lab") == 1
    victim = deployment(hub, "batch.lab")
    assert (victim["admitted_replicas"], victim["admission_reason"]) == (1, "preempted")
    assert "preempted by chat" in victim["admission_message"]
    assert deployment(hub, "chat.lab")["admission_reason"] is None

    # The preemptor goes: the victim is admitted again and runs both replicas.
    hub.rest("DELETE", "/v1/workloads/chat")
    wait_until(lambda: ready(hub, "batch.lab") == 2, what="batch back to 2 replicas")
    victim = deployment(hub, "batch.lab")
    assert (victim["admitted_replicas"], victim["admission_reason"]) == (2, None)


def test_across_projects_only_when_the_victims_project_allows_it(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    start_lab(hub, agents)
    hub.post(
        "/v1/workloads", {**workload("batch", replicas=2, clusters=("lab",)), "priority": "low"}
    )
    wait_until(lambda: ready(hub, "batch.lab") == 2, what="batch running")

    ads = workload("ads-chat", project="ads", replicas=1, clusters=("lab",))
    hub.post("/v1/workloads", {**ads, "priority": "critical"})
    waiting = deployment(hub, "ads-chat.lab")
    assert (waiting["admission_phase"], waiting["admission_reason"]) == (
        "pending",
        "insufficient_capacity",
    )
    assert deployment(hub, "batch.lab")["admitted_replicas"] == 2

    # The admin lets other projects preempt search: the waiting critical workload does.
    project = hub.patch("/v1/projects/search", {"preemptible_by_other_projects": True})
    assert project["preemptible_by_other_projects"] is True
    victim = deployment(hub, "batch.lab")
    assert (victim["admitted_replicas"], victim["admission_reason"]) == (1, "preempted")
    assert "(priority critical, project ads)" in victim["admission_message"]
    wait_until(lambda: ready(hub, "ads-chat.lab") == 1, what="ads-chat running")


def test_priority_orders_and_changes_but_nothing_is_preempted_without_the_flag(
    tmp_path: Any,
) -> None:
    with running_hub(tmp_path) as (loop, hub):
        agents: list[SimAgent] = []
        try:
            token = hub.register_cluster("lab")
            hub.create_project("search", H100_80GB=64)
            agents.append(start_agent(loop, hub, cluster_id="lab", token=token, spec=ONE_NODE))
            wait_until(lambda: hub.get("/v1/clusters/lab")["devices"], what="devices reported")
            hub.post("/v1/workloads", workload("batch", replicas=2, clusters=("lab",)))
            assert hub.get("/v1/workloads/batch")["priority"] == "normal"
            wait_until(lambda: ready(hub, "batch.lab") == 2, what="batch running")
            hub.post(
                "/v1/workloads",
                {**workload("chat", replicas=1, clusters=("lab",)), "priority": "critical"},
            )
            assert deployment(hub, "chat.lab")["admission_reason"] == "insufficient_capacity"
            assert deployment(hub, "batch.lab")["admitted_replicas"] == 2
            # Priority can change; a bad class is refused saying what is accepted.
            assert hub.patch("/v1/workloads/batch", {"priority": "low"})["priority"] == "low"
            assert deployment(hub, "batch.lab")["priority"] == "low"
            assert deployment(hub, "batch.lab")["admitted_replicas"] == 2
            status, body = hub.rest(
                "PATCH", "/v1/workloads/batch", {"priority": "PRIORITY_SUPREME"}, check=False
            )
            assert status == 400, body
        finally:
            for agent in agents:
                agent.stop()


def test_an_observed_deployment_is_never_preempted_even_of_the_lowest_class(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    """An adopted DGD (observed: the hub never writes it) of class low holds 4 devices; a
    managed normal one holds the other 12. A critical workload that needs 8 takes them from
    the managed one, though the observed one is of a lower class."""
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=64)
    agent = agents(cluster_id="east", token=token, seed_path=seeded(tmp_path, legacy_dgd()))
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    assert hub.patch("/v1/workloads/legacy-qwen", {"priority": "low"})["priority"] == "low"
    wait_until(lambda: ready(hub, "legacy-qwen.east") == 2, what="the adopted DGD reported")
    hub.post("/v1/workloads", workload("filler", replicas=3, clusters=("east",)))
    wait_until(lambda: ready(hub, "filler.east") == 3, what="filler on the other 12 devices")
    observed = deployment(hub, "legacy-qwen.east")
    assert observed["authority"] == "observed"

    chat = workload("chat", replicas=1, tp=8, clusters=("east",))
    hub.post("/v1/workloads", {**chat, "priority": "critical"})
    victim = deployment(hub, "filler.east")
    assert (victim["admitted_replicas"], victim["admission_reason"]) == (1, "preempted")
    assert deployment(hub, "legacy-qwen.east")["admitted_replicas"] == observed["admitted_replicas"]
    assert deployment(hub, "legacy-qwen.east")["admission_reason"] is None
    wait_until(lambda: ready(hub, "chat.east") == 1, what="chat running")
    assert ready(hub, "legacy-qwen.east") == 2
    assert len(agent.cluster.list_dgds()) == 3


def test_the_preemption_policy_is_the_admins_and_a_workloads_priority_its_operators(
    hub: Hub,
) -> None:
    hub.create_project("search", H100_80GB=8)
    hub.register_cluster("lab")
    body = {"name": "ops", "role": "operator", "projects": ["search"]}
    operator = hub.post("/v1/tokens", body)["secret"]
    status, answer = hub.rest(
        "PATCH",
        "/v1/projects/search",
        {"preemptible_by_other_projects": True},
        token=operator,
        check=False,
    )
    assert status == 403, answer
    assert hub.get("/v1/projects/search")["preemptible_by_other_projects"] is False
    hub.rest("POST", "/v1/workloads", workload("chat", clusters=("lab",)), token=operator)
    status, answer = hub.rest(
        "PATCH", "/v1/workloads/chat", {"priority": "critical"}, token=operator
    )
    assert (status, answer["priority"]) == (200, "critical")
