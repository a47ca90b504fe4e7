"""Workloads (table workloads): the user's intent, stored normalized."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hub import errors, serving
from hub.filters import EVERYTHING, LabelSelector
from hub.model import (
    ROLLOUT_ROLLING,
    FailoverPolicy,
    Placement,
    PlacementPreference,
    RolloutPolicy,
    Workload,
    WorkloadRollout,
)
from hub.store import codec, port
from hub.store.labels import selected
from hub.store.port import IntegrityError, Row, Transaction


def insert(conn: Transaction, workload: Workload) -> None:
    try:
        conn.execute(
            "INSERT INTO workloads (workload_id, name, project, replicas, device_class, serving,"
            " placement, create_time, update_time, rollout_policy, rollout_state, rollout,"
            " priority, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                workload.workload_id,
                workload.name,
                workload.project,
                workload.replicas,
                workload.device_class,
                serving.encode(workload.serving),
                codec.dumps(_placement_document(workload.placement)),
                workload.create_time,
                workload.update_time,
                codec.dumps(_policy_document(workload.rollout_policy)),
                workload.rollout.state,
                codec.dumps(_rollout_document(workload.rollout)),
                workload.priority,
                codec.dumps(dict(workload.labels)),
            ),
        )
    except IntegrityError as e:
        raise errors.AlreadyExists("workload", workload.name) from e


def update(conn: Transaction, workload: Workload) -> None:
    conn.execute(
        "UPDATE workloads SET replicas = ?, serving = ?, placement = ?, update_time = ?,"
        " rollout_policy = ?, rollout_state = ?, rollout = ?, priority = ?, labels = ?"
        " WHERE workload_id = ?",
        (
            workload.replicas,
            serving.encode(workload.serving),
            codec.dumps(_placement_document(workload.placement)),
            workload.update_time,
            codec.dumps(_policy_document(workload.rollout_policy)),
            workload.rollout.state,
            codec.dumps(_rollout_document(workload.rollout)),
            workload.priority,
            codec.dumps(dict(workload.labels)),
            workload.workload_id,
        ),
    )


def set_rollout(conn: Transaction, workload_id: str, rollout: WorkloadRollout) -> None:
    """Record a wave decision (the workload's intent is unchanged)."""
    conn.execute(
        "UPDATE workloads SET rollout_state = ?, rollout = ? WHERE workload_id = ?",
        (rollout.state, codec.dumps(_rollout_document(rollout)), workload_id),
    )


def rolling_ids(conn: Transaction) -> list[str]:
    """Workloads with a rollout in waves under way (not paused): the periodic pass's work."""
    rows = conn.execute(
        "SELECT workload_id FROM workloads WHERE rollout_state = ? ORDER BY workload_id",
        (ROLLOUT_ROLLING,),
    ).fetchall()
    return [r["workload_id"] for r in rows]


def get(conn: Transaction, ref: str) -> Workload | None:
    """By id ("wl_...") or by name."""
    row = conn.execute(
        "SELECT * FROM workloads WHERE workload_id = ? OR name = ?", (ref, ref)
    ).fetchone()
    return _workload(row) if row else None


def list_page(
    conn: Transaction,
    *,
    after: str,
    limit: int,
    project: str = "",
    projects: Iterable[str] | None = None,
    selector: LabelSelector = EVERYTHING,
) -> list[Workload]:
    """A page by name; of one `project`, and only of `projects` when given (a scoped token's);
    only those whose labels `selector` matches."""
    query = "SELECT * FROM workloads WHERE name > ?"
    params: list[object] = [after]
    if project:
        query += " AND project = ?"
        params.append(project)
    if projects is not None:
        clause, values = port.among("project", projects)
        query += f" AND {clause}"
        params += values
    clauses, values = selected(conn, selector, "workloads.labels")
    query += "".join(f" AND {c}" for c in clauses)
    params += values
    rows = conn.execute(query + " ORDER BY name LIMIT ?", [*params, limit]).fetchall()
    return [_workload(r) for r in rows]


def count_in_project(conn: Transaction, project: str) -> int:
    row = conn.execute("SELECT COUNT(*) FROM workloads WHERE project = ?", (project,)).fetchone()
    return int(row[0])


def delete(conn: Transaction, workload_id: str) -> None:
    conn.execute("DELETE FROM workloads WHERE workload_id = ?", (workload_id,))


def _placement_document(placement: Placement) -> dict[str, object]:
    return {
        "clusters": list(placement.clusters),
        "cluster_selector": dict(placement.cluster_selector),
        "topology": placement.topology,
        "preferences": [
            {
                "clusters": list(p.clusters),
                "cluster_selector": dict(p.cluster_selector),
                "weights": dict(p.weights),
            }
            for p in placement.preferences
        ],
        **(
            {}
            if placement.failover is None
            else {
                "failover": {
                    "toleration_s": placement.failover.toleration_s,
                    "stabilization_s": placement.failover.stabilization_s,
                }
            }
        ),
    }


def _policy_document(policy: RolloutPolicy) -> dict[str, int]:
    if not policy.waves and not policy.wave_deadline_seconds:
        return {}
    return {
        "max_clusters_in_flight": policy.max_clusters_in_flight,
        "wave_deadline_seconds": policy.wave_deadline_seconds,
    }


def _rollout_document(rollout: WorkloadRollout) -> dict[str, Any]:
    if not rollout.state:
        return {}
    return {
        "target_digest": rollout.target_digest,
        "previous": serving.to_document(rollout.previous) if rollout.previous else None,
        "previous_digest": rollout.previous_digest,
        "changed_at": dict(rollout.changed_at),
        "reason": rollout.reason,
        "message": rollout.message,
        "start_time": rollout.start_time,
        "update_time": rollout.update_time,
    }


def _policy(document: Mapping[str, Any]) -> RolloutPolicy:
    return RolloutPolicy(
        max_clusters_in_flight=int(document.get("max_clusters_in_flight", 0)),
        wave_deadline_seconds=int(document.get("wave_deadline_seconds", 0)),
    )


def _rollout(state: str, document: Mapping[str, Any]) -> WorkloadRollout:
    if not state:
        return WorkloadRollout()
    previous = document.get("previous")
    return WorkloadRollout(
        state=state,
        target_digest=document.get("target_digest", ""),
        previous=serving.from_document(dict(previous)) if previous else None,
        previous_digest=document.get("previous_digest", ""),
        changed_at={k: float(v) for k, v in document.get("changed_at", {}).items()},
        reason=document.get("reason", ""),
        message=document.get("message", ""),
        start_time=float(document.get("start_time", 0.0)),
        update_time=float(document.get("update_time", 0.0)),
    )


def _failover(document: dict[str, int] | None) -> FailoverPolicy | None:
    if document is None:
        return None
    return FailoverPolicy(
        toleration_s=document["toleration_s"], stabilization_s=document["stabilization_s"]
    )


def _workload(row: Row) -> Workload:
    placement = codec.loads(row["placement"])
    return Workload(
        workload_id=row["workload_id"],
        name=row["name"],
        project=row["project"],
        replicas=row["replicas"],
        device_class=row["device_class"],
        serving=serving.decode(row["serving"]),
        placement=Placement(
            clusters=tuple(placement["clusters"]),
            cluster_selector=placement["cluster_selector"],
            topology=placement.get("topology", ""),
            # Rows written before preferences existed have none: today's levelling.
            preferences=tuple(
                PlacementPreference(
                    clusters=tuple(p["clusters"]),
                    cluster_selector=p["cluster_selector"],
                    weights=p["weights"],
                )
                for p in placement.get("preferences", ())
            ),
            failover=_failover(placement.get("failover")),
        ),
        create_time=row["create_time"],
        update_time=row["update_time"],
        rollout_policy=_policy(codec.loads(row["rollout_policy"])),
        rollout=_rollout(row["rollout_state"], codec.loads(row["rollout"])),
        priority=row["priority"],
        labels=codec.loads(row["labels"]),
    )
