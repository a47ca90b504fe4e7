"""A label selector on every list, against a real hub and real simulated agents, on both store
backends: clusters by their own labels (set by an operator through UpdateCluster), deployments,
replicas, allocations and discovered workloads by their workload's labels; over REST
(`?label_selector=`, every page of one full) and gRPC; a bad selector is 400 / INVALID_ARGUMENT
naming the parameter and the bad term (docs/rest.md "Labels")."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import field_mask_pb2

from tests.harness import ADMIN_TOKEN, Hub, LoopThread, running_hub, start_agent, wait_until
from tests.harness import workload as workload_body
from wingsmith.v1 import control_pb2, control_pb2_grpc, resources_pb2

AUTH = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
SPEC = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
# A DGD nobody declared, found on west (a discovered entry, until promoted).
FOREIGN_DGD = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "legacy", "namespace": "ml"},
    "spec": {
        "backendFramework": "vllm",
        "services": {
            "Frontend": {"componentType": "frontend", "replicas": 1},
            "VllmDecodeWorker": {
                "componentType": "worker",
                "replicas": 1,
                "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {"image": "vllm:0.10", "args": ["--model", "x"]}},
            },
        },
    },
}


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hub]:
    """Two clusters (east: region=eu, west: region=us), three running workloads: chat
    (app=chat, env=prod) and bare (no labels) on east, rank (app=rank) on west."""
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))
    with running_hub(tmp_path, backend=str(request.param)) as (loop, hub):
        agents = _start(loop, hub, seed)
        try:
            for name, cluster, labels in (
                ("chat", "east", {"app": "chat", "env": "prod"}),
                ("bare", "east", {}),
                ("rank", "west", {"app": "rank"}),
            ):
                body = workload_body(name, replicas=1, tp=2, clusters=(cluster,))
                hub.post("/v1/workloads", {**body, "labels": labels})
            # Each workload's pod and the foreign DGD's worker hold devices.
            wait_until(
                lambda: (
                    len(hub.get("/v1/allocations").get("allocations", [])) == 4
                    and len(hub.get("/v1/replicas").get("replicas", [])) == 3
                ),
                what="four pods holding devices, three of them replicas",
                timeout=60,
            )
            wait_until(lambda: hub.get("/v1/discovered").get("discovered"), what="the foreign DGD")
            yield hub
        finally:
            for agent in agents:
                agent.stop()


def _start(loop: LoopThread, hub: Hub, seed: Path) -> list[Any]:
    east = hub.register_cluster("east", region="eu")
    west = hub.register_cluster("west", region="us")
    hub.create_project("search", H100_80GB=16)
    return [
        start_agent(loop, hub, cluster_id="east", token=east, spec=SPEC),
        start_agent(loop, hub, cluster_id="west", token=west, spec=SPEC, seed_path=str(seed)),
    ]


def listed(hub: Hub, path: str, selector: str, page_size: int = 0) -> list[dict[str, Any]]:
    """Every page of a REST list with `label_selector`, joined; every page but the last full."""
    plural = path.rsplit("/", 1)[1]
    found: list[dict[str, Any]] = []
    token = ""
    while True:
        query: dict[str, Any] = {"label_selector": selector}
        if page_size:
            query["page_size"] = page_size
        if token:
            query["page_token"] = token
        page = hub.get(f"{path}?{urllib.parse.urlencode(query)}")
        items = page.get(plural, [])
        token = page.get("next_page_token", "")
        if token:
            assert len(items) == page_size, "a page before the last is full"
        found += items
        if not token:
            return found


def workloads_of(hub: Hub, items: list[dict[str, Any]]) -> list[str]:
    """The workload names behind deployments, replicas or allocations (by deployment id)."""
    names = {
        d["deployment_id"]: d["workload_name"] for d in hub.get("/v1/deployments")["deployments"]
    }
    return sorted(names.get(i["deployment_id"], "-") for i in items)


@pytest.mark.parametrize(
    ("selector", "expected", "unlabeled"),
    [
        ("", ["bare", "chat", "rank"], True),
        ("app=chat", ["chat"], False),
        ("app!=chat", ["bare", "rank"], True),
        ("app", ["chat", "rank"], False),
        ("!app", ["bare"], True),
        ("app=chat,env=dev", [], False),
    ],
)
def test_deployments_replicas_and_allocations_select_by_their_workloads_labels(
    fleet: Hub, selector: str, expected: list[str], unlabeled: bool
) -> None:
    """`unlabeled`: the selector matches an object with no labels, as the foreign DGD's pod
    (an allocation of no deployment, so of no workload) is."""
    for path in ("/v1/deployments", "/v1/replicas", "/v1/allocations"):
        wanted = sorted([*expected, "-"]) if unlabeled and path == "/v1/allocations" else expected
        for page_size in (0, 1):
            found = listed(fleet, path, selector, page_size)
            assert workloads_of(fleet, found) == wanted, (path, page_size)


def test_clusters_select_by_labels_an_operator_sets(fleet: Hub) -> None:
    assert [c["cluster_id"] for c in listed(fleet, "/v1/clusters", "region=eu", 1)] == ["east"]
    changed = fleet.patch("/v1/clusters/west", {"labels": {"region": "eu", "tier": "gold"}})
    assert changed["labels"] == {"region": "eu", "tier": "gold"}
    assert [c["cluster_id"] for c in listed(fleet, "/v1/clusters", "region=eu", 1)] == [
        "east",
        "west",
    ]
    assert [c["cluster_id"] for c in listed(fleet, "/v1/clusters", "!tier")] == ["east"]
    # Dry run: answered, nothing written.
    status, body = fleet.rest(
        "PATCH", "/v1/clusters/west?validate_only=true", {"labels": {}}, check=False
    )
    assert status == 200 and body.get("dry_run"), body
    assert fleet.get("/v1/clusters/west")["labels"] == {"region": "eu", "tier": "gold"}
    # Audited as any change.
    audit = fleet.get("/v1/audit?action=UpdateCluster")["records"]
    assert [r["target"] for r in audit] == ["cluster/west"]
    # A bad label is refused, naming it; nothing changes.
    status, body = fleet.rest("PATCH", "/v1/clusters/west", {"labels": {"-x": "y"}}, check=False)
    assert status == 400 and "cluster.labels.-x" in str(body), body
    refused = fleet.get("/v1/audit?action=UpdateCluster&outcome=INVALID_ARGUMENT")["records"]
    assert [r["target"] for r in refused] == ["cluster/west"], "a refusal is audited too"
    status, body = fleet.rest("PATCH", "/v1/clusters/nowhere", {"labels": {}}, check=False)
    assert status == 404, body


def test_discovered_select_by_the_workload_they_were_promoted_to(fleet: Hub) -> None:
    (entry,) = listed(fleet, "/v1/discovered", "!app")
    assert listed(fleet, "/v1/discovered", "app") == []
    fleet.post(f"/v1/discovered/{entry['name']}/promote", {"project": "search"})
    fleet.patch("/v1/workloads/legacy", {"labels": {"app": "legacy"}})
    assert [d["name"] for d in listed(fleet, "/v1/discovered", "app=legacy")] == [entry["name"]]
    assert listed(fleet, "/v1/discovered", "!app") == []


def test_every_list_selects_over_grpc(fleet: Hub) -> None:
    channel = grpc.insecure_channel(fleet.grpc_target)
    stub = control_pb2_grpc.ControlServiceStub(channel)
    try:
        clusters = stub.ListClusters(
            control_pb2.ListClustersRequest(label_selector="region=us"), metadata=AUTH
        )
        assert [c.cluster_id for c in clusters.clusters] == ["west"]
        deployments = stub.ListDeployments(
            control_pb2.ListDeploymentsRequest(label_selector="app=rank"), metadata=AUTH
        )
        assert [d.name for d in deployments.deployments] == ["rank.west"]
        replicas = stub.ListReplicas(
            control_pb2.ListReplicasRequest(label_selector="env=prod"), metadata=AUTH
        )
        assert {r.deployment_id for r in replicas.replicas} == {
            d["deployment_id"] for d in fleet.get("/v1/deployments?workload_id=chat")["deployments"]
        }
        allocations = stub.ListAllocations(
            control_pb2.ListAllocationsRequest(label_selector="!app", page_size=1), metadata=AUTH
        )
        assert len(allocations.allocations) == 1
        discovered = stub.ListDiscovered(
            control_pb2.ListDiscoveredRequest(label_selector="app"), metadata=AUTH
        )
        assert list(discovered.discovered) == []
        updated = stub.UpdateCluster(
            control_pb2.UpdateClusterRequest(
                cluster_id="east",
                cluster=resources_pb2.Cluster(labels={"region": "ap"}),
                update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
            ),
            metadata=AUTH,
        )
        assert dict(updated.labels) == {"region": "ap"}
    finally:
        channel.close()


LISTS = ("clusters", "deployments", "replicas", "allocations", "discovered")


@pytest.mark.parametrize("plural", LISTS)
def test_a_bad_selector_is_400_naming_the_term(fleet: Hub, plural: str) -> None:
    query = urllib.parse.urlencode({"label_selector": "app=chat,-bad=x"})
    status, body = fleet.rest("GET", f"/v1/{plural}?{query}", check=False)
    assert status == 400, body
    assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert "label_selector" in str(body) and "-bad=x" in str(body), body


def test_a_bad_selector_over_grpc_is_invalid_argument_naming_the_term(fleet: Hub) -> None:
    channel = grpc.insecure_channel(fleet.grpc_target)
    stub = control_pb2_grpc.ControlServiceStub(channel)
    calls = (
        (stub.ListClusters, control_pb2.ListClustersRequest),
        (stub.ListDeployments, control_pb2.ListDeploymentsRequest),
        (stub.ListReplicas, control_pb2.ListReplicasRequest),
        (stub.ListAllocations, control_pb2.ListAllocationsRequest),
        (stub.ListDiscovered, control_pb2.ListDiscoveredRequest),
    )
    try:
        for call, request in calls:
            with pytest.raises(grpc.RpcError) as caught:
                call(request(label_selector="tier in (gold)"), metadata=AUTH)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, call
            details = caught.value.details() or ""
            assert "label_selector" in details and "tier in (gold)" in details, details
    finally:
        channel.close()
