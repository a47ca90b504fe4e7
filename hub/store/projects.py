"""Projects and their quotas (tables projects, quotas)."""

from __future__ import annotations

from collections.abc import Mapping

from hub import errors
from hub.filters import EVERYTHING, LabelSelector
from hub.model import Project
from hub.store import codec
from hub.store.labels import selected
from hub.store.port import IntegrityError, Row, Transaction


def insert(
    conn: Transaction,
    *,
    name: str,
    quotas: Mapping[str, int],
    now: float,
    preemptible_by_other_projects: bool = False,
    labels: Mapping[str, str] | None = None,
) -> None:
    try:
        conn.execute(
            "INSERT INTO projects (name, create_time, update_time, preemptible_by_other_projects,"
            " labels) VALUES (?, ?, ?, ?, ?)",
            (name, now, now, int(preemptible_by_other_projects), codec.dumps(dict(labels or {}))),
        )
    except IntegrityError as e:
        raise errors.AlreadyExists("project", name) from e
    _write_quotas(conn, name, quotas)


def get(conn: Transaction, name: str) -> Project | None:
    row = conn.execute("SELECT * FROM projects WHERE name = ?", (name,)).fetchone()
    return _project(conn, row) if row else None


def list_page(
    conn: Transaction, *, after: str, limit: int, selector: LabelSelector = EVERYTHING
) -> list[Project]:
    """A page by name; only those whose labels `selector` matches."""
    clauses, params = selected(conn, selector, "projects.labels")
    rows = conn.execute(
        "SELECT * FROM projects WHERE "
        + " AND ".join(["name > ?", *clauses])
        + " ORDER BY name LIMIT ?",
        [after, *params, limit],
    ).fetchall()
    return [_project(conn, row) for row in rows]


def set_quotas(conn: Transaction, *, name: str, quotas: Mapping[str, int], now: float) -> None:
    conn.execute("DELETE FROM quotas WHERE project = ?", (name,))
    _write_quotas(conn, name, quotas)
    conn.execute("UPDATE projects SET update_time = ? WHERE name = ?", (now, name))


def set_preemption_policy(
    conn: Transaction, *, name: str, preemptible_by_other_projects: bool, now: float
) -> None:
    conn.execute(
        "UPDATE projects SET preemptible_by_other_projects = ?, update_time = ? WHERE name = ?",
        (int(preemptible_by_other_projects), now, name),
    )


def set_labels(conn: Transaction, *, name: str, labels: Mapping[str, str], now: float) -> None:
    conn.execute(
        "UPDATE projects SET labels = ?, update_time = ? WHERE name = ?",
        (codec.dumps(dict(labels)), now, name),
    )


def preemptible_by_others(conn: Transaction) -> frozenset[str]:
    """Projects whose managed deployments another project's workload may preempt."""
    rows = conn.execute(
        "SELECT name FROM projects WHERE preemptible_by_other_projects = 1"
    ).fetchall()
    return frozenset(r["name"] for r in rows)


def delete(conn: Transaction, name: str) -> None:
    conn.execute("DELETE FROM projects WHERE name = ?", (name,))


def quota_limits(conn: Transaction) -> dict[tuple[str, str], int]:
    rows = conn.execute("SELECT project, device_class, device_limit FROM quotas").fetchall()
    return {(r["project"], r["device_class"]): r["device_limit"] for r in rows}


def _write_quotas(conn: Transaction, name: str, quotas: Mapping[str, int]) -> None:
    conn.executemany(
        "INSERT INTO quotas (project, device_class, device_limit) VALUES (?, ?, ?)",
        [(name, device_class, limit) for device_class, limit in sorted(quotas.items())],
    )


def _project(conn: Transaction, row: Row) -> Project:
    quotas = conn.execute(
        "SELECT device_class, device_limit FROM quotas WHERE project = ? ORDER BY device_class",
        (row["name"],),
    ).fetchall()
    return Project(
        name=row["name"],
        quotas={q["device_class"]: q["device_limit"] for q in quotas},
        create_time=row["create_time"],
        update_time=row["update_time"],
        preemptible_by_other_projects=bool(row["preemptible_by_other_projects"]),
        labels=codec.loads(row["labels"]),
    )
