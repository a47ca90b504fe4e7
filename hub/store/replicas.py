"""A deployment's replicas (its pods) as its agent reported them: the rows a deployment
observation replaces (hub/store/observations.py), and what views and admission count of them
(pods, ready ones, per serving digest and role, engine versions, devices held).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from hub.model import (
    HeldDevice,
    ReplicaObservation,
)
from hub.store import port
from hub.store.port import Transaction


@dataclass(frozen=True)
class PodCounts:
    pods: int
    ready: int


def replica_id(cluster_id: str, namespace: str, name: str) -> str:
    """Stable id of a replica: the same pod always gets the same id, on every hub."""
    return "rep_" + hashlib.sha256(f"{cluster_id}/{namespace}/{name}".encode()).hexdigest()[:16]


# Rows replaced whole (Dialect.replace). A replica's id is a hash of (cluster, namespace,
# name): one key conflicts iff the other does, so replacing on the id is replacing the pod.
COLUMNS = (
    "replica_id",
    "deployment_id",
    "cluster_id",
    "namespace",
    "name",
    "node_id",
    "ready",
    "serving_digest",
    "engine_version",
    "role",
    "observe_ns",
)


def adopt_replicas(
    conn: Transaction,
    *,
    cluster_id: str,
    deployment_id: str,
    pods: Sequence[ReplicaObservation],
    observe_ns: int,
) -> None:
    """Record a discovered DGD's pods, as its agent last reported them, as the replicas of
    the deployment that adopts it (promotion). Until the agent reports the deployment itself,
    the devices those pods hold are then counted as the deployment's (held), not reserved a
    second time beside the allocations already seen. The agent's first report of the
    deployment is newer and replaces these rows (observations.write_deployments)."""
    write(conn, rows(cluster_id, deployment_id, pods, observe_ns))


def rows(
    cluster_id: str, deployment_id: str, pods: Sequence[ReplicaObservation], observe_ns: int
) -> list[tuple[object, ...]]:
    """Rows of table replicas (COLUMNS) for a deployment's reported pods."""
    return [
        (
            replica_id(cluster_id, r.namespace, r.name),
            deployment_id,
            cluster_id,
            r.namespace,
            r.name,
            r.node_id,
            int(r.ready),
            r.serving_digest,
            r.engine_version,
            r.role,
            observe_ns,
        )
        for r in pods
    ]


@dataclass(frozen=True)
class DigestCount:
    pods: int
    # Scheduled on a node (up), and ready.
    running: int
    ready: int


def digest_counts(
    conn: Transaction, deployment_ids: Sequence[str]
) -> dict[str, dict[str, DigestCount]]:
    """deployment id -> serving digest -> its pods (ready or not) and ready ones."""
    result: dict[str, dict[str, DigestCount]] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, serving_digest, COUNT(*) AS pods, SUM(ready) AS ready,"
            " SUM(CASE WHEN node_id != '' THEN 1 ELSE 0 END) AS running"
            f" FROM replicas WHERE deployment_id IN ({port.marks(chunk)})"
            " GROUP BY deployment_id, serving_digest",
            chunk,
        ):
            result.setdefault(r["deployment_id"], {})[r["serving_digest"]] = DigestCount(
                pods=r["pods"], running=r["running"] or 0, ready=r["ready"] or 0
            )
    return result


@dataclass(frozen=True)
class ReplicaCounts:
    """A deployment's pods as its view counts them."""

    pods: PodCounts
    # (serving digest, role) -> its pods, running and ready ones (a disaggregated replica is
    # a set of pods of two roles: hub/service/views.py counts sets).
    by_digest_role: dict[tuple[str, str], DigestCount]
    # The engine versions its pods report (none: not reported).
    engine_versions: set[str]


def replica_counts(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, ReplicaCounts]:
    """deployment id -> its pod counts, per digest and role, and engine versions: one
    statement per chunk of ids (a list page read them with three)."""
    # deployment id -> [pods, ready]; -> (digest, role) -> [pods, running, ready]; -> versions
    totals: dict[str, list[int]] = {}
    groups: dict[str, dict[tuple[str, str], list[int]]] = {}
    versions: dict[str, set[str]] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, serving_digest, role, engine_version, COUNT(*) AS pods,"
            " SUM(ready) AS ready, SUM(CASE WHEN node_id != '' THEN 1 ELSE 0 END) AS running"
            f" FROM replicas WHERE deployment_id IN ({port.marks(chunk)})"
            " GROUP BY deployment_id, serving_digest, role, engine_version",
            chunk,
        ):
            deployment_id, pods, ready = r["deployment_id"], r["pods"], r["ready"] or 0
            total = totals.setdefault(deployment_id, [0, 0])
            total[0] += pods
            total[1] += ready
            # Several rows of one digest and role: one per engine version its pods report.
            group = groups.setdefault(deployment_id, {}).setdefault(
                (r["serving_digest"], r["role"]), [0, 0, 0]
            )
            group[0] += pods
            group[1] += r["running"] or 0
            group[2] += ready
            version_set = versions.setdefault(deployment_id, set())
            if r["engine_version"]:
                version_set.add(r["engine_version"])
    return {
        deployment_id: ReplicaCounts(
            pods=PodCounts(pods=pods, ready=ready),
            by_digest_role={
                key: DigestCount(pods=g[0], running=g[1], ready=g[2])
                for key, g in groups[deployment_id].items()
            },
            engine_versions=versions[deployment_id],
        )
        for deployment_id, (pods, ready) in totals.items()
    }


def held_devices(
    conn: Transaction, deployment_ids: Sequence[str]
) -> dict[str, dict[tuple[str, str], list[HeldDevice]]]:
    """deployment id -> (replica id, pod) -> the devices it holds, with their NVLink domain
    and the pod's role and serving digest."""
    result: dict[str, dict[tuple[str, str], list[HeldDevice]]] = {}
    for chunk in port.chunks(deployment_ids):
        rows = conn.execute(
            "SELECT r.deployment_id, r.replica_id, r.name, r.role, r.serving_digest,"
            " a.device_id, a.node_id, dv.nvlink_domain, dv.uuid IS NOT NULL AS known"
            " FROM replicas r"
            " JOIN allocations a ON a.cluster_id = r.cluster_id AND a.namespace = r.namespace"
            "  AND a.pod_name = r.name"
            " LEFT JOIN devices dv ON dv.cluster_id = a.cluster_id AND dv.uuid = a.device_id"
            f" WHERE r.deployment_id IN ({port.marks(chunk)})",
            chunk,
        )
        for r in rows:
            pods = result.setdefault(r["deployment_id"], {})
            pods.setdefault((r["replica_id"], r["name"]), []).append(
                HeldDevice(
                    device_id=r["device_id"],
                    node_id=r["node_id"],
                    nvlink_domain=r["nvlink_domain"] if r["known"] else None,
                    role=r["role"],
                    serving_digest=r["serving_digest"],
                )
            )
    return result


def write(conn: Transaction, replica_rows: Sequence[tuple[object, ...]]) -> None:
    """Replicas replaced whole (Dialect.replace_rows), a statement per chunk of rows."""
    port.write_rows(
        conn,
        conn.dialect.replace_rows("replicas", COLUMNS, ("replica_id",)),
        replica_rows,
        unique=(0,),
    )
