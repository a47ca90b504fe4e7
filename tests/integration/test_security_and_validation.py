"""Identity on the stream and the control API, and malformed input at both edges."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from tests import stores
from tests.harness import ADMIN_TOKEN, Hub, SimAgent, running_hub, wait_until, workload
from tests.integration.rawstream import RawStream, now_ns
from wingsmith.v1 import control_pb2, control_pb2_grpc, resources_pb2, sync_pb2


def stream_error(stream: RawStream) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        for _ in range(10):
            stream.receive()
    return caught.value


def test_a_bad_cluster_token_is_unauthenticated(hub: Hub) -> None:
    hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, "wsa_not-a-real-token")
    stream.hello("east")
    assert stream_error(stream).code() == grpc.StatusCode.UNAUTHENTICATED
    stream.close()


def test_a_token_used_for_another_cluster_is_permission_denied(hub: Hub) -> None:
    token_a = hub.register_cluster("east")
    hub.register_cluster("west")
    stream = RawStream(hub.grpc_target, token_a)
    stream.hello("west")
    error = stream_error(stream)
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "east" in (error.details() or "")
    stream.close()


def test_a_stream_of_cluster_a_cannot_write_b_observations(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token_a = hub.register_cluster("east")
    token_b = hub.register_cluster("west")
    hub.create_project("search", H100_80GB=16)
    agents(cluster_id="west", token=token_b)
    wait_until(lambda: hub.get("/v1/clusters/west")["devices"], what="west reports")
    hub.post("/v1/workloads", workload("chat", clusters=("west",)))
    west = hub.get("/v1/deployments/chat.west")
    wait_until(lambda: hub.get("/v1/deployments/chat.west")["status"], what="west's status")
    before = hub.get("/v1/deployments/chat.west")["status"]

    stream = RawStream(hub.grpc_target, token_a)
    stream.hello("east")
    stream.receive_kind("welcome")
    forged = sync_pb2.ObservationBatch(
        seq=1,
        deployments=[
            sync_pb2.DeploymentObservation(
                deployment_id=west["deployment_id"],
                observe_unix_nanos=now_ns(),
                status=sync_pb2.DeploymentStatusReport(phase="failed", ready_replicas=0),
            )
        ],
    )
    stream.send(observations=forged)
    assert stream_error(stream).code() == grpc.StatusCode.PERMISSION_DENIED
    stream.close()
    after = hub.get("/v1/deployments/chat.west")["status"]
    assert after["phase"] == before["phase"] and after["phase"] != "failed"


def test_a_stream_only_receives_its_own_clusters_desired_state(hub: Hub) -> None:
    token_a = hub.register_cluster("east")
    hub.register_cluster("west")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("on-west", clusters=("west",)))
    hub.post("/v1/workloads", workload("on-east", clusters=("east",)))
    stream = RawStream(hub.grpc_target, token_a)
    stream.hello("east")
    snapshot = stream.receive_kind("desired").desired
    assert snapshot.snapshot is True
    assert [s.workload_name for s in snapshot.upserts] == ["on-east"]
    stream.close()


def test_a_malformed_observation_gets_a_problem_and_changes_nothing(hub: Hub) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")
    stream.receive_kind("welcome")
    good_device = resources_pb2.Device(
        uuid="GPU-00000001-0000-4000-8000-000000000001",
        device_class="H100-80GB",
        healthy=True,
        verified=True,
    )
    bad = sync_pb2.ObservationBatch(
        seq=1,
        nodes=[
            sync_pb2.NodeObservation(
                node_id="node-a", observe_unix_nanos=now_ns(), devices=[good_device]
            ),
            sync_pb2.NodeObservation(
                node_id="node-b",
                observe_unix_nanos=now_ns(),
                devices=[
                    resources_pb2.Device(
                        uuid="GPU-00000002-0000-4000-8000-000000000002", device_class="H100 80GB"
                    )
                ],
            ),
        ],
    )
    stream.send(observations=bad)
    problem = stream.receive_kind("problem").problem
    assert problem.seq == 1 and problem.code == "INVALID_ARGUMENT"
    assert "observations.nodes[1].devices[0].device_class" in problem.message
    # The whole batch was refused: not even the good node was stored.
    assert hub.get("/v1/clusters/east")["nodes"] == []

    stream.send(observations=sync_pb2.ObservationBatch(seq=2, nodes=[bad.nodes[0]]))
    wait_until(lambda: hub.get("/v1/clusters/east")["nodes"], what="the good batch lands")
    stream.send(observations=sync_pb2.ObservationBatch(seq=2, nodes=[bad.nodes[0]]))
    assert "must increase" in stream.receive_kind("problem").problem.message
    stream.close()


@pytest.mark.parametrize(
    "batch",
    [
        sync_pb2.ObservationBatch(seq=0),
        sync_pb2.ObservationBatch(
            seq=1,
            deployments=[sync_pb2.DeploymentObservation(deployment_id="x", observe_unix_nanos=1)],
        ),
        sync_pb2.ObservationBatch(
            seq=1,
            nodes=[sync_pb2.NodeObservation(node_id="n", observe_unix_nanos=now_ns() + 10**15)],
        ),
        sync_pb2.ObservationBatch(
            seq=1,
            nodes=[
                sync_pb2.NodeObservation(
                    node_id="n",
                    observe_unix_nanos=now_ns(),
                    allocations=[sync_pb2.AllocationReport(pod_name="p", namespace="ns")],
                )
            ],
        ),
    ],
    ids=["seq zero", "bad deployment id", "far future time", "allocation without devices"],
)
def test_malformed_batches_are_refused(hub: Hub, batch: sync_pb2.ObservationBatch) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")
    stream.receive_kind("welcome")
    stream.send(observations=batch)
    assert stream.receive_kind("problem").problem.code == "INVALID_ARGUMENT"
    stream.close()


def test_the_first_message_must_be_a_hello(hub: Hub) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.send(heartbeat=sync_pb2.Heartbeat(sent_unix_ms=1))
    assert stream_error(stream).code() == grpc.StatusCode.INVALID_ARGUMENT
    stream.close()


def test_the_control_api_needs_the_admin_token_on_both_edges(hub: Hub) -> None:
    for token, expected in ((None, 401), ("wrong-token-but-long-enough", 401)):
        status, body = hub.rest("GET", "/v1/clusters", token=token, check=False)
        assert status == expected
        assert body["error"]["status"] == "UNAUTHENTICATED"
    channel = grpc.insecure_channel(hub.grpc_target)
    stub = control_pb2_grpc.ControlServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListClusters(control_pb2.ListClustersRequest())
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    response = stub.ListClusters(
        control_pb2.ListClustersRequest(), metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),)
    )
    assert response.clusters == []
    channel.close()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**workload("x"), "replicas": -1}, "workload.replicas"),
        ({**workload("Bad_Name")}, "workload.name"),
        ({**workload("x"), "device_class": "H100 80GB"}, "workload.device_class"),
        (workload("x", engine="vlm"), "workload.serving.engine"),
        (workload("x", tp=4, expert_parallel=3), "workload.serving.expert_parallel"),
        ({**workload("x"), "placement": {"clusters": ["mars"]}}, "placement.clusters"),
        ({**workload("x"), "unknown_field": 1}, "unknown_field"),
        # Dynamo cannot read a runtime version off these tags: the workload must say it.
        (workload("x", image="mirror/vllm:1.3.1.post1"), "workload.serving.runtime_version"),
        (workload("x", image="mirror/vllm:latest"), "workload.serving.runtime_version"),
        (
            workload("x", image="mirror/vllm:dev", runtime_version="1.5"),
            "workload.serving.runtime_version",
        ),
    ],
)
def test_bad_workloads_get_400_naming_the_field_and_nothing_is_stored(
    hub: Hub, body: dict[str, object], field: str
) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    before = hub.get("/v1/workloads")
    status, error = hub.rest("POST", "/v1/workloads", body, check=False)
    assert status == 400, error
    assert error["error"]["status"] == "INVALID_ARGUMENT"
    assert field in error["error"]["message"]
    assert hub.get("/v1/workloads") == before


def test_a_workload_naming_a_project_that_does_not_exist_is_404_and_nothing_is_stored(
    hub: Hub,
) -> None:
    # A well-formed name of nothing is no bad argument: 404, as for a token naming one (the
    # OpenAPI document allows any well-formed name, and a request it allows is never 400).
    hub.register_cluster("east")
    status, error = hub.rest(
        "POST", "/v1/workloads", {**workload("x"), "project": "nope"}, check=False
    )
    assert (status, error["error"]["status"]) == (404, "NOT_FOUND"), error
    assert error["error"]["message"] == "project 'nope' not found"
    assert hub.get("/v1/workloads")["workloads"] == []


def test_conflicts_and_missing_resources_get_the_right_statuses(hub: Hub) -> None:
    hub.create_project("search", H100_80GB=16)
    status, body = hub.rest("POST", "/v1/projects", {"name": "search"}, check=False)
    assert (status, body["error"]["status"]) == (409, "ALREADY_EXISTS")
    status, body = hub.rest("GET", "/v1/workloads/ghost", check=False)
    assert (status, body["error"]["status"]) == (404, "NOT_FOUND")
    hub.register_cluster("east")
    hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    status, body = hub.rest("DELETE", "/v1/projects/search", check=False)
    assert (status, body["error"]["status"]) == (409, "FAILED_PRECONDITION")
    status, body = hub.rest("PATCH", "/v1/workloads/chat", {"name": "renamed"}, check=False)
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert hub.get("/v1/workloads/chat")["name"] == "chat"


@pytest.mark.parametrize("backend", stores.BACKENDS)
def test_a_nul_character_anywhere_is_refused_naming_the_field_on_every_backend(
    tmp_path: Path, backend: str
) -> None:
    """PostgreSQL cannot hold a NUL in a text column: before, a lookup or a write carrying one
    answered 500 / INTERNAL there (psycopg's DataError), and the refused call's audit record
    was lost with it."""
    with running_hub(tmp_path, backend=backend) as (_, hub):
        hub.create_project("search", H100_80GB=8)
        hub.register_cluster("east")
        status, body = hub.rest("GET", "/v1/projects/se%00arch", check=False)
        assert (status, body["error"]["message"]) == (
            400,
            "name: must not contain a NUL character (\\u0000)",
        )
        bad = workload("chat", engine_args=["--served-model-name", "a\x00b"])
        status, body = hub.rest("POST", "/v1/workloads", bad, check=False)
        assert status == 400
        assert body["error"]["message"].startswith("workload.serving.engine_args[1]: ")
        status, body = hub.rest(
            "PATCH", "/v1/projects/search", {"quotas": {"H100\x00": 4}}, check=False
        )
        assert status == 400 and "quotas['H100\\x00']" in body["error"]["message"]
        channel = grpc.insecure_channel(hub.grpc_target)
        try:
            with pytest.raises(grpc.RpcError) as caught:
                control_pb2_grpc.ControlServiceStub(channel).GetWorkload(
                    control_pb2.GetWorkloadRequest(ref="ch\x00at"),
                    metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
                )
        finally:
            channel.close()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Nothing stored changed, and each refused change is in the audit log.
        assert hub.get("/v1/projects/search")["quotas"] == {"H100-80GB": 8}
        assert hub.get("/v1/workloads")["workloads"] == []
        refused = [
            r
            for r in hub.get("/v1/audit?page_size=50")["records"]
            if r["outcome"] == "INVALID_ARGUMENT"
        ]
        assert {r["action"] for r in refused} >= {"CreateWorkload", "UpdateProject"}


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("meta-llama/Llama-3.3-70B-Instruct\r\nimage: evil", "control character"),
        ("meta-llama/Llama-3.3-70B-Instruct\t", "control character"),
        ("../x", "invalid model reference"),
        ("..", "invalid model reference"),
        ("meta-llama/../secrets", "invalid model reference"),
    ],
)
def test_a_model_reference_with_control_characters_or_traversal_is_a_400_naming_it(
    hub: Hub, model: str, problem: str
) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    body = workload("chat", clusters=("east",))
    body["serving"]["model"] = model
    status, answer = hub.rest("POST", "/v1/workloads", body, check=False)
    assert status == 400, answer
    assert answer["error"]["message"].startswith("workload.serving.model: ")
    assert problem in answer["error"]["message"]
    assert hub.get("/v1/workloads")["workloads"] == []


def test_a_control_character_in_any_string_field_is_a_400_naming_it(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    body = workload("chat", clusters=("east",))
    body["serving"]["engine_args"] = ["--chat-template", "{{ a }}\n{{ b }}", "--x\r"]
    cases = [
        ("POST", "/v1/workloads", body, "workload.serving.engine_args[2]"),
        ("POST", "/v1/projects", {"name": "a\tb"}, "project.name"),
        ("DELETE", "/v1/workloads/chat%0D", None, "ref"),
        ("GET", "/v1/workloads/chat%1B", None, "ref"),
    ]
    for method, path, sent, field in cases:
        status, answer = hub.rest(method, path, sent, check=False)
        assert status == 400, (path, answer)
        assert answer["error"]["message"].startswith(f"{field}: must not contain"), answer
    # A tab or line feed in an engine argument is free text (a multi-line chat template).
    body["serving"]["engine_args"] = ["--chat-template", "{{ a }}\n\t{{ b }}"]
    assert hub.rest("POST", "/v1/workloads", body)[0] == 200
