"""Allocation rows hold no foreign key to their node (migration 0024: the per-row check cost
PostgreSQL about a sixth of its CPU an ingested record). What the key's cascade did is done
explicitly, and checked here on both engines: a cluster deleted takes its allocations with it
(and no other cluster's), a node reported gone takes its own; and the invariant that stands
guard over it (tests/invariants.py: no allocation outlives its node) finds one that does."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hub.model import ObservationBatch
from hub.service import clusters, ingest
from hub.service.context import ServiceContext
from hub.store.port import open_store
from tests import invariants, stores
from tests.unit.hub.test_ingest_cost import gpu_node


def _allocations(ctx: ServiceContext) -> dict[str, int]:
    with ctx.db.read() as conn:
        rows = conn.execute(
            "SELECT cluster_id, COUNT(*) AS n FROM allocations GROUP BY cluster_id"
        ).fetchall()
    return {r["cluster_id"]: r["n"] for r in rows}


def _report(ctx: ServiceContext, cluster_id: str, seq: int, *, absent: bool = False) -> None:
    node = gpu_node(cluster_id, 0, "pod", time.time_ns(), absent=absent)
    outcome = ingest.ingest(ctx, [(cluster_id, ObservationBatch(seq, nodes=(node,)))])
    assert not outcome.device_refusals


@pytest.fixture(params=stores.BACKENDS)
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> ServiceContext:
    context = ServiceContext(db=open_store(stores.store_url(tmp_path, request.param)))
    request.addfinalizer(context.db.close)
    for cluster_id in ("east", "west"):
        clusters.create(context, cluster_id=cluster_id, labels={})
        _report(context, cluster_id, 1)
    return context


def test_a_deleted_cluster_takes_its_allocations_and_no_other_clusters(
    ctx: ServiceContext,
) -> None:
    assert _allocations(ctx) == {"east": 8, "west": 8}, "two pods of 4 GPUs a cluster"
    clusters.delete(ctx, "east")
    assert _allocations(ctx) == {"west": 8}
    # The same id registered again starts with nothing of the old cluster's.
    clusters.create(ctx, cluster_id="east", labels={})
    assert _allocations(ctx) == {"west": 8}
    assert invariants.read(ctx.db).misplaced == []


def test_a_node_reported_gone_takes_its_allocations(ctx: ServiceContext) -> None:
    _report(ctx, "east", 2, absent=True)
    assert _allocations(ctx) == {"west": 8}
    assert invariants.read(ctx.db).misplaced == []


def test_the_invariants_find_an_allocation_that_outlived_its_node(ctx: ServiceContext) -> None:
    with ctx.db.write() as conn:
        conn.execute(
            "INSERT INTO allocations (cluster_id, node_id, namespace, pod_name, device_id,"
            " resource_name) VALUES (?, ?, ?, ?, ?, ?)",
            ("west", "west-n9", "default", "ghost", "GPU-west-9-0", "gpu"),
        )
        conn.execute("UPDATE nodes SET absent = 1 WHERE cluster_id = ?", ("east",))
    found = invariants.allocations_in_place(invariants.read(ctx.db))
    assert any("pod ghost on cluster west" in f and "not held by the hub" in f for f in found)
    assert sum("which is absent" in f for f in found) == 8, found
