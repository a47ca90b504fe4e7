"""A rollout in waves paused by hand (PauseWorkloadRollout), over REST and gRPC.

The cluster in flight goes on rolling out; no further cluster gets the change while paused,
even once the one in flight converged (the observation that ends a wave hands out the next
one in its own transaction when the rollout is rolling); resume hands it out at once. A dry
run changes nothing; a pause of a rollout that is not rolling is refused and audited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tests.harness import ADMIN_TOKEN, ApiError, Hub, SimAgent, wait_until, workload
from wingsmith.v1 import control_pb2, control_pb2_grpc

AUTH = (("authorization", f"Bearer {ADMIN_TOKEN}"),)


def waves(w: dict[str, Any]) -> dict[str, str]:
    return {c["cluster_id"]: c["state"] for c in w["rollout_status"]["clusters"]}


def test_a_paused_rollout_lets_the_cluster_in_flight_finish_and_starts_no_other_wave(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    hub.create_project("search", H100_80GB=64)
    for cluster_id, ready_after in (("wave-a", "2s"), ("wave-b", "0.2s")):
        agents(
            cluster_id=cluster_id,
            token=hub.register_cluster(cluster_id),
            spec=f"nodes=1,gpus=8,class=H100-80GB,ready_after={ready_after}",
        )
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    body = workload("chat", replicas=2, clusters=("wave-a", "wave-b"))
    body["rollout"] = {"max_clusters_in_flight": 1, "wave_deadline_seconds": 600}
    hub.post("/v1/workloads", body)
    wait_until(
        lambda: all(
            (hub.get(f"/v1/deployments/chat.{c}")["status"] or {}).get("ready_replicas") == 1
            for c in ("wave-a", "wave-b")
        ),
        what="chat running on both clusters",
    )
    changed = hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    new_digest = changed["rollout_status"]["target_serving_digest"]
    assert waves(changed) == {"wave-a": "rolling", "wave-b": "waiting"}

    # A dry run answers the paused rollout and changes nothing.
    dry = hub.post("/v1/workloads/chat:pause", {"validate_only": True})
    assert dry["rollout_status"]["state"] == "paused"
    assert hub.get("/v1/workloads/chat")["rollout_status"]["state"] == "rolling"

    paused = hub.post("/v1/workloads/chat:pause", {})
    status = paused["rollout_status"]
    assert (status["state"], status["reason"]) == ("paused", "paused_by_operator")
    assert "paused by an operator" in status["message"]

    def a_done() -> dict[str, Any] | None:
        w = hub.get("/v1/workloads/chat")
        return w if waves(w)["wave-a"] == "converged" else None

    done = wait_until(a_done, what="wave-a, in flight when paused, converged")
    assert waves(done)["wave-b"] == "waiting", "no wave starts while paused"
    assert done["rollout_status"]["state"] == "paused"
    b = hub.get("/v1/deployments/chat.wave-b")
    assert b["serving_digest"] != new_digest and b["generation"] == 1

    # Paused twice: refused, saying why, and audited.
    with pytest.raises(ApiError) as refused:
        hub.post("/v1/workloads/chat:pause", {})
    assert refused.value.status == 409
    assert "no rolling rollout to pause (rollout: paused (paused_by_operator))" in str(
        refused.value.body
    )
    (record, *_) = hub.get("/v1/audit?action=PauseWorkloadRollout")["records"]
    assert (record["outcome"], record["target"]) == ("FAILED_PRECONDITION", "workload/chat")

    resumed = hub.post("/v1/workloads/chat:resume", {})
    assert resumed["rollout_status"]["state"] == "rolling"
    assert waves(resumed)["wave-b"] == "rolling", "resume hands the next wave out at once"
    wait_until(
        lambda: hub.get("/v1/workloads/chat")["rollout_status"]["state"] == "converged",
        what="the rollout converged",
    )


def test_pause_over_grpc_refused_without_a_rollout_and_as_a_dry_run(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("g1", replicas=1, clusters=("east",)))
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        for validate_only in (True, False):
            with pytest.raises(grpc.RpcError) as caught:
                stub.PauseWorkloadRollout(
                    control_pb2.PauseWorkloadRolloutRequest(ref="g1", validate_only=validate_only),
                    metadata=AUTH,
                )
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "has no rolling rollout to pause (rollout: none)" in (
                caught.value.details() or ""
            )
        with pytest.raises(grpc.RpcError) as missing:
            stub.PauseWorkloadRollout(
                control_pb2.PauseWorkloadRolloutRequest(ref="nope"), metadata=AUTH
            )
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    records = hub.get("/v1/audit?action=PauseWorkloadRollout")["records"]
    assert [(r["outcome"], r["edge"]) for r in records] == [
        ("NOT_FOUND", "grpc"),
        ("FAILED_PRECONDITION", "grpc"),
    ], "the refusals are audited; the dry run is not"
