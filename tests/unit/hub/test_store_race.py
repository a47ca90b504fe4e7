"""Racing admissions: writers on separate stores (as separate hub processes would be) can never
admit past a quota: every admission pass runs inside one serialized write transaction
(SQLite: BEGIN IMMEDIATE; PostgreSQL: the write advisory lock), on either backend."""

from __future__ import annotations

import threading
import time

from hub.model import Device, NodeObservation, ObservationBatch, Placement, Serving
from hub.service import clusters, ingest, projects, workloads
from hub.service.context import ServiceContext
from hub.store.port import open_store

H100 = "H100-80GB"


def _gpus(cluster_id: str, n: int) -> tuple[Device, ...]:
    return tuple(
        Device(
            f"GPU-{cluster_id}-{i}",
            "H100",
            80,
            f"0:{i}",
            H100,
            healthy=True,
            health_reason="",
            verified=True,
        )
        for i in range(n)
    )


# Each writer places on a cluster of its own: the only thing the writers share is the
# project's quota, so no row lock of a cluster serializes them by chance.
CLUSTERS = tuple(f"east{i}" for i in range(8))


def _spec(name: str, cluster_id: str) -> workloads.WorkloadSpec:
    return workloads.WorkloadSpec(
        name=name,
        project="search",
        replicas=1,
        device_class=H100,
        serving=Serving(engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=4),
        placement=Placement(clusters=(cluster_id,)),
    )


def test_concurrent_creates_from_many_stores_never_exceed_the_quota(store_url: str) -> None:
    setup = ServiceContext(db=open_store(store_url))
    projects.create(setup, name="search", quotas={H100: 16})
    for cluster_id in CLUSTERS:
        clusters.create(setup, cluster_id=cluster_id, labels={})
        node = NodeObservation("n1", time.time_ns(), _gpus(cluster_id, 16), ())
        ingest.ingest(setup, [(cluster_id, ObservationBatch(seq=1, nodes=(node,)))])
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(index: int) -> None:
        ctx = ServiceContext(
            db=open_store(store_url, busy_timeout_s=30)
            if not store_url.startswith("postgresql")
            else open_store(store_url, pool_size=2)
        )
        try:
            barrier.wait()
            for j in range(5):
                workloads.create(ctx, _spec(f"w{index}-{j}", CLUSTERS[index]))
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
