"""gRPC Update* calls need an update_mask: proto3 cannot tell `false` or `0` from "not set".

REST infers the mask from the JSON body, where presence is visible; gRPC names the fields.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import field_mask_pb2

from tests.harness import ADMIN_TOKEN, Hub, workload
from wingsmith.v1 import control_pb2, control_pb2_grpc, resources_pb2

AUTH = (("authorization", f"Bearer {ADMIN_TOKEN}"),)


@pytest.fixture
def stub(hub: Hub) -> Iterator[control_pb2_grpc.ControlServiceStub]:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("g1", replicas=1, clusters=("east",)))
    channel = grpc.insecure_channel(hub.grpc_target)
    try:
        yield control_pb2_grpc.ControlServiceStub(channel)
    finally:
        channel.close()


def mask(*paths: str) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


def refused(call: object, request: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(request, metadata=AUTH)  # type: ignore[operator]
    return caught.value


def test_disabling_over_grpc_without_a_mask_is_refused_and_says_to_send_one(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    request = control_pb2.UpdateDeploymentRequest(
        ref="g1.east", deployment=resources_pb2.Deployment(enabled=False)
    )
    error = refused(stub.UpdateDeployment, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "update_mask" in (error.details() or "")
    assert hub.get("/v1/deployments/g1.east")["enabled"] is True, "nothing changed"


def test_disabling_over_grpc_with_the_mask_disables(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    request = control_pb2.UpdateDeploymentRequest(
        ref="g1.east",
        deployment=resources_pb2.Deployment(enabled=False),
        update_mask=mask("enabled"),
    )
    assert stub.UpdateDeployment(request, metadata=AUTH).enabled is False
    assert hub.get("/v1/deployments/g1.east")["enabled"] is False


def test_scaling_to_zero_over_grpc_needs_the_mask_and_works_with_it(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    without = control_pb2.UpdateWorkloadRequest(ref="g1", workload=resources_pb2.Workload())
    assert refused(stub.UpdateWorkload, without).code() == grpc.StatusCode.INVALID_ARGUMENT
    assert hub.get("/v1/workloads/g1")["replicas"] == 1
    with_mask = control_pb2.UpdateWorkloadRequest(
        ref="g1", workload=resources_pb2.Workload(replicas=0), update_mask=mask("replicas")
    )
    assert stub.UpdateWorkload(with_mask, metadata=AUTH).replicas == 0


def test_clearing_quotas_over_grpc_needs_the_mask(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    request = control_pb2.UpdateProjectRequest(name="search", project=resources_pb2.Project())
    assert refused(stub.UpdateProject, request).code() == grpc.StatusCode.INVALID_ARGUMENT
    request.update_mask.CopyFrom(mask("quotas"))
    assert dict(stub.UpdateProject(request, metadata=AUTH).quotas) == {}


def test_an_empty_mask_changes_nothing(hub: Hub, stub: control_pb2_grpc.ControlServiceStub) -> None:
    request = control_pb2.UpdateDeploymentRequest(
        ref="g1.east", deployment=resources_pb2.Deployment(enabled=False), update_mask=mask()
    )
    assert stub.UpdateDeployment(request, metadata=AUTH).enabled is True


def test_rest_infers_the_mask_from_the_body_so_false_and_zero_apply(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    assert hub.patch("/v1/deployments/g1.east", {"enabled": False})["enabled"] is False
    assert hub.patch("/v1/workloads/g1", {"replicas": 0})["replicas"] == 0


def test_placement_preferences_over_grpc_by_their_own_path_and_a_bad_weight_is_refused(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    wanted = resources_pb2.Placement(
        preferences=[resources_pb2.PlacementPreference(weights={"east": 3})]
    )
    request = control_pb2.UpdateWorkloadRequest(
        ref="g1",
        workload=resources_pb2.Workload(placement=wanted),
        update_mask=mask("placement.preferences"),
    )
    answer = stub.UpdateWorkload(request, metadata=AUTH)
    # Only the preferences changed: the explicit cluster list stays.
    assert list(answer.placement.clusters) == ["east"]
    assert dict(answer.placement.preferences[0].weights) == {"east": 3}
    assert hub.get("/v1/workloads/g1")["placement"]["preferences"][0]["weights"] == {"east": 3}

    request.workload.placement.preferences[0].weights["east"] = 1001
    error = refused(stub.UpdateWorkload, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert 'workload.placement.preferences[0].weights["east"]' in (error.details() or "")
    assert hub.get("/v1/workloads/g1")["placement"]["preferences"][0]["weights"] == {"east": 3}


def test_the_rollout_policy_over_grpc_and_resume_abort_refused_without_a_rollout(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    request = control_pb2.UpdateWorkloadRequest(
        ref="g1",
        workload=resources_pb2.Workload(
            rollout=resources_pb2.RolloutPolicy(max_clusters_in_flight=0)
        ),
        update_mask=mask("rollout.max_clusters_in_flight"),
    )
    stub.UpdateWorkload(request, metadata=AUTH)
    request.workload.rollout.max_clusters_in_flight = 2
    updated = stub.UpdateWorkload(request, metadata=AUTH)
    assert updated.rollout.max_clusters_in_flight == 2
    assert not updated.HasField("rollout_status")
    for call, rpc_request, says in (
        (
            stub.ResumeWorkloadRollout,
            control_pb2.ResumeWorkloadRolloutRequest(ref="g1"),
            "no paused rollout",
        ),
        (
            stub.AbortWorkloadRollout,
            control_pb2.AbortWorkloadRolloutRequest(ref="g1"),
            "no rollout to abort",
        ),
    ):
        error = refused(call, rpc_request)
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert says in (error.details() or "")
    missing = refused(stub.AbortWorkloadRollout, control_pb2.AbortWorkloadRolloutRequest(ref="x"))
    assert missing.code() == grpc.StatusCode.NOT_FOUND


def test_a_path_naming_a_message_replaces_it_so_null_clears_it(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    """AIP-134: a mask path that names a message field replaces the whole message. Before,
    the update merged into it: `"kv_cache": null` answered 200 and kept the old KV cache."""
    hub.patch("/v1/workloads/g1", {"serving": {"kv_cache": {"dtype": "fp8", "block_size": 32}}})
    hub.patch("/v1/workloads/g1", {"rollout": {"max_clusters_in_flight": 1}})
    assert hub.get("/v1/workloads/g1")["serving"]["kv_cache"]["dtype"] == "fp8"

    # REST: null (a leaf) names the field; what the body leaves out of it is cleared.
    cleared = hub.patch("/v1/workloads/g1", {"serving": {"kv_cache": None}})
    assert cleared["serving"]["kv_cache"] is None
    assert cleared["serving"]["model"] == workload("g1")["serving"]["model"], "the rest stays"
    replaced = hub.patch("/v1/workloads/g1", {"serving": {"kv_cache": {"block_size": 16}}})
    assert (
        replaced["serving"]["kv_cache"]["block_size"],
        replaced["serving"]["kv_cache"]["dtype"],
    ) == (16, "")
    assert (
        hub.patch("/v1/workloads/g1", {"rollout": None})["rollout"]["max_clusters_in_flight"] == 0
    )

    # gRPC: the same path with the message left out of the request clears it.
    answer = stub.UpdateWorkload(
        control_pb2.UpdateWorkloadRequest(
            ref="g1", workload=resources_pb2.Workload(), update_mask=mask("serving.kv_cache")
        ),
        metadata=AUTH,
    )
    assert not answer.serving.HasField("kv_cache")
    assert hub.get("/v1/workloads/g1")["serving"]["kv_cache"] is None
    # A whole message replaced by an incomplete one is refused, naming what is missing.
    error = refused(
        stub.UpdateWorkload,
        control_pb2.UpdateWorkloadRequest(
            ref="g1",
            workload=resources_pb2.Workload(
                serving=resources_pb2.ServingConfig(engine_version="0.12")
            ),
            update_mask=mask("serving"),
        ),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "workload.serving.engine: required" in (error.details() or "")
    assert hub.get("/v1/workloads/g1")["serving"]["engine_version"] == "0.11.0"
