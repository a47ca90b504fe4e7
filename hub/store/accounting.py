"""Device accounting: what deployments hold and reserve, per project and per cluster.

The definitions (docs/admission.md), computed here in SQL so a pass costs a few aggregate
queries rather than a walk over every row:
- held(d): devices in live allocations of deployment d's pods (allocations joined to replicas by
  cluster, namespace and pod name), kept in table deployment_held by ingest (refresh_held);
- reserved(d) = max(0, (admitted + surge replicas) x devices_per_replica - held(d)), or 0 while
  the agent rejects d's current generation: what it cannot apply reserves nothing, and what
  its pods still hold stays charged as held (docs/admission.md);
- a project's used / reserved per class = sum of held / reserved over its deployments;
- a cluster's total per class = NVML-verified healthy devices; allocated = those devices in any
  live allocation (ours or not); reserved = sum of reserved(d) over its deployments;
- a silent (stale) cluster: last heard from before now - the grace period; admission offers
  its free devices to no new demand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from hub.model import Capacity
from hub.store.port import Transaction, chunks, marks

# reserved(d), in SQL: what an admitted deployment (and its rollout surge) holds in reserve.
_RESERVED = (
    "CASE WHEN rj.generation >= d.generation THEN 0"
    " WHEN (d.admitted_replicas + d.surge_replicas) * d.devices_per_replica"
    " > COALESCE(h.held, 0) THEN (d.admitted_replicas + d.surge_replicas) * d.devices_per_replica"
    " - COALESCE(h.held, 0) ELSE 0 END"
)
_HELD_JOIN = (
    "LEFT JOIN deployment_held h ON h.deployment_id = d.deployment_id"
    " LEFT JOIN deployment_rejections rj ON rj.deployment_id = d.deployment_id"
)


def held_by_deployment(
    conn: Transaction, deployment_ids: Sequence[str] | None = None
) -> dict[str, int]:
    if deployment_ids is None:
        rows = conn.execute("SELECT deployment_id, held FROM deployment_held").fetchall()
        return {r["deployment_id"]: r["held"] for r in rows}
    held: dict[str, int] = {}
    for chunk in chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT deployment_id, held FROM deployment_held WHERE deployment_id IN"
            f" ({marks(chunk)})",
            chunk,
        ):
            held[r["deployment_id"]] = r["held"]
    return held


def charges_by_deployment(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, int]:
    """deployment id -> its charge, held(d) + reserved(d), as the quota counts it."""
    result: dict[str, int] = {}
    for chunk in chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT d.deployment_id AS deployment_id, COALESCE(h.held, 0) + ({_RESERVED})"
            f" AS charge FROM deployments d {_HELD_JOIN}"
            f" WHERE d.deployment_id IN ({marks(chunk)})",
            chunk,
        ):
            result[r["deployment_id"]] = r["charge"]
    return result


def refresh_held(conn: Transaction, cluster_id: str) -> None:
    """Recount what the cluster's deployments hold: after its replicas or allocations changed."""
    conn.execute("DELETE FROM deployment_held WHERE cluster_id = ?", (cluster_id,))
    conn.execute(
        "INSERT INTO deployment_held (deployment_id, cluster_id, held)"
        " SELECT r.deployment_id, r.cluster_id, COUNT(*) FROM replicas r"
        " JOIN allocations a ON a.cluster_id = r.cluster_id AND a.namespace = r.namespace"
        "  AND a.pod_name = r.name"
        " WHERE r.cluster_id = ? GROUP BY r.deployment_id, r.cluster_id",
        (cluster_id,),
    )


def refresh_held_of(conn: Transaction, cluster_ids: Iterable[str]) -> None:
    """`refresh_held` for many clusters, two statements per chunk of them rather than per
    cluster (an ingest group's clusters)."""
    cluster_ids = sorted(set(cluster_ids))
    for chunk in chunks(cluster_ids):
        conn.execute(f"DELETE FROM deployment_held WHERE cluster_id IN ({marks(chunk)})", chunk)
    # The clusters' allocations by index (`keys_in`), each joined to its replica: PostgreSQL
    # planned `r.cluster_id IN (..)` as a scan of every allocation and a hash join (12 ms a
    # statement at 2,000 clusters; 7 ms now, the replicas still scanned for the hash).
    for condition, params in conn.dialect.keys_in(
        "allocations", ("cluster_id",), ((c,) for c in cluster_ids), alias="a"
    ):
        conn.execute(
            "INSERT INTO deployment_held (deployment_id, cluster_id, held)"
            " SELECT r.deployment_id, r.cluster_id, COUNT(*) FROM allocations a"
            " JOIN replicas r ON r.cluster_id = a.cluster_id AND r.namespace = a.namespace"
            "  AND r.name = a.pod_name"
            f" WHERE {condition} GROUP BY r.deployment_id, r.cluster_id",
            params,
        )


def quota_charges(
    conn: Transaction, projects: Sequence[str] | None = None
) -> dict[tuple[str, str], tuple[int, int]]:
    """(project, class) -> (used, reserved)."""
    query = f"""
        SELECT d.project AS project, d.device_class AS device_class,
               COALESCE(SUM(h.held), 0) AS used,
               COALESCE(SUM({_RESERVED}), 0) AS reserved
        FROM deployments d {_HELD_JOIN}
        {{where}}
        GROUP BY d.project, d.device_class
    """
    result: dict[tuple[str, str], tuple[int, int]] = {}
    for where, params in _filters("d.project", projects):
        for r in conn.execute(query.format(where=where), params):
            result[(r["project"], r["device_class"])] = (r["used"], r["reserved"])
    return result


def capacities(
    conn: Transaction, cluster_ids: Sequence[str] | None = None
) -> dict[tuple[str, str], Capacity]:
    """(cluster, class) -> Capacity, for every class the cluster has devices or demand of."""
    # [usable, allocated, reserved, unusable] per (cluster, class)
    totals: dict[tuple[str, str], list[int]] = {}
    scopes: list[list[str] | None] = [None] if cluster_ids is None else list(chunks(cluster_ids))
    for chunk in scopes:
        params = chunk or []

        def only(column: str, chunk: list[str] | None = chunk) -> str:
            return f"AND {column} IN ({marks(chunk)})" if chunk is not None else ""

        for r in conn.execute(
            f"""SELECT cluster_id, device_class,
                       SUM(CASE WHEN verified = 1 AND healthy = 1 THEN 1 ELSE 0 END) AS usable,
                       SUM(CASE WHEN verified = 1 AND healthy = 1 THEN 0 ELSE 1 END) AS unusable
                FROM devices WHERE 1 = 1 {only("cluster_id")}
                GROUP BY cluster_id, device_class""",
            params,
        ):
            totals[(r["cluster_id"], r["device_class"])] = [r["usable"], 0, 0, r["unusable"]]
        for r in conn.execute(
            f"""SELECT dv.cluster_id AS cluster_id, dv.device_class AS device_class,
                       COUNT(DISTINCT dv.uuid) AS allocated
                FROM allocations a
                JOIN devices dv ON dv.cluster_id = a.cluster_id AND dv.uuid = a.device_id
                WHERE dv.verified = 1 AND dv.healthy = 1 {only("a.cluster_id")}
                GROUP BY dv.cluster_id, dv.device_class""",
            params,
        ):
            key = (r["cluster_id"], r["device_class"])
            totals.setdefault(key, [0, 0, 0, 0])[1] = r["allocated"]
        for r in conn.execute(
            f"""SELECT d.cluster_id AS cluster_id, d.device_class AS device_class,
                       COALESCE(SUM({_RESERVED}), 0) AS reserved
                FROM deployments d {_HELD_JOIN}
                WHERE 1 = 1 {only("d.cluster_id")}
                GROUP BY d.cluster_id, d.device_class""",
            params,
        ):
            key = (r["cluster_id"], r["device_class"])
            totals.setdefault(key, [0, 0, 0, 0])[2] = r["reserved"]
    return {
        key: Capacity(total=t, allocated=a, reserved=res, unusable=u)
        for key, (t, a, res, u) in totals.items()
    }


def overcommitted(
    conn: Transaction, cluster_ids: Sequence[str] | None = None
) -> dict[tuple[str, str], int]:
    """(cluster, class) -> devices allocated and reserved beyond the verified total, where a
    cluster came back with fewer devices than it had admitted.

    Only a class with devices in reserve can be overcommitted (what is allocated alone never
    exceeds what exists), so the devices are counted only on the clusters that have some:
    usually none, and one query over the deployments then answers for the whole fleet (a
    pass after every report asks; counting every device of 200 clusters took 9 ms)."""
    reserving: set[str] = set()
    scopes: list[list[str] | None] = [None] if cluster_ids is None else list(chunks(cluster_ids))
    for chunk in scopes:
        only = f"AND d.cluster_id IN ({marks(chunk)})" if chunk is not None else ""
        for r in conn.execute(
            f"""SELECT DISTINCT d.cluster_id AS cluster_id FROM deployments d {_HELD_JOIN}
                WHERE ({_RESERVED}) > 0 {only}""",
            chunk or [],
        ):
            reserving.add(r["cluster_id"])
    if not reserving:
        return {}
    return {
        key: cap.allocated + cap.reserved - cap.total
        for key, cap in capacities(conn, sorted(reserving)).items()
        if cap.reserved and cap.allocated + cap.reserved > cap.total
    }


def cordoned_idle(
    conn: Transaction, nodes_by_cluster: Mapping[str, Sequence[str]]
) -> dict[tuple[str, str], int]:
    """(cluster, class) -> usable devices on these cordoned nodes that no pod holds: free
    devices a cordon takes away from new admissions (what runs there keeps its devices)."""
    result: dict[tuple[str, str], int] = {}
    for cluster_id, nodes in sorted(nodes_by_cluster.items()):
        for chunk in chunks(nodes):
            for r in conn.execute(
                "SELECT dv.device_class AS device_class, COUNT(*) AS idle FROM devices dv"
                f" WHERE dv.cluster_id = ? AND dv.node_id IN ({marks(chunk)})"
                " AND dv.verified = 1 AND dv.healthy = 1 AND NOT EXISTS (SELECT 1 FROM"
                # On the device's own node (where its allocations are stored): by the key.
                " allocations a WHERE a.cluster_id = dv.cluster_id AND a.node_id = dv.node_id"
                " AND a.device_id = dv.uuid)"
                " GROUP BY dv.device_class",
                [cluster_id, *chunk],
            ):
                key = (cluster_id, r["device_class"])
                result[key] = result.get(key, 0) + r["idle"]
    return result


def silent_clusters(
    conn: Transaction, *, seen_before: float, cluster_ids: Sequence[str] | None = None
) -> set[str]:
    """Clusters last heard from before `seen_before` (never heard from: not silent). A stale
    cluster offers no free capacity to new admissions (docs/admission.md), so the pass asks."""
    query = "SELECT cluster_id FROM clusters WHERE last_seen IS NOT NULL AND last_seen < ? {where}"
    silent: set[str] = set()
    scopes: list[list[str] | None] = [None] if cluster_ids is None else list(chunks(cluster_ids))
    for chunk in scopes:
        where = "" if chunk is None else f"AND cluster_id IN ({marks(chunk)})"
        for r in conn.execute(query.format(where=where), [seen_before, *(chunk or [])]):
            silent.add(r["cluster_id"])
    return silent


def unheard_clusters(conn: Transaction, cluster_ids: Sequence[str]) -> set[str]:
    """Clusters among these that no agent was ever heard from: no message recorded
    (last_seen unset), no stream open, no node ever reported."""
    unheard: set[str] = set()
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            "SELECT c.cluster_id FROM clusters c WHERE c.last_seen IS NULL"
            f" AND c.cluster_id IN ({marks(chunk)})"
            " AND NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.cluster_id = c.cluster_id)"
            " AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.cluster_id = c.cluster_id)",
            chunk,
        ):
            unheard.add(r["cluster_id"])
    return unheard


def _filters(column: str, values: Sequence[str] | None) -> Iterator[tuple[str, list[str]]]:
    if values is None:
        yield "", []
        return
    for chunk in chunks(values):
        yield f"WHERE {column} IN ({marks(chunk)})", chunk


def waiting_demand(conn: Transaction) -> dict[tuple[str, str, str], tuple[int, int, float]]:
    """(project, class, reason) -> (deployments, devices, oldest pending_since) of enabled
    deployments that wait for replicas admission has not given them (for /metrics)."""
    rows = conn.execute(
        "SELECT project, device_class, admission_reason, COUNT(*) AS deployments,"
        " SUM((desired_replicas - admitted_replicas) * devices_per_replica) AS devices,"
        " MIN(pending_since) AS oldest FROM deployments"
        " WHERE enabled = 1 AND admission_reason NOT IN ('', 'disabled')"
        " AND desired_replicas > admitted_replicas"
        " GROUP BY project, device_class, admission_reason"
    ).fetchall()
    return {
        (r["project"], r["device_class"], r["admission_reason"]): (
            int(r["deployments"]),
            int(r["devices"]),
            float(r["oldest"]),
        )
        for r in rows
    }
