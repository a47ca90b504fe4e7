"""Reasons and reservations say what is true now (issue 9, item 5), through the hub's use cases
on a real SQLite store: a pending reason goes when its cause goes, a rejected deployment
releases its reservation and says why, a cluster never heard from reads as such."""

from __future__ import annotations

import dataclasses
import time

import pytest

from hub.api import convert
from hub.model import (
    AgentSession,
    DeploymentObservation,
    Device,
    DiscoveredObservation,
    DiscoveredService,
    NodeObservation,
    ObservationBatch,
    Placement,
    Rejection,
    Serving,
    StatusReport,
)
from hub.service import adoption, clusters, deployments, ingest, projects, sync, workloads
from hub.service.context import ServiceContext
from hub.store.port import open_store
from wingsmith.v1 import resources_pb2 as pb

H100 = "H100-80GB"


def gpus(n: int) -> tuple[Device, ...]:
    return tuple(
        Device(
            f"GPU-{i}", "H100", 80, f"0:{i}", H100, healthy=True, health_reason="", verified=True
        )
        for i in range(n)
    )


def spec(name: str, *, replicas: int, cluster: str = "east") -> workloads.WorkloadSpec:
    return workloads.WorkloadSpec(
        name=name,
        project="search",
        replicas=replicas,
        device_class=H100,
        serving=Serving(engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=4),
        placement=Placement(clusters=(cluster,)),
    )


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    """On each backend (SQLite, PostgreSQL): the rules live partly in SQL."""
    return ServiceContext(db=open_store(store_url))


def report_devices(ctx: ServiceContext, cluster_id: str, count: int) -> None:
    """What an agent's node report does: devices in, the cluster seen now."""
    batch = ObservationBatch(seq=1, nodes=(NodeObservation("n1", time.time_ns(), gpus(count), ()),))
    sync.record_liveness(ctx, last_seen={cluster_id: ctx.clock()}, applied={})
    ingest.ingest(ctx, [(cluster_id, batch)])


def reason(ctx: ServiceContext, ref: str) -> tuple[int, str, str]:
    d = deployments.get(ctx, ref).deployment
    return d.admitted_replicas, d.admission_reason, d.admission_message


# -- a pending reason goes when its cause goes ------------------------------------------------


def test_a_cancelled_scale_up_leaves_no_insufficient_capacity(ctx: ServiceContext) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 8)
    workloads.create(ctx, spec("chat", replicas=2))
    assert reason(ctx, "chat.east") == (2, "", "")

    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=3))
    admitted, why, _ = reason(ctx, "chat.east")
    assert (admitted, why) == (2, "insufficient_capacity"), "the scale-up waits"

    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=2))
    assert reason(ctx, "chat.east") == (2, "", ""), "nothing waits any more: no reason"


def test_a_cancelled_wait_on_quota_leaves_no_insufficient_quota(ctx: ServiceContext) -> None:
    projects.create(ctx, name="search", quotas={H100: 4})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 16)
    workloads.create(ctx, spec("chat", replicas=3))
    # One replica fits the quota and runs; the other two wait (docs/admission.md).
    assert reason(ctx, "chat.east")[:2] == (1, "insufficient_quota")

    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=1))
    assert reason(ctx, "chat.east") == (1, "", ""), "what waited was cancelled: no reason"
    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=0))
    assert reason(ctx, "chat.east") == (0, "", ""), "zero replicas wait for nothing"


def test_a_reason_goes_when_the_deployment_is_admitted(ctx: ServiceContext) -> None:
    projects.create(ctx, name="search", quotas={H100: 4})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 16)
    workloads.create(ctx, spec("chat", replicas=2))
    assert reason(ctx, "chat.east")[:2] == (1, "insufficient_quota"), "one replica fits"
    projects.set_quotas(ctx, name="search", quotas={H100: 8})
    assert reason(ctx, "chat.east") == (2, "", "")


# -- a cluster never heard from reads as such --------------------------------------------------


def test_a_cluster_no_agent_ever_connected_for_says_so_and_so_do_its_deployments(
    ctx: ServiceContext,
) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    _, token = clusters.create(ctx, cluster_id="east", labels={})
    workloads.create(ctx, spec("chat", replicas=1))

    cluster = convert.cluster(clusters.get(ctx, "east"))
    assert (cluster.never_connected, cluster.stale, cluster.connected) == (True, False, False)
    admitted, why, message = reason(ctx, "chat.east")
    assert (admitted, why) == (0, "insufficient_capacity")
    assert "no agent of cluster east has ever connected" in message
    assert "0 free" not in message, "nobody reported a count of free devices"

    # An agent's stream opens, with no device reported yet: the message says what is known.
    session = AgentSession("s1", "agent-0", "", True, "1", connect_time=ctx.clock())
    sync.open_session(
        ctx,
        cluster_id="east",
        session=session,
        read_only=False,
        token_hash=clusters.token_hash(token),
    )
    assert not convert.cluster(clusters.get(ctx, "east")).never_connected
    assert reason(ctx, "chat.east")[2] == "needs 4 H100-80GB; cluster east has 0 free"


def test_the_first_message_of_a_cluster_re_runs_its_admission(ctx: ServiceContext) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    clusters.create(ctx, cluster_id="east", labels={})
    workloads.create(ctx, spec("chat", replicas=1))
    assert "has ever connected" in reason(ctx, "chat.east")[2]
    sync.record_liveness(ctx, last_seen={"east": ctx.clock()}, applied={})
    assert not convert.cluster(clusters.get(ctx, "east")).never_connected
    assert reason(ctx, "chat.east")[2] == "needs 4 H100-80GB; cluster east has 0 free"

    report_devices(ctx, "east", 8)
    assert reason(ctx, "chat.east") == (1, "", "")


# -- status.desired_replicas echoes the deployment's; what the DGD asks is its own field ------


def test_status_desired_replicas_echoes_the_deployment_and_applied_replicas_what_runs(
    ctx: ServiceContext,
) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 8)
    workloads.create(ctx, spec("chat", replicas=2))
    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=3))
    deployment_id = deployments.get(ctx, "chat.east").deployment.deployment_id
    # The agent reports the DGD it applied: the two admitted replicas, both ready.
    status = StatusReport(
        phase="successful",
        reason="",
        message="",
        ready_replicas=2,
        applied_replicas=2,
        applied_generation=1,
        observe_ns=time.time_ns(),
    )
    observation = DeploymentObservation(deployment_id, status.observe_ns, status, ())
    ingest.ingest(ctx, [("east", ObservationBatch(seq=2, deployments=(observation,)))])

    shown = convert.deployment(deployments.get(ctx, "chat.east"))
    assert (shown.desired_replicas, shown.admitted_replicas) == (3, 2)
    assert (shown.status.desired_replicas, shown.status.applied_replicas) == (3, 2)
    assert shown.status.ready_replicas == 2


# -- a rejected deployment releases its reservation, says why, and is retried -----------------


def rejected_fleet(ctx: ServiceContext) -> str:
    """east: 8 devices; `first` (2 x 4) admitted, `second` (1 x 4) waiting for room; then the
    agent rejects `first`. Returns first's deployment id."""
    projects.create(ctx, name="search", quotas={H100: 64})
    _, token = clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 8)
    workloads.create(ctx, spec("first", replicas=2))
    workloads.create(ctx, spec("second", replicas=1))
    assert reason(ctx, "second.east")[:2] == (0, "insufficient_capacity")
    first = deployments.get(ctx, "first.east").deployment
    sync.record_rejection(
        ctx,
        cluster_id="east",
        deployment_id=first.deployment_id,
        rejection=Rejection(first.revision, 1, "DGD wingsmith/first exists and is not ours"),
        token_hash=clusters.token_hash(token),
    )
    return first.deployment_id


def test_a_rejected_deployment_releases_its_reservation_and_says_why(
    ctx: ServiceContext,
) -> None:
    rejected_fleet(ctx)
    shown = convert.deployment(deployments.get(ctx, "first.east"))
    assert shown.admission_phase == pb.ADMISSION_PHASE_FAILED
    assert shown.admission_reason == pb.ADMISSION_REASON_REJECTED
    assert "rejected generation 1: DGD wingsmith/first exists and is not ours" in (
        shown.admission_message
    )
    # What it reserved went back, and the waiting deployment was admitted into it.
    assert reason(ctx, "second.east") == (1, "", "")
    usage = projects.get(ctx, "search").usage[H100]
    assert (usage.used, usage.reserved) == (0, 4), "only second's reservation is charged"
    assert clusters.get(ctx, "east").capacity[H100].reserved == 4


def test_a_rejected_deployment_once_disabled_says_disabled(ctx: ServiceContext) -> None:
    rejected_fleet(ctx)
    deployments.set_enabled(ctx, "first.east", enabled=False)
    shown = convert.deployment(deployments.get(ctx, "first.east"))
    assert shown.admission_reason == pb.ADMISSION_REASON_DISABLED
    assert shown.admission_message == "deployment is disabled"


def test_a_new_generation_of_a_rejected_deployment_is_new_demand_admitted_if_it_fits(
    ctx: ServiceContext,
) -> None:
    rejected_fleet(ctx)
    fixed = dataclasses.replace(spec("first", replicas=2).serving, engine_version="0.11.1")
    workloads.update(ctx, "first", workloads.WorkloadChange(serving=fixed))
    admitted, why, _ = reason(ctx, "first.east")
    # second holds half the room: first gets the replica that fits, the other waits.
    assert (admitted, why) == (1, "insufficient_capacity"), "retried, with no overcommit"
    assert clusters.get(ctx, "east").capacity[H100].reserved == 8
    shown = convert.deployment(deployments.get(ctx, "first.east"))
    assert shown.admission_phase == pb.ADMISSION_PHASE_ADMITTED

    workloads.delete(ctx, "second")
    assert reason(ctx, "first.east") == (2, "", ""), "retried: admitted once it fits"


def test_a_rejected_deployment_the_agent_applies_later_waits_if_its_room_was_given_away(
    ctx: ServiceContext,
) -> None:
    deployment_id = rejected_fleet(ctx)
    assert reason(ctx, "second.east") == (1, "", ""), "second took the released room"
    # The cause went away in the cluster: the agent's retry applied generation 1.
    status = StatusReport("pending", "", "", 0, 2, 1, time.time_ns())
    observation = DeploymentObservation(deployment_id, status.observe_ns, status, ())
    ingest.ingest(ctx, [("east", ObservationBatch(seq=3, deployments=(observation,)))])
    admitted, why, _ = reason(ctx, "first.east")
    # Admitted again from scratch: the one replica that fits beside second (docs/admission.md,
    # partial admission), the other waits; the room second took is not counted twice.
    assert (admitted, why) == (1, "insufficient_capacity"), "never counted twice"
    assert clusters.get(ctx, "east").capacity[H100].reserved == 8
    assert reason(ctx, "second.east") == (1, "", ""), "what was admitted meanwhile stays"
    workloads.delete(ctx, "second")
    assert reason(ctx, "first.east") == (2, "", "")


def test_a_rejected_deployment_the_agent_applies_later_is_charged_again(
    ctx: ServiceContext,
) -> None:
    deployment_id = rejected_fleet(ctx)
    workloads.delete(ctx, "second")
    assert clusters.get(ctx, "east").capacity[H100].reserved == 0
    # The cause went away in the cluster: the agent's retry applied generation 1.
    status = StatusReport("pending", "", "", 0, 2, 1, time.time_ns())
    observation = DeploymentObservation(deployment_id, status.observe_ns, status, ())
    ingest.ingest(ctx, [("east", ObservationBatch(seq=3, deployments=(observation,)))])
    shown = convert.deployment(deployments.get(ctx, "first.east"))
    assert shown.admission_reason == pb.ADMISSION_REASON_UNSPECIFIED
    assert shown.admission_phase == pb.ADMISSION_PHASE_ADMITTED
    assert clusters.get(ctx, "east").capacity[H100].reserved == 8


# -- a discovered disaggregated DGD counts as a rendered one, and promotes to what runs -------


def disaggregated_legacy() -> DiscoveredObservation:
    """Two sets of 1 prefill worker (2 GPUs) + 2 decode workers (4 GPUs): 20 GPUs run. The
    top-level counts are what an agent that counted one replica per decode worker sent."""
    args = ("--model", "Qwen/Qwen3-32B")
    prefill = DiscoveredService("VllmPrefillWorker", "worker", "prefill", 2, 2, 2, "vllm:0.9", args)
    decode = DiscoveredService("VllmDecodeWorker", "worker", "decode", 4, 4, 4, "vllm:0.9", args)
    return DiscoveredObservation(
        namespace="ml",
        name="legacy",
        observe_ns=time.time_ns(),
        backend_framework="vllm",
        services=(prefill, decode),
        replicas=4,
        ready_replicas=4,
        imported_args=args,
        engine_version="0.9",
        device_class=H100,
        devices_per_replica=6,
    )


def test_a_discovered_disaggregated_dgd_counts_sets_and_promotes_to_the_footprint_that_runs(
    ctx: ServiceContext,
) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 32)
    ingest.ingest(ctx, [("east", ObservationBatch(seq=2, discovered=(disaggregated_legacy(),)))])

    shown = convert.discovered(adoption.get(ctx, "east.ml.legacy"))
    assert (shown.replicas, shown.ready_replicas, shown.devices_per_replica) == (2, 2, 10)

    adoption.promote(ctx, "east.ml.legacy", project="search")
    d = deployments.get(ctx, "legacy.east").deployment
    assert (d.desired_replicas, d.devices_per_replica) == (2, 10)
    assert (d.serving.prefill_workers, d.serving.decode_workers) == (1, 2)
    usage = projects.get(ctx, "search").usage[H100]
    assert usage.used + usage.reserved == 20, "charged exactly the 20 GPUs its workers request"
