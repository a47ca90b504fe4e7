"""A list page costs a fixed number of statements, however many clusters it spans (issue 13).

Counted on the hub's own read connection (sqlite3's trace callback on the connection the
calling thread reads with), through the service call both edges use.
"""

from __future__ import annotations

import sqlite3

from hub.filters import DeploymentFilter
from hub.service import deployments as deployment_service
from tests import stores
from tests.harness import Hub, workload

pytestmark = stores.sqlite_mechanics


def _statements_for_a_page(hub: Hub) -> tuple[int, int]:
    assert hub.server is not None and hub.server.ctx is not None
    ctx = hub.server.ctx
    seen: list[str] = []
    # The SQLite store's read transaction wraps this thread's read connection.
    with ctx.db.read() as tx:
        conn = tx._conn  # type: ignore[attr-defined]
        assert isinstance(conn, sqlite3.Connection)
        conn.set_trace_callback(seen.append)
    try:
        found, _ = deployment_service.list_page(
            ctx, where=DeploymentFilter(), page_size=100, page_token=""
        )
    finally:
        conn.set_trace_callback(None)
    return len(found), len(seen)


def test_a_page_of_deployments_over_many_clusters_reads_each_table_once(hub: Hub) -> None:
    clusters = [f"c{i:02d}" for i in range(40)]
    for cluster_id in clusters:
        hub.register_cluster(cluster_id)
    hub.create_project("search", H100_80GB=1000)
    hub.post("/v1/workloads", workload("wide", replicas=40, tp=1, clusters=tuple(clusters)))
    hub.post("/v1/workloads", workload("narrow", replicas=1, tp=1, clusters=("c00",)))
    deployments, statements = _statements_for_a_page(hub)
    assert deployments == 41
    # One statement per table the views read (plus BEGIN), not one or more per cluster: the
    # old code read each deployment's cluster twice, with its agent sessions (171 here).
    assert statements <= 15, statements
