"""The cluster-written tables: reports, rejections, replicas, nodes, devices, allocations.

Observations are level-triggered: one deployment observation replaces the deployment's report
and its whole replica set; one node observation replaces the node's devices and allocations.
Each carries the agent's observation time (ns), and a record older than the one stored is
ignored, so a delayed batch can never roll state back. Unchanged node state is not rewritten
(agents resend their full state after every reconnect).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass, replace

from hub.model import (
    Allocation,
    AllocationObservation,
    DeploymentObservation,
    Device,
    HeldDevice,
    Node,
    NodeObservation,
    Rejection,
    Replica,
    StatusReport,
)
from hub.store import codec


@dataclass(frozen=True)
class PodCounts:
    pods: int
    ready: int


def replica_id(cluster_id: str, namespace: str, name: str) -> str:
    """Stable id of a replica: the same pod always gets the same id, on every hub."""
    return "rep_" + hashlib.sha256(f"{cluster_id}/{namespace}/{name}".encode()).hexdigest()[:16]


# -- writes -----------------------------------------------------------------------------------


def write_deployment(
    conn: sqlite3.Connection, *, cluster_id: str, observation: DeploymentObservation
) -> bool:
    """Apply one deployment observation; False when an equal or newer one is already stored."""
    row = conn.execute(
        "SELECT observe_ns FROM deployment_reports WHERE deployment_id = ?",
        (observation.deployment_id,),
    ).fetchone()
    if row is not None and row["observe_ns"] >= observation.observe_ns:
        return False
    status = observation.status
    conn.execute(
        "INSERT INTO deployment_reports (deployment_id, observe_ns, has_status, phase, reason,"
        " message, ready_replicas, desired_replicas, applied_generation, absent, live_args)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (deployment_id) DO UPDATE SET"
        " observe_ns = excluded.observe_ns, has_status = excluded.has_status,"
        " phase = excluded.phase, reason = excluded.reason, message = excluded.message,"
        " ready_replicas = excluded.ready_replicas,"
        " desired_replicas = excluded.desired_replicas,"
        " applied_generation = excluded.applied_generation, absent = excluded.absent,"
        " live_args = excluded.live_args",
        (
            observation.deployment_id,
            observation.observe_ns,
            int(status is not None),
            status.phase if status else "",
            status.reason if status else "",
            status.message if status else "",
            status.ready_replicas if status else 0,
            status.desired_replicas if status else 0,
            status.applied_generation if status else 0,
            int(observation.absent),
            codec.dumps(list(observation.live_args)),
        ),
    )
    if status is not None and status.applied_generation:
        conn.execute(
            "DELETE FROM deployment_rejections WHERE deployment_id = ? AND generation <= ?",
            (observation.deployment_id, status.applied_generation),
        )
    conn.execute("DELETE FROM replicas WHERE deployment_id = ?", (observation.deployment_id,))
    conn.executemany(
        "INSERT OR REPLACE INTO replicas (replica_id, deployment_id, cluster_id, namespace, name,"
        " node_id, ready, serving_digest, engine_version, role, observe_ns)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                replica_id(cluster_id, r.namespace, r.name),
                observation.deployment_id,
                cluster_id,
                r.namespace,
                r.name,
                r.node_id,
                int(r.ready),
                r.serving_digest,
                r.engine_version,
                r.role,
                observation.observe_ns,
            )
            for r in observation.replicas
        ],
    )
    return True


# (cluster id, node id) -> hashes of the device and allocation rows last committed. Per process,
# per database (the service context holds it, and updates it only once a transaction commits):
# it spares reading a node's rows back to see that they did not change. A miss (a new process)
# falls back to reading them; a node row that is gone (its cluster was deleted) is rewritten.
NodeHashes = MutableMapping[tuple[str, str], tuple[int, int]]


def write_node(
    conn: sqlite3.Connection,
    *,
    cluster_id: str,
    observation: NodeObservation,
    known: NodeHashes | None = None,
    written: NodeHashes | None = None,
) -> bool:
    """Apply one node observation; True when the node's devices or allocations changed."""
    row = conn.execute(
        "SELECT observe_ns FROM nodes WHERE cluster_id = ? AND node_id = ?",
        (cluster_id, observation.node_id),
    ).fetchone()
    if row is not None and row["observe_ns"] >= observation.observe_ns:
        return False
    devices = () if observation.absent else observation.devices
    allocations = () if observation.absent else observation.allocations
    device_rows = _device_rows(devices)
    allocation_rows = _allocation_rows(allocations)
    hashes = (hash(frozenset(device_rows)), hash(frozenset(allocation_rows)))
    key = (cluster_id, observation.node_id)
    last = known.get(key) if known is not None else None
    # Pods come and go far more often than GPUs: rewrite only the table that changed.
    if row is None:
        devices_changed = allocations_changed = True
    elif last is not None:
        devices_changed, allocations_changed = last[0] != hashes[0], last[1] != hashes[1]
    else:
        devices_changed = _stored_devices(conn, cluster_id, observation.node_id) != device_rows
        allocations_changed = (
            _stored_allocations(conn, cluster_id, observation.node_id) != allocation_rows
        )
    if written is not None:
        written[key] = hashes
    conn.execute(
        "INSERT INTO nodes (cluster_id, node_id, observe_ns, inventory_error, absent)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (cluster_id, node_id) DO UPDATE SET"
        " observe_ns = excluded.observe_ns, inventory_error = excluded.inventory_error,"
        " absent = excluded.absent",
        (
            cluster_id,
            observation.node_id,
            observation.observe_ns,
            observation.inventory_error,
            int(observation.absent),
        ),
    )
    if devices_changed:
        conn.execute(
            "DELETE FROM devices WHERE cluster_id = ? AND node_id = ?",
            (cluster_id, observation.node_id),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO devices (cluster_id, node_id, uuid, name, memory_bytes,"
            " pci_bus_id, device_class, healthy, health_reason, verified, nvlink_domain,"
            " parent_uuid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(cluster_id, observation.node_id, *d) for d in sorted(device_rows)],
        )
    if allocations_changed:
        conn.execute(
            "DELETE FROM allocations WHERE cluster_id = ? AND node_id = ?",
            (cluster_id, observation.node_id),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO allocations (cluster_id, node_id, namespace, pod_name,"
            " device_id, resource_name) VALUES (?, ?, ?, ?, ?, ?)",
            [(cluster_id, observation.node_id, *a) for a in sorted(allocation_rows)],
        )
    return devices_changed or allocations_changed


def write_rejection(
    conn: sqlite3.Connection, *, deployment_id: str, rejection: Rejection, now: float
) -> None:
    conn.execute(
        "INSERT INTO deployment_rejections (deployment_id, revision, generation, error,"
        " reject_time) VALUES (?, ?, ?, ?, ?) ON CONFLICT (deployment_id) DO UPDATE SET"
        " revision = excluded.revision, generation = excluded.generation,"
        " error = excluded.error, reject_time = excluded.reject_time",
        (deployment_id, rejection.revision, rejection.generation, rejection.error, now),
    )


def _device_rows(devices: Iterable[Device]) -> set[tuple[object, ...]]:
    return {
        (
            d.uuid,
            d.name,
            d.memory_bytes,
            d.pci_bus_id,
            d.device_class,
            int(d.healthy),
            d.health_reason,
            int(d.verified),
            d.nvlink_domain,
            d.parent_uuid,
        )
        for d in devices
    }


def _allocation_rows(allocations: Iterable[AllocationObservation]) -> set[tuple[str, ...]]:
    return {
        (a.namespace, a.pod_name, device_id, a.resource_name)
        for a in allocations
        for device_id in a.device_ids
    }


def _stored_devices(
    conn: sqlite3.Connection, cluster_id: str, node_id: str
) -> set[tuple[object, ...]]:
    rows = conn.execute(
        "SELECT uuid, name, memory_bytes, pci_bus_id, device_class, healthy, health_reason,"
        " verified, nvlink_domain, parent_uuid FROM devices WHERE cluster_id = ? AND node_id = ?",
        (cluster_id, node_id),
    )
    return {tuple(r) for r in rows}


def _stored_allocations(
    conn: sqlite3.Connection, cluster_id: str, node_id: str
) -> set[tuple[str, ...]]:
    rows = conn.execute(
        "SELECT namespace, pod_name, device_id, resource_name FROM allocations"
        " WHERE cluster_id = ? AND node_id = ?",
        (cluster_id, node_id),
    )
    return {tuple(r) for r in rows}


# -- reads ------------------------------------------------------------------------------------


def reports(
    conn: sqlite3.Connection, deployment_ids: Sequence[str]
) -> dict[str, StatusReport | None]:
    """deployment id -> its last status report; None where it reported no status yet."""
    result: dict[str, StatusReport | None] = {}
    for chunk in _chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT * FROM deployment_reports WHERE deployment_id IN ({_marks(chunk)})", chunk
        ):
            result[r["deployment_id"]] = (
                StatusReport(
                    phase=r["phase"],
                    reason=r["reason"],
                    message=r["message"],
                    ready_replicas=r["ready_replicas"],
                    desired_replicas=r["desired_replicas"],
                    applied_generation=r["applied_generation"],
                    observe_ns=r["observe_ns"],
                    absent=bool(r["absent"]),
                    live_args=tuple(codec.loads(r["live_args"])),
                )
                if r["has_status"]
                else None
            )
    return result


def rejections(conn: sqlite3.Connection, deployment_ids: Sequence[str]) -> dict[str, Rejection]:
    result = {}
    for chunk in _chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT * FROM deployment_rejections WHERE deployment_id IN ({_marks(chunk)})", chunk
        ):
            result[r["deployment_id"]] = Rejection(r["revision"], r["generation"], r["error"])
    return result


def pod_counts(conn: sqlite3.Connection, deployment_ids: Sequence[str]) -> dict[str, PodCounts]:
    result = {}
    for chunk in _chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, COUNT(*) AS pods, SUM(ready) AS ready FROM replicas"
            f" WHERE deployment_id IN ({_marks(chunk)}) GROUP BY deployment_id",
            chunk,
        ):
            result[r["deployment_id"]] = PodCounts(pods=r["pods"], ready=r["ready"] or 0)
    return result


@dataclass(frozen=True)
class DigestCount:
    pods: int
    # Scheduled on a node (up), and ready.
    running: int
    ready: int


def digest_counts(
    conn: sqlite3.Connection, deployment_ids: Sequence[str]
) -> dict[str, dict[str, DigestCount]]:
    """deployment id -> serving digest -> its pods (ready or not) and ready ones."""
    result: dict[str, dict[str, DigestCount]] = {}
    for chunk in _chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, serving_digest, COUNT(*) AS pods, SUM(ready) AS ready,"
            " SUM(CASE WHEN node_id != '' THEN 1 ELSE 0 END) AS running"
            f" FROM replicas WHERE deployment_id IN ({_marks(chunk)})"
            " GROUP BY deployment_id, serving_digest",
            chunk,
        ):
            result.setdefault(r["deployment_id"], {})[r["serving_digest"]] = DigestCount(
                pods=r["pods"], running=r["running"] or 0, ready=r["ready"] or 0
            )
    return result


def engine_versions(conn: sqlite3.Connection, deployment_ids: Sequence[str]) -> dict[str, set[str]]:
    result: dict[str, set[str]] = {}
    for chunk in _chunks(deployment_ids):
        for r in conn.execute(
            "SELECT DISTINCT deployment_id, engine_version FROM replicas"
            f" WHERE engine_version != '' AND deployment_id IN ({_marks(chunk)})",
            chunk,
        ):
            result.setdefault(r["deployment_id"], set()).add(r["engine_version"])
    return result


def held_devices(
    conn: sqlite3.Connection, deployment_ids: Sequence[str]
) -> dict[str, dict[tuple[str, str], list[HeldDevice]]]:
    """deployment id -> (replica id, pod) -> the devices it holds, with their NVLink domain."""
    result: dict[str, dict[tuple[str, str], list[HeldDevice]]] = {}
    for chunk in _chunks(deployment_ids):
        rows = conn.execute(
            "SELECT r.deployment_id, r.replica_id, r.name, a.device_id, a.node_id,"
            " dv.nvlink_domain, dv.uuid IS NOT NULL AS known FROM replicas r"
            " JOIN allocations a ON a.cluster_id = r.cluster_id AND a.namespace = r.namespace"
            "  AND a.pod_name = r.name"
            " LEFT JOIN devices dv ON dv.cluster_id = a.cluster_id AND dv.uuid = a.device_id"
            f" WHERE r.deployment_id IN ({_marks(chunk)})",
            chunk,
        )
        for r in rows:
            pods = result.setdefault(r["deployment_id"], {})
            pods.setdefault((r["replica_id"], r["name"]), []).append(
                HeldDevice(
                    device_id=r["device_id"],
                    node_id=r["node_id"],
                    nvlink_domain=r["nvlink_domain"] if r["known"] else None,
                )
            )
    return result


@dataclass(frozen=True)
class ReplicaFilter:
    deployment_id: str = ""
    cluster_id: str = ""
    replica_id: str = ""


def list_replicas(
    conn: sqlite3.Connection, *, where: ReplicaFilter, after: str, limit: int
) -> list[Replica]:
    clauses, params = ["r.replica_id > ?"], [after]
    for column, value in (
        ("r.deployment_id", where.deployment_id),
        ("r.cluster_id", where.cluster_id),
        ("r.replica_id", where.replica_id),
    ):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    rows = conn.execute(
        f"SELECT r.* FROM replicas r WHERE {' AND '.join(clauses)} ORDER BY r.replica_id LIMIT ?",
        [*params, limit],
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


def find_replica_ids(conn: sqlite3.Connection, pod_name: str) -> list[str]:
    rows = conn.execute("SELECT replica_id FROM replicas WHERE name = ?", (pod_name,))
    return [r["replica_id"] for r in rows]


@dataclass(frozen=True)
class AllocationFilter:
    replica_id: str = ""
    deployment_id: str = ""
    project: str = ""
    cluster_id: str = ""


def list_allocations(
    conn: sqlite3.Connection, *, where: AllocationFilter, after: str, limit: int
) -> list[Allocation]:
    """Allocations grouped per pod; keyed (for paging) by replica id."""
    clauses, params = [], []
    for column, value in (
        ("r.replica_id", where.replica_id),
        ("r.deployment_id", where.deployment_id),
        ("d.project", where.project),
        ("a.cluster_id", where.cluster_id),
    ):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    rows = conn.execute(
        "SELECT a.cluster_id, a.node_id, a.namespace, a.pod_name, a.device_id,"
        " r.replica_id, r.deployment_id, d.project FROM allocations a"
        " LEFT JOIN replicas r ON r.cluster_id = a.cluster_id AND r.namespace = a.namespace"
        "  AND r.name = a.pod_name"
        " LEFT JOIN deployments d ON d.deployment_id = r.deployment_id"
        f" {'WHERE ' + ' AND '.join(clauses) if clauses else ''}"
        " ORDER BY a.cluster_id, a.namespace, a.pod_name, a.device_id",
        params,
    ).fetchall()
    grouped: dict[str, Allocation] = {}
    for r in rows:
        rid = r["replica_id"] or replica_id(r["cluster_id"], r["namespace"], r["pod_name"])
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


def nodes_of(conn: sqlite3.Connection, cluster_id: str) -> list[Node]:
    node_rows = conn.execute(
        "SELECT * FROM nodes WHERE cluster_id = ? AND absent = 0 ORDER BY node_id", (cluster_id,)
    ).fetchall()
    device_rows = conn.execute(
        "SELECT * FROM devices WHERE cluster_id = ? ORDER BY node_id, pci_bus_id, uuid",
        (cluster_id,),
    ).fetchall()
    by_node: dict[str, list[Device]] = {}
    for d in device_rows:
        by_node.setdefault(d["node_id"], []).append(
            Device(
                uuid=d["uuid"],
                name=d["name"],
                memory_bytes=d["memory_bytes"],
                pci_bus_id=d["pci_bus_id"],
                device_class=d["device_class"],
                healthy=bool(d["healthy"]),
                health_reason=d["health_reason"],
                verified=bool(d["verified"]),
                nvlink_domain=d["nvlink_domain"],
                parent_uuid=d["parent_uuid"],
            )
        )
    return [
        Node(
            node_id=n["node_id"],
            devices=tuple(by_node.get(n["node_id"], ())),
            inventory_error=n["inventory_error"],
            observe_ns=n["observe_ns"],
        )
        for n in node_rows
    ]


def _devices_by_pod(
    conn: sqlite3.Connection, pods: Sequence[tuple[str, str, str]]
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


def _chunks(values: Sequence[str]) -> Iterable[list[str]]:
    items = list(dict.fromkeys(values))
    for start in range(0, len(items), 500):
        yield items[start : start + 500]


def _marks(values: Sequence[str]) -> str:
    return ",".join("?" * len(values))
