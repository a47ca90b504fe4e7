"""The audit log (table audit_log): append, filtered newest-first pages, prune by age."""

from __future__ import annotations

from hub.filters import AuditFilter
from hub.model import AuditRecord
from hub.store.port import Row, Transaction


def append(conn: Transaction, record: AuditRecord) -> None:
    conn.execute(
        "INSERT INTO audit_log (time, actor, role, edge, action, target, outcome, message)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.time,
            record.actor,
            record.role,
            record.edge,
            record.action,
            record.target,
            record.outcome,
            record.message,
        ),
    )


def list_page(
    conn: Transaction, *, where: AuditFilter, before_id: int | None, limit: int
) -> list[AuditRecord]:
    """Newest first; `before_id` continues a previous page."""
    clauses, params = _where(where)
    if before_id is not None:
        clauses.append("id < ?")
        params.append(before_id)
    sql = "SELECT * FROM audit_log"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", [*params, limit]).fetchall()
    return [_record(row) for row in rows]


def prune(conn: Transaction, *, older_than: float) -> int:
    """Delete records older than `older_than` (Unix seconds); the number deleted."""
    count = int(
        conn.execute("SELECT COUNT(*) FROM audit_log WHERE time < ?", (older_than,)).fetchone()[0]
    )
    if count:
        conn.execute("DELETE FROM audit_log WHERE time < ?", (older_than,))
    return count


def _where(where: AuditFilter) -> tuple[list[str], list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    for column, value in (
        ("actor", where.actor),
        ("action", where.action),
        ("target", where.target),
        ("outcome", where.outcome),
    ):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    if where.since is not None:
        clauses.append("time >= ?")
        params.append(where.since)
    if where.until is not None:
        clauses.append("time < ?")
        params.append(where.until)
    return clauses, params


def _record(row: Row) -> AuditRecord:
    return AuditRecord(
        id=row["id"],
        time=row["time"],
        actor=row["actor"],
        role=row["role"],
        edge=row["edge"],
        action=row["action"],
        target=row["target"],
        outcome=row["outcome"],
        message=row["message"],
    )
