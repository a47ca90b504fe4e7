"""Admission's overcommit check (hub/store/accounting.py `overcommitted`): a cluster back with
fewer devices than it admitted is found, on both backends, and a pass where nothing is in
reserve counts no device (it ran on every admission pass: 9 of a fleet-wide update's 25 ms
at 200 clusters, docs/benchmark.md "Profile findings")."""

from __future__ import annotations

import pytest

from hub.service import admit, clusters, projects, workloads
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import accounting
from hub.store.port import open_store
from tests.unit.hub.test_reasons_true_now import H100, report_devices, spec


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    return ServiceContext(db=open_store(store_url))


def _by_capacities(ctx: ServiceContext) -> dict[tuple[str, str], int]:
    """The check as it was written first: from every cluster's capacities."""
    with snapshot(ctx) as conn:
        return {
            key: cap.allocated + cap.reserved - cap.total
            for key, cap in accounting.capacities(conn).items()
            if cap.reserved and cap.allocated + cap.reserved > cap.total
        }


def test_a_cluster_back_with_fewer_devices_is_overcommitted(ctx: ServiceContext) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    for cluster_id in ("east", "west"):
        clusters.create(ctx, cluster_id=cluster_id, labels={})
        report_devices(ctx, cluster_id, 8)
    workloads.create(ctx, spec("chat", replicas=2, cluster="east"))  # 8 devices in reserve
    workloads.create(ctx, spec("tiny", replicas=1, cluster="west"))
    assert _by_capacities(ctx) == {}
    with snapshot(ctx) as conn:
        assert accounting.overcommitted(conn) == {}
    # Half its devices gone unhealthy, before any pass saw it (a pass releases what it
    # cannot hold: the check is what makes it).
    with ctx.db.write() as conn:
        conn.execute(
            "UPDATE devices SET healthy = 0 WHERE cluster_id = 'east'"
            " AND uuid IN ('GPU-0', 'GPU-1', 'GPU-2', 'GPU-3')"
        )
    assert _by_capacities(ctx) == {("east", H100): 4}
    with snapshot(ctx) as conn:
        assert accounting.overcommitted(conn) == {("east", H100): 4}
        assert accounting.overcommitted(conn, ["west"]) == {}
        assert accounting.overcommitted(conn, ["east", "west"]) == {("east", H100): 4}


def test_nothing_in_reserve_counts_no_device(
    ctx: ServiceContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    projects.create(ctx, name="search", quotas={H100: 64})
    clusters.create(ctx, cluster_id="east", labels={})
    report_devices(ctx, "east", 8)

    def counted(*args: object, **kwargs: object) -> object:
        raise AssertionError("counted every device with nothing in reserve")

    monkeypatch.setattr(accounting, "capacities", counted)
    # A pass over the cluster, as every report and control call runs one, nothing waiting.
    with transaction(ctx) as tx:
        assert admit.run(ctx, tx, cluster_ids=["east"]) == []
        assert admit.run(ctx, tx) == []
