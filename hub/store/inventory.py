"""What runs where, paged for the inventory API: replicas with the devices their pods hold,
and device allocations grouped per pod. Reads only; the agents' observations write these rows
(hub/store/observations.py, hub/store/nodes.py). Caller: hub/service/inventory.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hub.filters import AllocationFilter, ReplicaFilter
from hub.model import Allocation, Replica
from hub.store import port, replicas
from hub.store.labels import OF_DEPLOYMENT, OF_REPLICA, selected
from hub.store.port import Transaction


def list_replicas(
    conn: Transaction, *, where: ReplicaFilter, after: str, limit: int
) -> list[Replica]:
    where_ = (
        port.Where("r.replica_id > ?", after)
        .equal(
            ("r.deployment_id", where.deployment_id),
            ("r.cluster_id", where.cluster_id),
            ("r.replica_id", where.replica_id),
        )
        .among(
            "project",
            where.projects,
            within="r.deployment_id IN (SELECT deployment_id FROM deployments WHERE {clause})",
        )
        .extend(selected(conn, where.labels, OF_REPLICA.format(r="r")))
    )
    rows = conn.execute(
        f"SELECT r.* FROM replicas r {where_.sql()} ORDER BY r.replica_id LIMIT ?",
        [*where_.params, limit],
    ).fetchall()
    devices = _devices_by_pod(conn, [(r["cluster_id"], r["namespace"], r["name"]) for r in rows])
    return [
        Replica(
            replica_id=r["replica_id"],
            deployment_id=r["deployment_id"],
            cluster_id=r["cluster_id"],
            name=r["name"],
            namespace=r["namespace"],
            node_id=r["node_id"],
            ready=bool(r["ready"]),
            serving_digest=r["serving_digest"],
            engine_version=r["engine_version"],
            role=r["role"],
            observe_ns=r["observe_ns"],
            device_ids=devices.get((r["cluster_id"], r["namespace"], r["name"]), ()),
        )
        for r in rows
    ]


def find_replica_ids(conn: Transaction, pod_name: str) -> list[str]:
    rows = conn.execute("SELECT replica_id FROM replicas WHERE name = ?", (pod_name,))
    return [r["replica_id"] for r in rows]


def list_allocations(
    conn: Transaction, *, where: AllocationFilter, after: str, limit: int
) -> list[Allocation]:
    """Allocations grouped per pod; keyed (for paging) by replica id."""
    where_ = (
        port.Where()
        .equal(
            ("r.replica_id", where.replica_id),
            ("r.deployment_id", where.deployment_id),
            ("d.project", where.project),
            ("a.cluster_id", where.cluster_id),
        )
        .among("d.project", where.projects)
        .extend(selected(conn, where.labels, OF_DEPLOYMENT.format(d="d")))
    )
    rows = conn.execute(
        "SELECT a.cluster_id, a.node_id, a.namespace, a.pod_name, a.device_id,"
        " r.replica_id, r.deployment_id, d.project FROM allocations a"
        " LEFT JOIN replicas r ON r.cluster_id = a.cluster_id AND r.namespace = a.namespace"
        "  AND r.name = a.pod_name"
        " LEFT JOIN deployments d ON d.deployment_id = r.deployment_id"
        f" {where_.sql()}"
        " ORDER BY a.cluster_id, a.namespace, a.pod_name, a.device_id",
        where_.params,
    ).fetchall()
    grouped: dict[str, Allocation] = {}
    for r in rows:
        rid = r["replica_id"] or replicas.replica_id(r["cluster_id"], r["namespace"], r["pod_name"])
        current = grouped.get(rid)
        if current is None:
            grouped[rid] = Allocation(
                replica_id=rid,
                deployment_id=r["deployment_id"] or "",
                cluster_id=r["cluster_id"],
                project=r["project"] or "",
                node_id=r["node_id"],
                pod_name=r["pod_name"],
                namespace=r["namespace"],
                device_ids=(r["device_id"],),
            )
        else:
            grouped[rid] = replace(current, device_ids=(*current.device_ids, r["device_id"]))
    ordered = sorted((rid, a) for rid, a in grouped.items() if rid > after)
    return [a for _, a in ordered[:limit]]


def _devices_by_pod(
    conn: Transaction, pods: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], tuple[str, ...]]:
    result: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for cluster_id, namespace, name in pods:
        rows = conn.execute(
            "SELECT device_id FROM allocations WHERE cluster_id = ? AND namespace = ?"
            " AND pod_name = ? ORDER BY device_id",
            (cluster_id, namespace, name),
        )
        ids = tuple(r["device_id"] for r in rows)
        if ids:
            result[(cluster_id, namespace, name)] = ids
    return result
