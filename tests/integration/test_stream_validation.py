"""Every field of the stream's small messages is checked too: Hello, Heartbeat and Reject.

A bad Hello closes the stream with INVALID_ARGUMENT before anything is recorded; a bad
heartbeat or reject is answered with a Problem naming the field, and nothing is stored.
"""

from __future__ import annotations

import grpc
import pytest

from tests.harness import Hub, wait_until, workload
from tests.integration.rawstream import RawStream, now_ns
from wingsmith.v1 import resources_pb2, sync_pb2


def stream_error(stream: RawStream) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        for _ in range(10):
            stream.receive()
    return caught.value


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"node_name": "BAD NODE!!"}, "hello.node_name"),
        ({"node_name": "n" * 254}, "hello.node_name"),
        ({"leader_term": -7}, "hello.leader_term"),
        ({"agent_instance": "x y z"}, "hello.agent_instance"),
        ({"applied_revision": -1}, "hello.applied_revision"),
    ],
)
def test_a_hello_with_a_bad_field_is_refused_and_no_agent_is_recorded(
    hub: Hub, fields: dict[str, object], field: str
) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east", **fields)
    error = stream_error(stream)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (error.details() or "")
    stream.close()
    assert hub.get("/v1/clusters/east")["agents"] == []


def test_a_pod_name_and_a_host_pid_are_both_valid_agent_instances(hub: Hub) -> None:
    token = hub.register_cluster("east")
    for instance in ("hangar-7x2kq", "gpu-host.example:4242"):
        stream = RawStream(hub.grpc_target, token)
        stream.hello("east", agent_instance=instance)
        assert stream.receive_kind("welcome").welcome.session_id
        stream.close()


@pytest.mark.parametrize("sent_unix_ms", [-5, 0, 2**62])
def test_a_heartbeat_without_a_plausible_time_gets_a_problem(hub: Hub, sent_unix_ms: int) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")
    stream.receive_kind("welcome")
    stream.send(heartbeat=sync_pb2.Heartbeat(sent_unix_ms=sent_unix_ms))
    problem = stream.receive_kind("problem").problem
    assert problem.code == "INVALID_ARGUMENT"
    assert "heartbeat.sent_unix_ms" in problem.message
    stream.close()


def _deployment_stream(hub: Hub) -> tuple[RawStream, sync_pb2.DeploymentSpec, int]:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")
    desired = stream.receive_kind("desired").desired
    (spec,) = desired.upserts
    return stream, spec, desired.revision


def test_a_reject_of_a_revision_never_sent_gets_a_problem_and_is_not_stored(hub: Hub) -> None:
    stream, spec, revision = _deployment_stream(hub)
    stream.send(
        reject=sync_pb2.Reject(
            revision=revision + 999,
            deployment_id=spec.deployment_id,
            generation=spec.generation,
            error="bogus",
        )
    )
    problem = stream.receive_kind("problem").problem
    assert problem.code == "INVALID_ARGUMENT" and "reject.revision" in problem.message
    assert not hub.get("/v1/deployments/chat.east")["sync"]["rejected_error"]
    stream.close()


def test_a_reject_of_a_generation_the_hub_never_had_gets_a_problem(hub: Hub) -> None:
    stream, spec, revision = _deployment_stream(hub)
    stream.send(
        reject=sync_pb2.Reject(
            revision=revision,
            deployment_id=spec.deployment_id,
            generation=spec.generation + 5,
            error="bogus",
        )
    )
    problem = stream.receive_kind("problem").problem
    assert problem.code == "INVALID_ARGUMENT" and "reject.generation" in problem.message
    assert not hub.get("/v1/deployments/chat.east")["sync"]["rejected_error"]
    stream.close()


def test_an_older_reject_arriving_late_never_replaces_a_newer_one(hub: Hub) -> None:
    stream, spec, revision = _deployment_stream(hub)
    hub.patch("/v1/workloads/chat", {"replicas": 2})
    newer = stream.receive_kind("desired").desired.revision
    assert newer > revision

    def reject(at: int, error: str) -> None:
        stream.send(
            reject=sync_pb2.Reject(
                revision=at,
                deployment_id=spec.deployment_id,
                generation=spec.generation,
                error=error,
            )
        )

    reject(newer, "the newer one")
    wait_until(
        lambda: hub.get("/v1/deployments/chat.east")["sync"]["rejected_error"],
        what="the reject is stored",
    )
    reject(revision, "the older one")
    stream.send(heartbeat=sync_pb2.Heartbeat(sent_unix_ms=0))  # its problem marks the order
    stream.receive_kind("problem")
    assert hub.get("/v1/deployments/chat.east")["sync"]["rejected_error"] == "the newer one"
    stream.close()


@pytest.mark.parametrize("dgd_version", ["v1beta1; DROP", "beta", "", "v" + "1" * 40])
def test_cluster_info_with_a_bad_dgd_version_gets_a_problem_and_is_not_stored(
    hub: Hub, dgd_version: str
) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")  # a whole-cluster agent: it may report cluster info
    stream.receive_kind("welcome")
    stream.send(cluster_info=sync_pb2.ClusterInfo(dgd_version=dgd_version))
    problem = stream.receive_kind("problem").problem
    assert problem.code == "INVALID_ARGUMENT" and "cluster_info.dgd_version" in problem.message
    assert hub.get("/v1/clusters/east")["dgd_version"] == ""
    stream.send(cluster_info=sync_pb2.ClusterInfo(dgd_version="v1beta1"))
    wait_until(lambda: hub.get("/v1/clusters/east")["dgd_version"] == "v1beta1")
    stream.close()


def test_cluster_info_from_a_node_agent_that_does_not_lead_is_refused(hub: Hub) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east", node_name="n1")  # a DaemonSet pod without the Lease
    stream.receive_kind("welcome")
    stream.send(cluster_info=sync_pb2.ClusterInfo(dgd_version="none"))
    problem = stream.receive_kind("problem").problem
    assert problem.code == "FAILED_PRECONDITION" and "leader" in problem.message
    assert hub.get("/v1/clusters/east")["dgd_version"] == ""
    stream.close()


def _status_report(
    spec: sync_pb2.DeploymentSpec, owner: str, seq: int
) -> sync_pb2.ObservationBatch:
    return sync_pb2.ObservationBatch(
        seq=seq,
        deployments=[
            sync_pb2.DeploymentObservation(
                deployment_id=spec.deployment_id,
                observe_unix_nanos=now_ns(),
                status=sync_pb2.DeploymentStatusReport(
                    phase="successful",
                    ready_replicas=0,
                    desired_replicas=7,
                    applied_generation=spec.generation,
                    replicas_owner=owner,
                ),
            )
        ],
    )


def test_replicas_owned_by_an_autoscaler_show_on_the_deployment_and_are_no_drift(
    hub: Hub,
) -> None:
    stream, spec, _ = _deployment_stream(hub)
    stream.send(observations=_status_report(spec, "adapter", seq=1))
    drift = wait_until(
        lambda: (d := hub.get("/v1/deployments/chat.east"))["status"] and d["drift"],
        what="7 live replicas against 1 admitted: drift",
    )
    assert [d["field"] for d in drift] == ["replicas"]
    stream.send(observations=_status_report(spec, "autoscaler:keda-operator", seq=2))
    deployment = wait_until(
        lambda: (
            (d := hub.get("/v1/deployments/chat.east"))["status"]["replicas_owner"]
            == "autoscaler:keda-operator"
            and d
        ),
        what="the owner shown",
    )
    assert deployment["drift"] == [], "an autoscaler's replicas are its own: no drift"
    stream.send(observations=_status_report(spec, "autoscaler:two words", seq=3))
    problem = stream.receive_kind("problem").problem
    assert problem.code == "INVALID_ARGUMENT" and "replicas_owner" in problem.message
    stream.close()


GOOD_UUID = "GPU-0f2c61a4-7c3e-4b1a-9d6e-2a4b8c0d1e2f"


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("uuid", f" {GOOD_UUID}"),
        ("uuid", f"{GOOD_UUID} "),
        ("uuid", ".."),
        ("uuid", "GPU-../../etc"),
        ("uuid", "GPU-0f2c61a4/7c3e"),
        ("uuid", "GPU-1"),
        ("uuid", f"{GOOD_UUID}\n"),
        ("parent_uuid", "../" + GOOD_UUID),
        ("allocation", f"{GOOD_UUID}/.."),
        ("allocation", f" {GOOD_UUID}"),
    ],
)
def test_a_device_uuid_not_in_nvmls_form_gets_a_problem_naming_it(
    hub: Hub, where: str, value: str
) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")
    stream.receive_kind("welcome")
    device = resources_pb2.Device(uuid=GOOD_UUID, device_class="H100-80GB", healthy=True)
    allocation = sync_pb2.AllocationReport(
        pod_name="p", namespace="ns", device_ids=[GOOD_UUID], resource_name="nvidia.com/gpu"
    )
    if where == "allocation":
        allocation.device_ids[0] = value
    else:
        setattr(device, where, value)
    node = sync_pb2.NodeObservation(
        node_id="node-a", observe_unix_nanos=now_ns(), devices=[device], allocations=[allocation]
    )
    stream.send(observations=sync_pb2.ObservationBatch(seq=1, nodes=[node]))
    problem = stream.receive_kind("problem").problem
    field = "allocations[0].device_ids[0]" if where == "allocation" else f"devices[0].{where}"
    assert field in problem.message and "NVML" in problem.message, problem.message
    stream.close()
    assert not hub.get("/v1/clusters/east")["nodes"], "nothing of the batch is stored"
