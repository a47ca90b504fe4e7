"""From the hub, an operator sees the exact object the agent applied for a deployment (issue 9,
item 7): its coordinates on every deployment read, its full body over REST, gRPC and the CLI,
from a real agent on a simulated cluster."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest
import yaml

from cli import main as cli_main
from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until, workload
from wingsmith.v1 import control_pb2, control_pb2_grpc


def applied_body(hub: Hub, ref: str) -> dict[str, Any]:
    answer = hub.get(f"/v1/deployments/{ref}/applied")
    assert answer["digest"] == "sha256:" + hashlib.sha256(answer["body"].encode()).hexdigest()
    body: dict[str, Any] = json.loads(answer["body"])
    return body


def test_the_applied_object_is_shown_by_rest_grpc_and_the_cli(
    hub: Hub, agents: Callable[..., SimAgent], capsys: pytest.CaptureFixture[str]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    status, error = hub.rest("GET", "/v1/deployments/chat.east/applied", check=False)
    assert (status, error["error"]["status"]) == (404, "NOT_FOUND")
    assert "has not reported one yet" in error["error"]["message"]
    assert hub.get("/v1/deployments/chat.east")["applied"] is None

    agent = agents(cluster_id="east", token=token)
    shown = wait_until(
        lambda: (d := hub.get("/v1/deployments/chat.east"))["applied"] and d,
        what="the applied object reported",
    )
    applied = shown["applied"]
    assert (applied["api_version"], applied["kind"]) == (
        "nvidia.com/v1alpha1",
        "DynamoGraphDeployment",
    )
    assert (applied["namespace"], applied["name"]) == ("wingsmith", "chat")
    assert applied["body"] == "", "a deployment read carries coordinates, not the body"

    # REST: the whole object, exactly as the cluster holds it.
    body = applied_body(hub, "chat.east")
    (dgd,) = agent.cluster.list_dgds()
    assert body["spec"] == dgd.spec
    assert body["metadata"]["labels"] == dict(dgd.labels)
    assert (body["apiVersion"], body["kind"]) == ("nvidia.com/v1alpha1", "DynamoGraphDeployment")
    assert "status" not in body

    # gRPC: the same answer.
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        answer = stub.GetAppliedObject(
            control_pb2.GetAppliedObjectRequest(ref="chat.east"),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
        )
    assert json.loads(answer.body) == body
    assert answer.digest == applied["digest"]

    # CLI: the object as YAML one could apply, under comments saying where it comes from.
    capsys.readouterr()
    url = f"http://127.0.0.1:{hub.http_port}"
    code = cli_main.main(
        ["get", "deployment", "chat.east", "--applied", "--hub-url", url, "--token", ADMIN_TOKEN]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert printed.startswith("# applied for deployment dep_")
    assert applied["digest"] in printed
    assert yaml.safe_load(printed) == body

    # A scale is a new object: the digest follows what the agent applies.
    hub.patch("/v1/workloads/chat", {"replicas": 2})
    wait_until(
        lambda: hub.get("/v1/deployments/chat.east")["applied"]["digest"] != applied["digest"],
        what="the new object reported",
    )
    assert applied_body(hub, "chat.east")["spec"] == agent.cluster.list_dgds()[0].spec
