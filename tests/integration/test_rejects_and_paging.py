"""A spec the agent cannot apply is rejected and shown; lists page with next_page_token."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.harness import Hub, SimAgent, wait_until, workload

FOREIGN_DGD = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "chat", "namespace": "wingsmith"},
    "spec": {
        "backendFramework": "vllm",
        "services": {
            "Frontend": {"componentType": "frontend", "replicas": 1},
            "VllmDecodeWorker": {
                "componentType": "worker",
                "replicas": 1,
                "resources": {"limits": {"gpu": "4"}},
                "extraPodSpec": {"mainContainer": {"image": "vllm:0.10", "args": ["--model", "x"]}},
            },
        },
    },
}


def test_a_deployment_whose_dgd_name_is_taken_is_rejected_and_the_other_dgd_is_untouched(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token, seed_path=str(seed))
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    foreign_before = agent.cluster.list_dgds()[0].spec

    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    rejected = wait_until(
        lambda: (d := hub.get("/v1/deployments/chat.east"))["sync"]["rejected_error"] and d,
        what="rejected",
    )
    assert "not this deployment's" in rejected["sync"]["rejected_error"]
    assert rejected["sync"]["rejected_generation"] == 1
    assert rejected["admission_phase"] == "failed"
    assert hub.get("/v1/workloads/chat")["phase"] == "failed"
    (still,) = agent.cluster.list_dgds()
    assert still.spec == foreign_before, "the DGD that is not ours was not touched"


def test_lists_page_through_next_page_token(hub: Hub) -> None:
    for i in range(7):
        hub.create_project(f"p{i}", H100_80GB=1)
    names: list[str] = []
    token = ""
    pages = 0
    while True:
        page = hub.get(f"/v1/projects?page_size=3&page_token={token}")
        names += [p["name"] for p in page["projects"]]
        pages += 1
        token = page["next_page_token"]
        if not token:
            break
    assert names == [f"p{i}" for i in range(7)]
    assert pages == 3
    status, body = hub.rest("GET", "/v1/projects?page_token=garbage", check=False)
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")


def test_refs_accept_ids_and_readable_names(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    created = hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    by_name = hub.get("/v1/workloads/chat")
    by_id = hub.get(f"/v1/workloads/{created['workload_id']}")
    assert by_name == by_id
    deployment_id = created["deployments"][0]["deployment_id"]
    assert hub.get(f"/v1/deployments/{deployment_id}") == hub.get("/v1/deployments/chat.east")
    listed = hub.get(f"/v1/deployments?workload_id={created['workload_id']}&cluster_id=east")
    assert [d["deployment_id"] for d in listed["deployments"]] == [deployment_id]


def test_a_list_filter_naming_an_unknown_parent_is_404_naming_it(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    for path, kind, ref in [
        ("/v1/workloads?project=nope", "project", "nope"),
        ("/v1/deployments?cluster_id=mars", "cluster", "mars"),
        ("/v1/deployments?workload_id=ghost", "workload", "ghost"),
        ("/v1/replicas?cluster_id=mars", "cluster", "mars"),
        ("/v1/replicas?deployment_id=ghost.east", "deployment", "ghost.east"),
        ("/v1/allocations?project=nope", "project", "nope"),
        ("/v1/allocations?cluster_id=mars", "cluster", "mars"),
        ("/v1/allocations?replica_id=rep_ghost", "replica", "rep_ghost"),
        ("/v1/discovered?cluster_id=mars", "cluster", "mars"),
    ]:
        status, body = hub.rest("GET", path, check=False)
        assert (status, body["error"]["status"]) == (404, "NOT_FOUND"), path
        assert kind in body["error"]["message"] and ref in body["error"]["message"], body
    # Known parents with nothing under them are an empty page, not an error.
    hub.create_project("empty")
    hub.register_cluster("west")
    assert hub.get("/v1/workloads?project=empty")["workloads"] == []
    assert hub.get("/v1/deployments?cluster_id=west")["deployments"] == []
    assert hub.get("/v1/replicas?cluster_id=west")["replicas"] == []


def test_a_rejected_deployment_reserves_nothing_says_why_and_runs_once_the_cause_is_gone(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token, seed_path=str(seed))
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")

    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    rejected = wait_until(
        lambda: (d := hub.get("/v1/deployments/chat.east"))["admission_reason"] == "rejected" and d,
        what="the rejection shown as the admission reason",
    )
    assert "rejected generation 1" in rejected["admission_message"]
    assert "not this deployment's" in rejected["admission_message"]
    usage = hub.get("/v1/projects/search")["usage"]["H100-80GB"]
    assert usage["reserved"] == 0, "a deployment the agent cannot apply reserves nothing"

    # The cause goes away in the cluster: the agent's next reconcile applies it.
    agent.loop.run(asyncio.to_thread(agent.cluster.delete_dgd, "wingsmith", "chat"))
    wait_until(
        lambda: hub.get("/v1/deployments/chat.east")["admission_phase"] == "running",
        what="retried and running",
    )
    shown = hub.get("/v1/deployments/chat.east")
    assert shown["admission_reason"] is None and shown["sync"]["rejected_error"] == ""
