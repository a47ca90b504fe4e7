"""Dry runs (issue 12 item 5) on a real hub with real agents on simulated clusters, over REST
and gRPC: `validate_only` on create, update and delete answers what the call would do, and
then every list, every cluster revision, the audit log and what each agent holds are as they
were; the real call then does what the dry run said."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until, workload
from tests.integration.test_adoption import setup
from wingsmith.v1 import control_pb2, control_pb2_grpc

SPEC = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
# Liveness stamps move with every heartbeat: they are not state a call changes.
NOISE = frozenset({"last_seen", "observe_time", "connect_time"})


def fleet(hub: Hub, agents: Callable[..., SimAgent]) -> dict[str, SimAgent]:
    hub.create_project("search", H100_80GB=12)
    started = {}
    for cluster_id in ("east", "west"):
        token = hub.register_cluster(cluster_id)
        started[cluster_id] = agents(cluster_id=cluster_id, token=token, spec=SPEC)
    for cluster_id in started:
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    return started


def quiet(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: quiet(v) for k, v in value.items() if k not in NOISE}
    if isinstance(value, list):
        return [quiet(v) for v in value]
    return value


def state(hub: Hub, agents: dict[str, SimAgent]) -> str:
    """What a dry run must leave as it was: every list the API answers, each cluster's
    desired revision, the audit log, and what each agent holds and runs."""
    clusters = hub.get("/v1/clusters")["clusters"]
    return json.dumps(
        {
            "workloads": quiet(hub.get("/v1/workloads")),
            "deployments": quiet(hub.get("/v1/deployments")),
            "projects": quiet(hub.get("/v1/projects")),
            "revisions": {c["cluster_id"]: c.get("desired_revision") for c in clusters},
            "audit": hub.get("/v1/audit"),
            "agents": {
                cluster_id: (
                    agent.agent.desired.revision,
                    agent.agent.applied,
                    agent.agent.deleted,
                    sorted(repr(dgd) for dgd in agent.cluster.list_dgds()),
                )
                for cluster_id, agent in agents.items()
            },
        },
        sort_keys=True,
    )


def settled(hub: Hub, agents: dict[str, SimAgent]) -> str:
    """The state once it holds still: three readings in a row alike. A deployment reported
    ready can still be moving (its agent's counters, a phase, an audit record of the call
    that made it): a reading taken then would differ from the next for reasons no dry run
    caused, which is how this file failed on a busy machine."""
    readings: list[str] = []

    def still() -> bool:
        readings.append(state(hub, agents))
        return len(readings) >= 3 and len(set(readings[-3:])) == 1

    wait_until(still, interval=0.2, what="the fleet's state to hold still")
    return readings[-1]


def differs(before: str, after: str) -> str:
    """Which parts of two states differ (for a failure's message)."""
    old, new = json.loads(before), json.loads(after)
    return ", ".join(key for key in old if old[key] != new.get(key)) or "nothing"


def decided(deployments: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Per cluster: what placement and admission decided."""
    return {
        d["cluster_id"]: (d["desired_replicas"], d.get("admission_reason", "")) for d in deployments
    }


def ready(hub: Hub, name: str, count: int) -> bool:
    status = hub.get(f"/v1/deployments/{name}").get("status") or {}
    return bool(status.get("ready_replicas") == count)


def test_validate_only_over_rest_changes_nothing_and_predicts_each_call(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    running = fleet(hub, agents)
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(lambda: ready(hub, "chat.east", 2), what="chat running on east")
    before = settled(hub, running)

    # Create: 3 replicas of 4 GPUs where only 4 GPUs of quota are left: 1 admitted, 2 wait.
    created = hub.post("/v1/workloads?validate_only=true", workload("big", replicas=3))
    assert created["name"] == "big" and created["dry_run"]["summary"]
    predicted = decided(created["deployments"])
    effects = {c["name"]: c["effects"] for c in created["dry_run"]["changes"]}
    assert all(e[0] == "created" for e in effects.values())
    assert sum(d["admitted_replicas"] for d in created["dry_run"]["changes"]) == 1
    assert "insufficient_quota" in created["dry_run"]["summary"]
    assert hub.rest("GET", "/v1/workloads/big", check=False)[0] == 404

    # A serving change of a running workload: a rolling restart, said as such.
    new_version = {"serving": {**workload("chat")["serving"], "engine_version": "0.12.0"}}
    updated = hub.rest("PATCH", "/v1/workloads/chat?validate_only=true", new_version)[1]
    assert updated["serving"]["engine_version"] == "0.12.0"
    (change,) = updated["dry_run"]["changes"]
    assert (change["name"], change["effects"]) == ("chat.east", ["restarted"])
    assert change["ready_replicas"] == 2
    assert change["generation"] == change["generation_before"] + 1
    assert change["serving_digest"] != change["serving_digest_before"]

    # Delete: its deployment removed.
    status, deleted = hub.rest("DELETE", "/v1/workloads/chat?validate_only=true")
    assert status == 200
    assert [(c["name"], c["effects"]) for c in deleted["dry_run"]["changes"]] == [
        ("chat.east", ["removed"])
    ]

    # Disabling a deployment: what stops, and the deployment as it would be.
    disabled = hub.patch("/v1/deployments/chat.east?validate_only=true", {"enabled": False})
    assert (disabled["enabled"], disabled["admitted_replicas"]) == (False, 0)
    by_name = {c["name"]: c["effects"] for c in disabled["dry_run"]["changes"]}
    assert by_name["chat.east"] == ["disabled"]

    after = state(hub, running)
    assert after == before, (
        f"a dry run writes, publishes and audits nothing: {differs(before, after)}"
    )

    # The real calls do what the dry runs said.
    real = hub.post("/v1/workloads", workload("big", replicas=3))
    assert decided(real["deployments"]) == predicted
    rolled = hub.patch("/v1/workloads/chat", new_version)
    chat = next(d for d in rolled["deployments"] if d["cluster_id"] == "east")
    assert (chat["generation"], chat["serving_digest"]) == (
        change["generation"],
        change["serving_digest"],
    )
    assert hub.rest("DELETE", "/v1/workloads/chat")[1] == {"dry_run": None}


def test_validate_only_over_grpc_is_authorized_as_the_real_call_and_not_audited(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    running = fleet(hub, agents)
    hub.post("/v1/workloads", workload("chat", replicas=1))
    viewer = hub.post("/v1/tokens", {"name": "viewer", "role": "fleet_viewer"})["secret"]
    # Settled first: a replica still starting would change the state under the comparison.
    wait_until(lambda: hub.get("/v1/workloads/chat")["ready_replicas"] == 1, what="chat ready")
    before = settled(hub, running)
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        admin = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        answer = stub.DeleteWorkload(
            control_pb2.DeleteWorkloadRequest(ref="chat", validate_only=True), metadata=admin
        )
        assert [c.effects for c in answer.dry_run.changes] == [["removed"]]
        with pytest.raises(grpc.RpcError) as refused:
            stub.DeleteWorkload(
                control_pb2.DeleteWorkloadRequest(ref="chat", validate_only=True),
                metadata=(("authorization", f"Bearer {viewer}"),),
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # Bad input is refused as the real call refuses it.
        with pytest.raises(grpc.RpcError) as invalid:
            stub.UpdateWorkload(
                control_pb2.UpdateWorkloadRequest(
                    ref="chat",
                    workload={"replicas": -1},
                    update_mask={"paths": ["replicas"]},
                    validate_only=True,
                ),
                metadata=admin,
            )
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "workload.replicas" in str(invalid.value.details())
    after = state(hub, running)
    assert after == before, differs(before, after)


def test_a_previewed_promotion_of_a_discovered_dgd_writes_nothing_and_predicts_it(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    running = {"east": agent}
    before = settled(hub, running), hub.get("/v1/discovered")

    body = {"project": "search", "validate_only": True}
    preview = hub.post("/v1/discovered/east.ml.legacy-qwen/promote", body)
    assert preview["name"] == "legacy-qwen" and preview["dry_run"]["summary"].startswith(
        "1 deployment: 1 created"
    )
    (change,) = preview["dry_run"]["changes"]
    assert change["name"] == "legacy-qwen.east" and change["effects"][0] == "created"
    assert (state(hub, running), hub.get("/v1/discovered")) == before
    assert hub.get("/v1/discovered/east.ml.legacy-qwen")["state"] == "new"

    real = hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    assert decided(real["deployments"]) == decided(preview["deployments"])


def test_cordon_drain_uncordon_and_authority_take_validate_only_over_rest_and_grpc(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    # Issue 20: a drain once refused validate_only with 400; every mutating call takes it.
    running = fleet(hub, agents)
    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east", "west")))
    wait_until(lambda: hub.get("/v1/workloads/chat")["ready_replicas"] == 1, what="chat ready")
    home = next(d for d in hub.get("/v1/deployments")["deployments"])
    before = settled(hub, running)

    status, drained = hub.rest(
        "POST", f"/v1/clusters/{home['cluster_id']}:drain?validate_only=true", {}
    )
    assert status == 200, drained
    assert (drained["cordoned"], drained["draining"]) == (True, True)
    stand_ins = {c["cluster_id"]: c["effects"] for c in drained["dry_run"]["changes"]}
    assert list(stand_ins.values()) == [["created", "admitted"]], drained["dry_run"]
    cordoned = hub.post(f"/v1/clusters/{home['cluster_id']}:cordon", {"validate_only": True})
    assert cordoned["cordoned"] is True and cordoned["dry_run"]["summary"] == "no change"
    demoted = hub.post(
        f"/v1/deployments/{home['name']}/authority",
        {"authority": "observed", "validate_only": True},
    )
    assert demoted["authority"] == "observed" and "dry_run" in demoted
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        admin = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        answer = stub.DrainCluster(
            control_pb2.DrainClusterRequest(cluster_id=home["cluster_id"], validate_only=True),
            metadata=admin,
        )
        assert answer.draining and answer.cordoned
        assert [list(c.effects) for c in answer.dry_run.changes] == [["created", "admitted"]]
        answer = stub.UncordonCluster(
            control_pb2.UncordonClusterRequest(cluster_id=home["cluster_id"], validate_only=True),
            metadata=admin,
        )
        assert answer.dry_run.summary == "no change"
    after = state(hub, running)
    assert after == before, (
        f"a dry run writes, publishes and audits nothing: {differs(before, after)}"
    )

    # The real drain does what its dry run said: the same stand-ins, the same marks.
    real = hub.post(f"/v1/clusters/{home['cluster_id']}:drain", {})
    assert (real["cordoned"], real["draining"]) == (True, True)
    placed = {
        d["cluster_id"]: (d["desired_replicas"], d["admitted_replicas"])
        for d in hub.get("/v1/deployments")["deployments"]
        if d["cluster_id"] != home["cluster_id"]
    }
    (change,) = drained["dry_run"]["changes"]
    assert placed == {
        change["cluster_id"]: (change["desired_replicas"], change["admitted_replicas"])
    }
