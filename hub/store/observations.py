"""A deployment's observed state: its agent's status reports, rejections and applied objects,
and the replica set each report carries (hub/store/replicas.py holds the replica rows).

Observations are level-triggered: one deployment observation replaces the deployment's report
and its whole replica set. Each carries the agent's observation time (ns), and a record older
than the one stored is ignored, so a delayed batch can never roll state back. Nodes, devices
and allocations, the other half of what agents report, are hub/store/nodes.py's. Caller:
hub/service/ingest.py, the views and admission (reads).
"""

from __future__ import annotations

from collections.abc import Sequence

from hub.model import (
    AppliedObject,
    DeploymentObservation,
    Rejection,
    StatusReport,
)
from hub.store import codec, port, replicas
from hub.store.port import Transaction

_REPORT_UPSERT = (
    "INSERT INTO deployment_reports (deployment_id, observe_ns, has_status, phase, reason,"
    " message, ready_replicas, desired_replicas, applied_generation, absent, live_args,"
    " replicas_owner)"
    " {rows} ON CONFLICT (deployment_id) DO UPDATE SET"
    " observe_ns = excluded.observe_ns, has_status = excluded.has_status,"
    " phase = excluded.phase, reason = excluded.reason, message = excluded.message,"
    " ready_replicas = excluded.ready_replicas, desired_replicas = excluded.desired_replicas,"
    " applied_generation = excluded.applied_generation, absent = excluded.absent,"
    " live_args = excluded.live_args, replicas_owner = excluded.replicas_owner"
)


def write_deployments(
    conn: Transaction, items: Sequence[tuple[str, DeploymentObservation]]
) -> list[tuple[str, DeploymentObservation]]:
    """Apply deployment observations (cluster id, observation), a statement per table for the
    whole group rather than per record: SQLite's cost is per statement far more than per row.
    Returns those written; an observation not newer than the stored one is skipped, and of two
    for the same deployment in the group the newer wins."""
    newest: dict[str, tuple[str, DeploymentObservation]] = {}
    for cluster_id, obs in items:
        current = newest.get(obs.deployment_id)
        if current is None or obs.observe_ns > current[1].observe_ns:
            newest[obs.deployment_id] = (cluster_id, obs)
    stored: dict[str, int] = {}
    for chunk in port.chunks(list(newest)):
        for r in conn.execute(
            "SELECT deployment_id, observe_ns FROM deployment_reports"
            f" WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            stored[r["deployment_id"]] = r["observe_ns"]
    fresh = [
        (cluster_id, obs)
        for deployment_id, (cluster_id, obs) in newest.items()
        if stored.get(deployment_id, -1) < obs.observe_ns
    ]
    if not fresh:
        return []
    # Nothing below reads: pipelined (write_nodes says why).
    with conn.pipeline():
        port.write_rows(conn, _REPORT_UPSERT, [_report_row(obs) for _, obs in fresh])
        conn.executemany(
            "DELETE FROM deployment_rejections WHERE deployment_id = ? AND generation <= ?",
            [
                (obs.deployment_id, obs.status.applied_generation)
                for _, obs in fresh
                if obs.status is not None and obs.status.applied_generation
            ],
        )
        _write_applied(conn, fresh)
        for condition, params in conn.dialect.keys_in(
            "replicas", ("deployment_id",), ((obs.deployment_id,) for _, obs in fresh)
        ):
            conn.execute(f"DELETE FROM replicas WHERE {condition}", params)
        replicas.write(
            conn,
            [
                row
                for cluster_id, obs in fresh
                for row in replicas.rows(
                    cluster_id, obs.deployment_id, obs.replicas, obs.observe_ns
                )
            ],
        )
    return fresh


def _write_applied(conn: Transaction, fresh: Sequence[tuple[str, DeploymentObservation]]) -> None:
    """Each observation replaces the applied object the hub held (none: the row goes); an
    unchanged digest rewrites nothing, so the body is stored once per change, not per report."""
    for condition, params in conn.dialect.keys_in(
        "deployment_applied",
        ("deployment_id",),
        ((obs.deployment_id,) for _, obs in fresh if obs.applied is None),
    ):
        conn.execute(f"DELETE FROM deployment_applied WHERE {condition}", params)
    port.write_rows(
        conn,
        "INSERT INTO deployment_applied (deployment_id, cluster_id, api_version, kind,"
        " namespace, name, digest, body, truncated, observe_ns)"
        " {rows} ON CONFLICT (deployment_id) DO UPDATE SET"
        " api_version = excluded.api_version, kind = excluded.kind,"
        " namespace = excluded.namespace, name = excluded.name, digest = excluded.digest,"
        " body = excluded.body, truncated = excluded.truncated,"
        " observe_ns = excluded.observe_ns"
        " WHERE deployment_applied.digest != excluded.digest",
        [
            (
                obs.deployment_id,
                cluster_id,
                a.api_version,
                a.kind,
                a.namespace,
                a.name,
                a.digest,
                a.body,
                int(a.truncated),
                a.observe_ns,
            )
            for cluster_id, obs in fresh
            if (a := obs.applied) is not None
        ],
    )


def applied_objects(
    conn: Transaction, deployment_ids: Sequence[str], *, with_body: bool = False
) -> dict[str, AppliedObject]:
    """deployment id -> the object its agent applied; bodies only when asked (they are the
    bulk: a list of deployments shows the object's coordinates and digest)."""
    body = "body" if with_body else "'' AS body"
    result: dict[str, AppliedObject] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, api_version, kind, namespace, name, digest, truncated,"
            f" observe_ns, {body} FROM deployment_applied"
            f" WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            result[r["deployment_id"]] = AppliedObject(
                deployment_id=r["deployment_id"],
                api_version=r["api_version"],
                kind=r["kind"],
                namespace=r["namespace"],
                name=r["name"],
                digest=r["digest"],
                body=r["body"],
                truncated=bool(r["truncated"]),
                observe_ns=r["observe_ns"],
            )
    return result


def _report_row(obs: DeploymentObservation) -> tuple[object, ...]:
    status = obs.status
    return (
        obs.deployment_id,
        obs.observe_ns,
        int(status is not None),
        status.phase if status else "",
        status.reason if status else "",
        status.message if status else "",
        status.ready_replicas if status else 0,
        status.applied_replicas if status else 0,
        status.applied_generation if status else 0,
        int(obs.absent),
        codec.dumps(list(obs.live_args)),
        status.replicas_owner if status else "",
    )


def write_rejection(
    conn: Transaction, *, deployment_id: str, rejection: Rejection, now: float
) -> None:
    """Record why the agent could not apply a revision; an older reject (a lower revision,
    arriving late) never replaces a newer one."""
    conn.execute(
        "INSERT INTO deployment_rejections (deployment_id, revision, generation, error,"
        " reject_time) VALUES (?, ?, ?, ?, ?) ON CONFLICT (deployment_id) DO UPDATE SET"
        " revision = excluded.revision, generation = excluded.generation,"
        " error = excluded.error, reject_time = excluded.reject_time"
        " WHERE excluded.revision >= deployment_rejections.revision",
        (deployment_id, rejection.revision, rejection.generation, rejection.error, now),
    )


def reports(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, StatusReport | None]:
    """deployment id -> its last status report; None where it reported no status yet."""
    result: dict[str, StatusReport | None] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT * FROM deployment_reports WHERE deployment_id IN ({port.marks(chunk)})", chunk
        ):
            result[r["deployment_id"]] = (
                StatusReport(
                    phase=r["phase"],
                    reason=r["reason"],
                    message=r["message"],
                    ready_replicas=r["ready_replicas"],
                    # Column desired_replicas: the agent's word for the DGD's replicas.
                    applied_replicas=r["desired_replicas"],
                    applied_generation=r["applied_generation"],
                    observe_ns=r["observe_ns"],
                    absent=bool(r["absent"]),
                    live_args=tuple(codec.loads(r["live_args"])),
                    replicas_owner=r["replicas_owner"],
                )
                if r["has_status"]
                else None
            )
    return result


def rejections(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, Rejection]:
    result = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT * FROM deployment_rejections WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            result[r["deployment_id"]] = Rejection(r["revision"], r["generation"], r["error"])
    return result


def observed_versions(
    conn: Transaction, cluster_id: str, *, node_id: str | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """(deployment id -> observe_ns, node id -> observe_ns) of what the hub holds for a
    cluster's deployments and nodes (only `node_id` among the nodes, when given)."""
    deployments = {
        r["deployment_id"]: r["observe_ns"]
        for r in conn.execute(
            "SELECT r.deployment_id, r.observe_ns FROM deployment_reports r"
            " JOIN deployments d ON d.deployment_id = r.deployment_id WHERE d.cluster_id = ?",
            (cluster_id,),
        )
    }
    # Nodes that left are not held: the agent has nothing to resume for them.
    query = "SELECT node_id, observe_ns FROM nodes WHERE cluster_id = ? AND absent = 0"
    params: tuple[str, ...] = (cluster_id,)
    if node_id is not None:
        query, params = query + " AND node_id = ?", (cluster_id, node_id)
    nodes = {r["node_id"]: r["observe_ns"] for r in conn.execute(query, params)}
    return deployments, nodes
