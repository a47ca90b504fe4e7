"""Rollout waves through the hub's use cases on a real store (each backend), with a clock the
test moves: a wave goes on the observation that ends the previous one, a deadline pauses at
the periodic pass, waiting clusters keep their config through other updates, and the edge
cases of changing the config or the policy mid-rollout (hub/service/rollouts.py)."""

from __future__ import annotations

import time

import pytest

from hub import errors, serving
from hub.model import (
    DeploymentObservation,
    Device,
    NodeObservation,
    ObservationBatch,
    Placement,
    ReplicaObservation,
    RolloutPolicy,
    Serving,
    StatusReport,
)
from hub.service import clusters, deployments, ingest, projects, rollouts, workloads
from hub.service.context import ServiceContext
from hub.store.port import open_store

H100 = "H100-80GB"
CLUSTERS = ("a", "b", "c")
OLD = Serving(engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=4)
NEW = Serving(engine="vllm", engine_version="0.11.1", model="m", tensor_parallel=4)
NEWER = Serving(engine="vllm", engine_version="0.11.2", model="m", tensor_parallel=4)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ctx(store_url: str, clock: Clock) -> ServiceContext:
    ctx = ServiceContext(db=open_store(store_url), clock=clock)
    projects.create(ctx, name="search", quotas={H100: 64})
    for cluster_id in CLUSTERS:
        clusters.create(ctx, cluster_id=cluster_id, labels={})
        devices = tuple(
            Device(f"{cluster_id}-{i}", "H100", 80, f"0:{i}", H100, True, "", True)
            for i in range(8)
        )
        node = NodeObservation("n1", time.time_ns(), devices, ())
        ingest.ingest(ctx, [(cluster_id, ObservationBatch(seq=1, nodes=(node,)))])
    workloads.create(
        ctx,
        workloads.WorkloadSpec(
            name="chat",
            project="search",
            replicas=3,
            device_class=H100,
            serving=OLD,
            placement=Placement(clusters=CLUSTERS),
            rollout_policy=RolloutPolicy(max_clusters_in_flight=1, wave_deadline_seconds=60),
        ),
    )
    for cluster_id in CLUSTERS:
        ready_on(ctx, cluster_id, serving.digest(OLD))
    return ctx


def ready_on(ctx: ServiceContext, cluster_id: str, digest: str) -> None:
    """What the cluster's agent reports once its one replica runs `digest`, ready."""
    d = deployments.get(ctx, f"chat.{cluster_id}").deployment
    status = StatusReport("successful", "", "", 1, 1, d.generation, time.time_ns())
    pod = ReplicaObservation("pod-1", "ml", "n1", True, digest, "x", "worker")
    obs = DeploymentObservation(d.deployment_id, time.time_ns(), status, (pod,))
    ingest.ingest(ctx, [(cluster_id, ObservationBatch(seq=2, deployments=(obs,)))])


def digests(ctx: ServiceContext) -> dict[str, str]:
    view = workloads.get(ctx, "chat")
    return {d.deployment.cluster_id: d.deployment.serving_digest for d in view.deployments}


def state(ctx: ServiceContext) -> str:
    return workloads.spec(ctx, "chat").rollout.state


def test_the_next_wave_goes_on_the_observation_that_ends_the_last(ctx: ServiceContext) -> None:
    old, new = serving.digest(OLD), serving.digest(NEW)
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    assert digests(ctx) == {"a": new, "b": old, "c": old}
    assert state(ctx) == "rolling"
    # A replica change meanwhile hands the change to nobody else.
    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=3))
    assert digests(ctx) == {"a": new, "b": old, "c": old}
    ready_on(ctx, "a", new)
    assert digests(ctx) == {"a": new, "b": new, "c": old}
    ready_on(ctx, "b", new)
    ready_on(ctx, "c", new)
    assert digests(ctx) == dict.fromkeys(CLUSTERS, new)
    assert state(ctx) == "converged"
    assert [d.deployment.generation for d in workloads.get(ctx, "chat").deployments] == [2, 2, 2]


def test_a_late_wave_pauses_at_the_periodic_pass_and_nothing_moves_while_paused(
    ctx: ServiceContext, clock: Clock
) -> None:
    old, new = serving.digest(OLD), serving.digest(NEW)
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    clock.now += 59
    assert rollouts.sweep(ctx) == 0, "within the deadline: nothing to do, nothing written"
    clock.now += 1
    assert rollouts.sweep(ctx) == 1
    paused = workloads.spec(ctx, "chat").rollout
    assert (paused.state, paused.reason) == ("paused", "wave_deadline_exceeded")
    assert "a (0/1 ready)" in paused.message
    # Ready at last, while paused: the next wave still waits for a resume.
    ready_on(ctx, "a", new)
    clock.now += 3600
    assert rollouts.sweep(ctx) == 0
    assert digests(ctx) == {"a": new, "b": old, "c": old}
    rollouts.resume(ctx, "chat")
    assert digests(ctx) == {"a": new, "b": new, "c": old}


def test_resume_gives_the_clusters_in_flight_a_new_deadline(
    ctx: ServiceContext, clock: Clock
) -> None:
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    clock.now += 61
    rollouts.sweep(ctx)
    assert rollouts.resume(ctx, "chat").workload.rollout.state == "rolling"
    with pytest.raises(errors.FailedPrecondition, match="no paused rollout"):
        rollouts.resume(ctx, "chat")
    clock.now += 59
    assert rollouts.sweep(ctx) == 0
    clock.now += 1
    rollouts.sweep(ctx)
    assert state(ctx) == "paused"


def test_abort_restores_the_previous_config_where_it_was_changed(ctx: ServiceContext) -> None:
    old, new = serving.digest(OLD), serving.digest(NEW)
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    ready_on(ctx, "a", new)
    aborted = rollouts.abort(ctx, "chat")
    assert aborted.workload.serving == OLD
    assert aborted.workload.rollout.state == "aborted"
    assert digests(ctx) == dict.fromkeys(CLUSTERS, old)
    generations = {d.deployment.cluster_id: d.deployment.generation for d in aborted.deployments}
    assert generations == {"a": 3, "b": 3, "c": 1}, "c never got the change: untouched"
    with pytest.raises(errors.FailedPrecondition, match="no rollout to abort"):
        rollouts.abort(ctx, "chat")


def test_a_second_change_mid_rollout_keeps_the_first_previous(ctx: ServiceContext) -> None:
    old = serving.digest(OLD)
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEWER))
    record = workloads.spec(ctx, "chat").rollout
    assert (record.previous, record.previous_digest) == (OLD, old)
    assert record.target_digest == serving.digest(NEWER)
    # a is still rolling to NEW: in flight, so nobody else gets NEWER yet.
    assert digests(ctx) == {"a": serving.digest(NEW), "b": old, "c": old}
    rollouts.abort(ctx, "chat")
    assert digests(ctx) == dict.fromkeys(CLUSTERS, old)


def test_changing_back_to_the_previous_config_ends_the_rollout(ctx: ServiceContext) -> None:
    old = serving.digest(OLD)
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=OLD))
    assert digests(ctx) == dict.fromkeys(CLUSTERS, old)
    assert state(ctx) == "converged"


def test_waves_switched_off_mid_rollout_hand_the_change_to_everyone(
    ctx: ServiceContext,
) -> None:
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    workloads.update(ctx, "chat", workloads.WorkloadChange(rollout_policy=RolloutPolicy()))
    assert digests(ctx) == dict.fromkeys(CLUSTERS, serving.digest(NEW))
    assert state(ctx) == "converged"


def test_without_waves_no_rollout_is_recorded(ctx: ServiceContext) -> None:
    workloads.update(ctx, "chat", workloads.WorkloadChange(rollout_policy=RolloutPolicy()))
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    assert digests(ctx) == dict.fromkeys(CLUSTERS, serving.digest(NEW))
    assert state(ctx) == ""


def test_a_dry_run_of_a_change_in_waves_restarts_the_first_wave_only(ctx: ServiceContext) -> None:
    preview = workloads.preview_update(ctx, "chat", workloads.WorkloadChange(serving=NEW))
    restarted = sorted(
        c.current.deployment.cluster_id for c in preview.changes if "restarted" in c.effects
    )
    assert restarted == ["a"]
    assert preview.workload is not None
    assert preview.workload.workload.rollout.state == "rolling"
    assert state(ctx) == "", "nothing written"
    assert digests(ctx) == dict.fromkeys(CLUSTERS, serving.digest(OLD))
