"""Reasons and reservations say what is true now (issue 9, item 5), through the hub's use cases
on a real SQLite store: a pending reason goes when its cause goes, a rejected deployment
releases its reservation and says why, a cluster never heard from reads as such."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hub.model import Device, NodeObservation, ObservationBatch, Placement, Serving
from hub.service import clusters, deployments, projects, sync, workloads
from hub.service.context import ServiceContext
from hub.store.db import Database

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
def ctx(tmp_path: Path) -> ServiceContext:
    return ServiceContext(db=Database(tmp_path / "hub.db"))


def report_devices(ctx: ServiceContext, cluster_id: str, count: int) -> None:
    """What an agent's node report does: devices in, the cluster seen now."""
    batch = ObservationBatch(seq=1, nodes=(NodeObservation("n1", time.time_ns(), gpus(count), ()),))
    sync.record_liveness(ctx, last_seen={cluster_id: ctx.clock()}, applied={})
    sync.ingest(ctx, [(cluster_id, batch)])


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
    workloads.create(ctx, spec("chat", replicas=2))
    assert reason(ctx, "chat.east")[:2] == (0, "insufficient_quota")

    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=0))
    assert reason(ctx, "chat.east") == (0, "", ""), "zero replicas wait for nothing"


def test_a_reason_goes_when_the_deployment_is_admitted(ctx: ServiceContext) -> None:
    projects.create(ctx, name="search", quotas={H100: 4})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 16)
    workloads.create(ctx, spec("chat", replicas=2))
    assert reason(ctx, "chat.east")[:2] == (0, "insufficient_quota")
    projects.set_quotas(ctx, name="search", quotas={H100: 8})
    assert reason(ctx, "chat.east") == (2, "", "")
