"""Dry runs (issue 12 item 5, AIP-163 validate_only) through the hub's use cases, on each store
backend: a preview of create, update (scale, serving, placement) and delete leaves every
table as it was (every row of every table compared, cluster revisions included), publishes
nothing to the agents' streams, and predicts exactly what the real call then does."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from hub import admission, errors
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
from hub.service import clusters, deployments, dryrun, ingest, projects, rollouts, sync, workloads
from hub.service.context import ServiceContext
from hub.serving import digest as serving_digest
from hub.store.port import open_store

H100 = "H100-80GB"


@dataclass
class RecordingPublisher:
    """Stands where the hub's fanout stands: what would have been told to the streams."""

    published: list[list[str]] = field(default_factory=list)

    def desired_changed(self, cluster_ids: Iterable[str]) -> None:
        self.published.append(sorted(cluster_ids))

    def settle(self, timeout_s: float) -> None:
        return None

    def identity_changed(self, cluster_id: str, token_hash: str | None) -> None:
        return None


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    return ServiceContext(db=open_store(store_url), publisher=RecordingPublisher())


def published(ctx: ServiceContext) -> list[list[str]]:
    publisher = ctx.publisher
    assert isinstance(publisher, RecordingPublisher)
    return publisher.published


def serving(version: str = "0.11.0") -> Serving:
    return Serving(engine="vllm", engine_version=version, model="m", tensor_parallel=4)


def spec(name: str, *, replicas: int, where: tuple[str, ...] = ()) -> workloads.WorkloadSpec:
    return workloads.WorkloadSpec(
        name=name,
        project="search",
        replicas=replicas,
        device_class=H100,
        serving=serving(),
        placement=Placement(clusters=where),
    )


def report_devices(ctx: ServiceContext, cluster_id: str, count: int) -> None:
    devices = tuple(
        Device(f"GPU-{cluster_id}-{i}", "H100", 80, f"0:{i}", H100, True, "", verified=True)
        for i in range(count)
    )
    batch = ObservationBatch(seq=1, nodes=(NodeObservation("n1", time.time_ns(), devices, ()),))
    sync.record_liveness(ctx, last_seen={cluster_id: ctx.clock()}, applied={})
    ingest.ingest(ctx, [(cluster_id, batch)])


def fleet(ctx: ServiceContext, *, quota: int = 64, east: int = 8, west: int = 8) -> None:
    projects.create(ctx, name="search", quotas={H100: quota})
    for cluster_id, count in (("east", east), ("west", west)):
        clusters.create(ctx, cluster_id=cluster_id, labels={})
        report_devices(ctx, cluster_id, count)


def dump(ctx: ServiceContext) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order: the whole database as the API's reads
    and the agents' deltas see it (revisions, tombstones, audit included)."""
    with ctx.db.read() as conn:
        if conn.dialect.name == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        else:
            query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        tables = sorted(str(row[0]) for row in conn.execute(query).fetchall())
        result = {}
        for table in tables:
            rows = [tuple(row) for row in conn.execute(f"SELECT * FROM {table}").fetchall()]
            result[table] = sorted(rows, key=repr)
    assert "deployments" in result and "workloads" in result
    return result


def shape(view: workloads.views.WorkloadView | None) -> dict[str, tuple[int, int, str, str]]:
    """What a call decides per cluster: desired, admitted, reason, serving digest."""
    assert view is not None
    return {
        v.deployment.cluster_id: (
            v.deployment.desired_replicas,
            v.deployment.admitted_replicas,
            v.admission_reason,
            v.deployment.serving_digest,
        )
        for v in view.deployments
    }


def effects(preview: dryrun.DryRun) -> dict[str, tuple[str, ...]]:
    return {c.current.deployment.name: c.effects for c in preview.changes}


def test_a_previewed_create_writes_nothing_and_predicts_the_real_one(
    ctx: ServiceContext,
) -> None:
    # 4 GPUs a replica, 8 per cluster, a quota of 12 GPUs: 3 replicas fit the quota.
    fleet(ctx, quota=12)
    before, told = dump(ctx), len(published(ctx))

    preview = workloads.preview_create(ctx, spec("chat", replicas=4))

    assert dump(ctx) == before, "a dry run writes no row, no revision, no tombstone"
    assert len(published(ctx)) == told, "and tells no agent anything"
    with pytest.raises(errors.NotFound):
        workloads.get(ctx, "chat")
    predicted = shape(preview.workload)
    assert {c: (d, a, r) for c, (d, a, r, _) in predicted.items()} == {
        "east": (2, 2, ""),
        "west": (2, 1, "insufficient_quota"),
    }
    assert effects(preview) == {
        "chat.east": ("created", "admitted"),
        "chat.west": ("created", "admitted", "waits"),
    }
    assert preview.summary == "2 deployments: 2 created, 2 admitted, 1 waits (insufficient_quota)"

    real = workloads.create(ctx, spec("chat", replicas=4))
    assert shape(real) == predicted
    assert dump(ctx) != before


def test_a_previewed_scale_and_serving_change_predict_the_real_update(
    ctx: ServiceContext,
) -> None:
    fleet(ctx, quota=32)
    workloads.create(ctx, spec("chat", replicas=2))
    before, told = dump(ctx), len(published(ctx))

    change = workloads.WorkloadChange(replicas=5, serving=serving("0.12.0"))
    preview = workloads.preview_update(ctx, "chat", change)

    assert dump(ctx) == before
    assert len(published(ctx)) == told
    old = workloads.get(ctx, "chat")
    assert old.workload.replicas == 2 and old.workload.serving.engine_version == "0.11.0"
    assert preview.workload is not None and preview.workload.workload.replicas == 5
    # 5 replicas over two clusters of 2 replicas' room each: one waits for capacity; every
    # deployment gets the new serving digest (no pods reported here: nothing to restart).
    names = effects(preview)
    assert set(names) == {"chat.east", "chat.west"}
    assert all("reconfigured" in e and "scaled" in e for e in names.values())
    assert any("waits" in e for e in names.values())

    real = workloads.update(ctx, "chat", change)
    assert shape(real) == shape(preview.workload)


def test_a_previewed_delete_names_what_it_frees_and_writes_nothing(ctx: ServiceContext) -> None:
    # One cluster of 8 GPUs: "big" takes it whole, "small" waits for room.
    fleet(ctx, quota=64, east=8, west=0)
    workloads.create(ctx, spec("big", replicas=2, where=("east",)))
    workloads.create(ctx, spec("small", replicas=1, where=("east",)))
    assert deployments.get(ctx, "small.east").admission_reason == "insufficient_capacity"
    before, told = dump(ctx), len(published(ctx))

    preview = workloads.preview_delete(ctx, "big")

    assert dump(ctx) == before
    assert len(published(ctx)) == told
    assert preview.workload is None
    assert effects(preview) == {"big.east": ("removed",), "small.east": ("admitted",)}
    assert workloads.get(ctx, "big").workload.replicas == 2

    workloads.delete(ctx, "big")
    small = deployments.get(ctx, "small.east").deployment
    assert (small.admitted_replicas, small.admission_reason) == (1, "")


def test_a_previewed_placement_change_moves_like_the_real_one(ctx: ServiceContext) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    before = dump(ctx)

    change = workloads.WorkloadChange(placement=Placement(clusters=("west",)))
    preview = workloads.preview_update(ctx, "chat", change)

    assert dump(ctx) == before
    # Make-before-break (issue 20): east is removed once west runs, not by the call.
    assert effects(preview) == {"chat.west": ("created", "admitted")}
    real = workloads.update(ctx, "chat", change)
    assert shape(real) == shape(preview.workload)


def test_a_refused_call_is_refused_the_same_in_a_dry_run(ctx: ServiceContext) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("chat", replicas=1))
    before = dump(ctx)
    with pytest.raises(errors.AlreadyExists):
        workloads.preview_create(ctx, spec("chat", replicas=1))
    with pytest.raises(errors.NotFound):
        workloads.preview_delete(ctx, "nope")
    with pytest.raises(errors.InvalidArgument, match=r"workload\.replicas"):
        workloads.preview_update(ctx, "chat", workloads.WorkloadChange(replicas=-1))
    with pytest.raises(errors.InvalidArgument, match="devices per replica"):
        workloads.preview_update(
            ctx,
            "chat",
            workloads.WorkloadChange(
                serving=Serving(engine="vllm", engine_version="0.11.0", model="m")
            ),
        )
    assert dump(ctx) == before


def test_a_call_that_changes_nothing_says_so(ctx: ServiceContext) -> None:
    fleet(ctx)
    workloads.create(ctx, spec("chat", replicas=2))
    preview = workloads.preview_update(ctx, "chat", workloads.WorkloadChange(replicas=2))
    assert (preview.changes, preview.summary) == ((), "no change")


@pytest.mark.parametrize("ids", [("dep_a", "dep_b"), ("dep_b", "dep_a")])
def test_demands_of_one_instant_are_admitted_in_cluster_order_whatever_their_ids(
    ids: tuple[str, str],
) -> None:
    """What lets a dry run predict the real call: the deployments one call creates share a
    `pending_since`, and their (random) ids must not decide which gets the last quota."""
    demands = [
        admission.Demand(
            deployment_id=deployment_id,
            project="search",
            cluster_id=cluster_id,
            device_class=H100,
            devices_per_replica=4,
            desired_replicas=1,
            admitted_replicas=0,
            enabled=True,
            pending_since=1.0,
        )
        for deployment_id, cluster_id in zip(ids, ("west", "east"), strict=True)
    ]
    room = admission.AdmissionView(
        quota_limits={("search", H100): 4},
        quota_charged={},
        cluster_free={("east", H100): 8, ("west", H100): 8},
    )
    cluster_of = {d.deployment_id: d.cluster_id for d in demands}
    decided = {
        cluster_of[d.deployment_id]: d.admitted_replicas for d in admission.decide(demands, room)
    }
    assert decided == {"east": 1, "west": 0}


# -- the other workload mutations: enable/disable a deployment, resume and abort a rollout --


def test_a_previewed_disable_names_what_it_frees_and_writes_nothing(ctx: ServiceContext) -> None:
    fleet(ctx, quota=64, east=8, west=0)
    workloads.create(ctx, spec("big", replicas=2, where=("east",)))
    workloads.create(ctx, spec("small", replicas=1, where=("east",)))
    before, told = dump(ctx), len(published(ctx))

    view, preview = deployments.preview_set_enabled(ctx, "big.east", enabled=False)

    assert dump(ctx) == before
    assert len(published(ctx)) == told
    assert (view.deployment.enabled, view.deployment.admitted_replicas) == (False, 0)
    assert effects(preview) == {"big.east": ("disabled",), "small.east": ("admitted",)}

    deployments.set_enabled(ctx, "big.east", enabled=False)
    small = deployments.get(ctx, "small.east").deployment
    assert small.admitted_replicas == 1


def rollout_fleet(ctx: ServiceContext) -> None:
    """Three clusters, one replica each, serving changes in waves of one cluster."""
    projects.create(ctx, name="search", quotas={H100: 64})
    for cluster_id in ("a", "b", "c"):
        clusters.create(ctx, cluster_id=cluster_id, labels={})
        report_devices(ctx, cluster_id, 8)
    workloads.create(
        ctx,
        replace(
            spec("chat", replicas=3, where=("a", "b", "c")),
            rollout_policy=RolloutPolicy(max_clusters_in_flight=1, wave_deadline_seconds=60),
        ),
    )
    for cluster_id in ("a", "b", "c"):
        ready_on(ctx, cluster_id, serving_digest(serving()))


def ready_on(ctx: ServiceContext, cluster_id: str, digest: str) -> None:
    """What the cluster's agent reports once its one replica runs `digest`, ready."""
    d = deployments.get(ctx, f"chat.{cluster_id}").deployment
    status = StatusReport("successful", "", "", 1, 1, d.generation, time.time_ns())
    pod = ReplicaObservation("pod-1", "ml", "n1", True, digest, "x", "worker")
    observed = DeploymentObservation(d.deployment_id, time.time_ns(), status, (pod,))
    ingest.ingest(ctx, [(cluster_id, ObservationBatch(seq=2, deployments=(observed,)))])


def test_a_previewed_abort_of_a_rollout_predicts_the_real_one(
    ctx: ServiceContext,
) -> None:
    rollout_fleet(ctx)
    new = serving("0.12.0")
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=new))
    ready_on(ctx, "a", serving_digest(new))  # the first wave done: b gets the change
    before = dump(ctx)

    preview = rollouts.preview_abort(ctx, "chat")

    assert dump(ctx) == before
    # a and b run (or roll to) the new digest: both go back, c never left the old one.
    assert set(effects(preview)) == {"chat.a", "chat.b"}
    assert effects(preview)["chat.a"] == ("restarted",), "a's ready replica rolls back"
    real = rollouts.abort(ctx, "chat")
    assert shape(real) == shape(preview.workload)


def test_a_previewed_resume_of_a_paused_rollout_predicts_the_real_one(
    ctx: ServiceContext,
) -> None:
    rollout_fleet(ctx)
    new = serving("0.12.0")
    workloads.update(ctx, "chat", workloads.WorkloadChange(serving=new))
    # Refused as the real call is while nothing is paused.
    with pytest.raises(errors.FailedPrecondition, match="no paused rollout"):
        rollouts.preview_resume(ctx, "chat")
    ctx.clock = lambda: time.time() + 61
    rollouts.sweep(ctx)
    assert workloads.spec(ctx, "chat").rollout.state == "paused"
    before = dump(ctx)
    resumed = rollouts.preview_resume(ctx, "chat")
    assert dump(ctx) == before
    assert resumed.workload is not None and resumed.workload.workload.rollout.state == "rolling"
    assert shape(rollouts.resume(ctx, "chat")) == shape(resumed.workload)
