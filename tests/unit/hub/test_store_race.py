"""Racing admissions: writers on separate connections (as separate hub processes would be)
can never admit past a quota, because every admission pass runs inside BEGIN IMMEDIATE."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hub.model import Device, NodeObservation, ObservationBatch, Placement, Serving
from hub.service import clusters, projects, sync, workloads
from hub.service.context import ServiceContext
from hub.store.db import Database

H100 = "H100-80GB"


def _gpus(n: int) -> tuple[Device, ...]:
    return tuple(
        Device(
            f"GPU-{i}", "H100", 80, f"0:{i}", H100, healthy=True, health_reason="", verified=True
        )
        for i in range(n)
    )


def _spec(name: str) -> workloads.WorkloadSpec:
    return workloads.WorkloadSpec(
        name=name,
        project="search",
        replicas=1,
        device_class=H100,
        serving=Serving(engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=4),
        placement=Placement(clusters=("east",)),
    )


def test_concurrent_creates_from_many_connections_never_exceed_the_quota(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    setup = ServiceContext(db=Database(path))
    projects.create(setup, name="search", quotas={H100: 16})
    clusters.create(setup, cluster_id="east", labels={})
    sync.ingest(
        setup,
        [
            (
                "east",
                ObservationBatch(
                    seq=1, nodes=(NodeObservation("n1", time.time_ns(), _gpus(64), ()),)
                ),
            )
        ],
    )
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(index: int) -> None:
        ctx = ServiceContext(db=Database(path, busy_timeout_s=30))
        try:
            barrier.wait()
            for j in range(5):
                workloads.create(ctx, _spec(f"w{index}-{j}"))
        except BaseException as e:  # collected and re-raised in the test thread
            errors.append(e)
        finally:
            ctx.db.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    usage = projects.get(setup, "search").usage[H100]
    assert usage.used + usage.reserved == 16, "exactly the quota, never more"
    admitted = [
        w
        for w in workloads.list_page(setup, project="search", page_size=100, page_token="")[0]
        if w.deployments[0].deployment.admitted_replicas
    ]
    assert len(admitted) == 4
