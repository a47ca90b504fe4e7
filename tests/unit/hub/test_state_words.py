"""State words that say what is true (issue 20 section 3), through the hub's use cases on each
store backend (and, for preemption, the pure admission core): a draining cluster reads
cordoned; a drain of a pinned workload says the workload stays, and why; a preempted victim
partly readmitted reads preempted for the rest; an observed deployment given a new config
reads drift, not converged; a failback reads recovering only once the returning cluster
reports its replicas ready. Each case also runs the named check of tests/words.py, which the
model-based test reuses as invariant 5."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace

import pytest

from hub.admission import AdmissionView, Demand, decide
from hub.api import convert
from hub.model import (
    REASON_PREEMPTED,
    DeploymentObservation,
    FailoverPolicy,
    ObservationBatch,
    Placement,
    ReplicaObservation,
    RolloutPolicy,
    StatusReport,
)
from hub.service import authority, clusters, deployments, failover, ingest, sync, workloads
from hub.service.context import ServiceContext, Settings
from hub.store.port import open_store
from tests import words
from tests.unit.hub.test_dry_run import RecordingPublisher, fleet, report_devices, serving, spec
from wingsmith.v1 import resources_pb2 as pb

H100 = "H100-80GB"
_SEQ = itertools.count(1)


@dataclass
class Clock:
    now: float

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(time.time())


@pytest.fixture
def ctx(store_url: str, clock: Clock) -> ServiceContext:
    return ServiceContext(db=open_store(store_url), publisher=RecordingPublisher(), clock=clock)


def report(
    ctx: ServiceContext, name: str, *, ready: int, digest: str = "", at: float | None = None
) -> None:
    """The cluster reports the deployment: `ready` pods running `digest` (its own by default),
    observed at `at` (now by default)."""
    d = deployments.get(ctx, name).deployment
    # Each report newer than the last (an older observation never overwrites a newer one).
    when = int((ctx.clock() if at is None else at) * 1e9) + next(_SEQ)
    pods = tuple(
        ReplicaObservation(f"{d.name}-{i}", "ml", "n1", True, digest or d.serving_digest, "x", "")
        for i in range(ready)
    )
    status = StatusReport("successful", "", "", ready, ready, d.generation, when)
    observed = DeploymentObservation(d.deployment_id, when, status, pods)
    ingest.ingest(ctx, [(d.cluster_id, ObservationBatch(seq=when, deployments=(observed,)))])


def test_a_draining_cluster_reads_cordoned(ctx: ServiceContext) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("chat", replicas=1, where=("east", "west")))

    view = clusters.drain(ctx, "east")

    said = convert.cluster(view)
    assert (said.draining, said.cordoned) == (True, True)
    assert convert.cluster(clusters.get(ctx, "east")).cordoned
    assert words.draining_reads_cordoned(clusters.get(ctx, "east")) == []
    # Uncordon ends both: the cluster is open again.
    said = convert.cluster(clusters.uncordon(ctx, "east"))
    assert (said.draining, said.cordoned) == (False, False)
    assert words.check(ctx) == []


def test_a_drain_of_a_pinned_workload_says_it_stays_and_why(ctx: ServiceContext) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("pinned", replicas=1, where=("east",)))

    clusters.drain(ctx, "east")

    (record,) = workloads.get(ctx, "pinned").failovers
    assert (record.cause, record.state, dict(record.stand_ins)) == ("draining", "stays", {})
    assert "its deployment stays on east and keeps running" in record.message
    assert "pinned by placement.clusters" in record.message
    assert deployments.get(ctx, "pinned.east").deployment.desired_replicas == 1
    assert words.failover_words(workloads.get(ctx, "pinned")) == []
    assert words.check(ctx) == []


def test_a_preempted_victim_partly_readmitted_reads_preempted_for_the_rest() -> None:
    taken = (
        "2 of its 2 admitted replicas preempted by big (priority high, project search) on"
        " cluster east; it waits until room returns"
    )
    victim = Demand(
        deployment_id="small",
        project="search",
        cluster_id="east",
        device_class=H100,
        devices_per_replica=4,
        desired_replicas=2,
        admitted_replicas=0,
        enabled=True,
        pending_since=0.0,
        reason=REASON_PREEMPTED,
        message=taken,
        priority="low",
    )
    view = AdmissionView(
        quota_limits={("search", H100): 64},
        quota_charged={},
        cluster_free={("east", H100): 4},  # room for one of its two replicas
    )

    (decision,) = decide([victim], view)

    assert decision.admitted_replicas == 1
    assert decision.reason == REASON_PREEMPTED
    assert decision.message == f"1 of 2 replicas admitted again; the other 1 waits: {taken}"
    # A later pass, still one short: said once, not nested.
    again = Demand(**{**victim.__dict__, "admitted_replicas": 1, "message": decision.message})
    (later,) = decide([again], view.__class__(**{**view.__dict__, "cluster_free": {}}))
    assert (later.reason, later.message) == (REASON_PREEMPTED, decision.message)


def test_an_observed_deployment_given_a_new_config_reads_drift_not_converged(
    ctx: ServiceContext,
) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("chat", replicas=1, where=("east",)))
    report(ctx, "chat.east", ready=1)
    authority.set_authority(ctx, "chat.east", authority="observed")
    old = deployments.get(ctx, "chat.east").deployment.serving_digest
    assert convert.deployment(deployments.get(ctx, "chat.east")).rollout.state == (
        pb.ROLLOUT_STATE_CONVERGED
    )

    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=serving("0.12.0")))
    report(ctx, "chat.east", ready=1, digest=old)  # the cluster runs what it ran

    view = deployments.get(ctx, "chat.east")
    assert view.deployment.serving_digest != old
    assert convert.deployment(view).rollout.state == pb.ROLLOUT_STATE_DRIFTED
    assert "serving_digest" in [x.field for x in view.drift]
    assert words.rollout_words(view) == []
    assert words.check(ctx) == []


def test_a_managed_rollout_reads_converged_only_once_every_replica_runs_the_target(
    ctx: ServiceContext,
) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    report(ctx, "chat.east", ready=2)
    old = deployments.get(ctx, "chat.east").deployment.serving_digest

    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=serving("0.12.0")))
    report(ctx, "chat.east", ready=2, digest=old)
    assert convert.deployment(deployments.get(ctx, "chat.east")).rollout.state == (
        pb.ROLLOUT_STATE_ROLLING
    )
    report(ctx, "chat.east", ready=2)
    view = deployments.get(ctx, "chat.east")
    assert convert.deployment(view).rollout.state == pb.ROLLOUT_STATE_CONVERGED
    assert words.rollout_words(view) == []


def test_failback_reads_recovering_only_once_the_returning_cluster_reports_ready(
    ctx: ServiceContext, clock: Clock
) -> None:
    fleet(ctx)
    policy = FailoverPolicy(toleration_s=60, stabilization_s=120)
    workloads.create(
        ctx,
        workloads.WorkloadSpec(
            name="chat",
            project="search",
            replicas=2,
            device_class=H100,
            serving=serving(),
            placement=Placement(clusters=("east", "west"), failover=policy),
        ),
    )
    report(ctx, "chat.east", ready=1)
    report(ctx, "chat.west", ready=1)

    # East goes quiet past the grace period and the toleration: its replica stands in on west.
    clock.now += 200
    report_devices(ctx, "west", 8)
    failover.tick(ctx)
    (record,) = workloads.get(ctx, "chat").failovers
    assert (record.state, dict(record.stand_ins)) == ("failed_over", {"west": 1})

    # East's agent is back (a heartbeat), but has not reported the deployment since: the
    # report it left when it went quiet says nothing of the pods it runs now.
    clock.now += 5
    sync.record_liveness(ctx, last_seen={"east": clock.now, "west": clock.now}, applied={})
    failover.tick(ctx)
    (record,) = workloads.get(ctx, "chat").failovers
    assert record.state == "failed_over", record.message
    assert "waiting for its first report of the deployment since it returned" in record.message
    assert words.recovering_words(workloads.get(ctx, "chat")) == []

    # It reports its replica starting, then ready: recovering only then.
    report(ctx, "chat.east", ready=0)
    failover.tick(ctx)
    (record,) = workloads.get(ctx, "chat").failovers
    assert record.state == "failed_over"
    assert "0 of 1 replicas ready there" in record.message
    clock.now += 1
    report(ctx, "chat.east", ready=1)
    failover.tick(ctx)
    (record,) = workloads.get(ctx, "chat").failovers
    assert record.state == "recovering", record.message
    assert words.recovering_words(workloads.get(ctx, "chat")) == []
    assert words.check(ctx) == []


def test_a_rollout_in_waves_reads_an_observed_cluster_as_drifted_not_converged(
    ctx: ServiceContext,
) -> None:
    fleet(ctx)
    workloads.create(
        ctx,
        replace(
            spec("chat", replicas=2, where=("east", "west")),
            rollout_policy=RolloutPolicy(max_clusters_in_flight=1, wave_deadline_seconds=60),
        ),
    )
    report(ctx, "chat.east", ready=1)
    report(ctx, "chat.west", ready=1)
    authority.set_authority(ctx, "chat.west", authority="observed")
    old = deployments.get(ctx, "chat.west").deployment.serving_digest

    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=serving("0.12.0")))
    report(ctx, "chat.east", ready=1)  # east runs the new config
    report(ctx, "chat.west", ready=1, digest=old)  # west, observed, runs what it ran

    said = convert.workload(workloads.get(ctx, "chat")).rollout_status
    waves = {w.cluster_id: w.state for w in said.clusters}
    assert waves["east"] == pb.ROLLOUT_STATE_CONVERGED
    assert waves["west"] == pb.ROLLOUT_STATE_DRIFTED
    assert words.check(ctx) == []


def test_a_victim_readmitted_in_part_through_the_hub_still_reads_preempted(
    store_url: str,
) -> None:
    ctx = ServiceContext(
        db=open_store(store_url),
        publisher=RecordingPublisher(),
        settings=Settings(preemption=True),
    )
    fleet(ctx, east=8, west=0)  # room for two replicas of 4 GPUs on east
    workloads.create(ctx, replace(spec("batch", replicas=2, where=("east",)), priority="low"))
    workloads.create(ctx, replace(spec("chat", replicas=2, where=("east",)), priority="high"))
    taken = deployments.get(ctx, "batch.east")
    assert (taken.deployment.admitted_replicas, taken.admission_reason) == (0, REASON_PREEMPTED)

    # The preemptor needs one replica less: room for one of the victim's two.
    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=1))

    back = deployments.get(ctx, "batch.east")
    assert back.deployment.admitted_replicas == 1
    assert back.admission_reason == REASON_PREEMPTED
    assert back.admission_message.startswith("1 of 2 replicas admitted again; the other 1 waits")
    assert words.preempted_stays_said(taken, back) == []
    assert words.check(ctx) == []
