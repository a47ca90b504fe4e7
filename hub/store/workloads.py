"""Workloads (table workloads): the user's intent, stored normalized."""

from __future__ import annotations

from hub import errors, serving
from hub.model import Placement, PlacementPreference, Workload
from hub.store import codec
from hub.store.port import IntegrityError, Row, Transaction


def insert(conn: Transaction, workload: Workload) -> None:
    try:
        conn.execute(
            "INSERT INTO workloads (workload_id, name, project, replicas, device_class, serving,"
            " placement, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ),
        )
    except IntegrityError as e:
        raise errors.AlreadyExists("workload", workload.name) from e


def update(conn: Transaction, workload: Workload) -> None:
    conn.execute(
        "UPDATE workloads SET replicas = ?, serving = ?, placement = ?, update_time = ?"
        " WHERE workload_id = ?",
        (
            workload.replicas,
            serving.encode(workload.serving),
            codec.dumps(_placement_document(workload.placement)),
            workload.update_time,
            workload.workload_id,
        ),
    )


def get(conn: Transaction, ref: str) -> Workload | None:
    """By id ("wl_...") or by name."""
    row = conn.execute(
        "SELECT * FROM workloads WHERE workload_id = ? OR name = ?", (ref, ref)
    ).fetchone()
    return _workload(row) if row else None


def list_page(conn: Transaction, *, after: str, limit: int, project: str = "") -> list[Workload]:
    query = "SELECT * FROM workloads WHERE name > ?"
    params: list[object] = [after]
    if project:
        query += " AND project = ?"
        params.append(project)
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
    }


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
        ),
        create_time=row["create_time"],
        update_time=row["update_time"],
    )
