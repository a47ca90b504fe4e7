"""REST list answers, made straight from the views (hub/api/jsonview.py), against a real hub and
real simulated agents on both store backends: every list endpoint's bytes are what the gRPC
answer (a message, the message path) reads as through jsonmap.to_json, and every page the hub
answered was checked against the message path from the same views (the suite-wide check in
tests/integration/conftest.py)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from hub.api import jsonmap
from tests.harness import ADMIN_TOKEN, Hub, running_hub, start_agent, wait_until
from tests.harness import workload as workload_body
from tests.integration.test_label_selectors import FOREIGN_DGD, SPEC
from wingsmith.v1 import control_pb2, control_pb2_grpc

AUTH = (("authorization", f"Bearer {ADMIN_TOKEN}"),)

# REST path -> the gRPC call of the same list.
LISTS: dict[str, Callable[[control_pb2_grpc.ControlServiceStub], Any]] = {
    "/v1/projects": lambda s: s.ListProjects(control_pb2.ListProjectsRequest(), metadata=AUTH),
    "/v1/clusters": lambda s: s.ListClusters(control_pb2.ListClustersRequest(), metadata=AUTH),
    "/v1/workloads": lambda s: s.ListWorkloads(control_pb2.ListWorkloadsRequest(), metadata=AUTH),
    "/v1/deployments": lambda s: s.ListDeployments(
        control_pb2.ListDeploymentsRequest(), metadata=AUTH
    ),
    "/v1/discovered": lambda s: s.ListDiscovered(
        control_pb2.ListDiscoveredRequest(), metadata=AUTH
    ),
    "/v1/replicas": lambda s: s.ListReplicas(control_pb2.ListReplicasRequest(), metadata=AUTH),
    "/v1/allocations": lambda s: s.ListAllocations(
        control_pb2.ListAllocationsRequest(), metadata=AUTH
    ),
    "/v1/tokens": lambda s: s.ListApiTokens(control_pb2.ListApiTokensRequest(), metadata=AUTH),
    "/v1/audit": lambda s: s.ListAuditRecords(control_pb2.ListAuditRecordsRequest(), metadata=AUTH),
}


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hub]:
    """Two clusters with agents, a project, two workloads (one updated, so rolling out), a DGD
    nobody declared (discovered), a scoped token: something in every list."""
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))
    with running_hub(tmp_path, backend=str(request.param)) as (loop, hub):
        east = hub.register_cluster("east", region="eu")
        west = hub.register_cluster("west", region="us")
        hub.create_project("search", H100_80GB=16)
        agents = [
            start_agent(loop, hub, cluster_id="east", token=east, spec=SPEC),
            start_agent(loop, hub, cluster_id="west", token=west, spec=SPEC, seed_path=str(seed)),
        ]
        try:
            for name, clusters in (("chat", ("east", "west")), ("rank", ("west",))):
                body = workload_body(name, replicas=len(clusters), tp=2, clusters=clusters)
                hub.post("/v1/workloads", {**body, "labels": {"app": name}})
            hub.post("/v1/tokens", {"name": "viewer", "role": "viewer", "projects": ["search"]})
            wait_until(
                lambda: (
                    len(hub.get("/v1/replicas").get("replicas", [])) == 3
                    and hub.get("/v1/discovered").get("discovered")
                ),
                what="three replicas and the foreign DGD",
                timeout=60,
            )
            hub.patch(
                "/v1/workloads/chat",
                {"serving": {**workload_body("chat", tp=2)["serving"], "context_length": 4096}},
            )
            yield hub
        finally:
            for agent in agents:
                agent.stop()


def _rest_bytes(hub: Hub, path: str) -> bytes:
    request = urllib.request.Request(
        f"http://127.0.0.1:{hub.http_port}{path}",
        headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        body: bytes = response.read()
        return body


def test_every_rest_list_is_the_grpc_answers_bytes(
    fleet: Hub, rest_lists_checked: list[tuple[str, int]]
) -> None:
    with grpc.insecure_channel(fleet.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        for path, call in LISTS.items():

            def same(path: str = path, call: Any = call) -> bool:
                # The fleet moves on between the two reads (a report, a heartbeat): read both
                # again until one pair was taken at the same state.
                by_grpc = json.dumps(jsonmap.to_json(call(stub))).encode()
                return _rest_bytes(fleet, path) == by_grpc

            wait_until(same, what=f"{path} over REST equal to gRPC's answer", timeout=60)
            key = {"/v1/tokens": "tokens", "/v1/audit": "records"}.get(path, path[4:])
            assert json.loads(_rest_bytes(fleet, path))[key], f"{path}: an empty list proves little"
    # Every list was answered straight from the views, and checked against the message path.
    checked = {name for name, items in rest_lists_checked if items}
    assert checked >= {
        "wingsmith.v1.ListProjectsResponse",
        "wingsmith.v1.ListClustersResponse",
        "wingsmith.v1.ListWorkloadsResponse",
        "wingsmith.v1.ListDeploymentsResponse",
        "wingsmith.v1.ListDiscoveredResponse",
        "wingsmith.v1.ListReplicasResponse",
        "wingsmith.v1.ListAllocationsResponse",
        "wingsmith.v1.ListApiTokensResponse",
        "wingsmith.v1.ListAuditRecordsResponse",
    }
