"""The dashboard's chart history (table dashboard_history): sampled values per time bucket.

A point is (kind, name, bucket, device class, field) -> value. Writing a bucket again replaces
its values, so several hubs sampling the same bucket leave one point; `prune` bounds the table
by time.
"""

from __future__ import annotations

from collections.abc import Sequence

from hub.store.port import Transaction

_COLUMNS = ("kind", "name", "bucket", "device_class", "field", "value")
_KEY = ("kind", "name", "bucket", "device_class", "field")

# (kind, name, device class, field, value): one sampled value.
Value = tuple[str, str, str, str, int]
# (bucket, device class, field, value): one point of a series.
Point = tuple[int, str, str, int]


def put(conn: Transaction, bucket: int, values: Sequence[Value]) -> None:
    conn.executemany(
        conn.dialect.replace("dashboard_history", _COLUMNS, _KEY),
        [(kind, name, bucket, cls, field, value) for kind, name, cls, field, value in values],
    )


def prune(conn: Transaction, *, before: int) -> None:
    conn.execute("DELETE FROM dashboard_history WHERE bucket < ?", (before,))


def read(conn: Transaction, kind: str, name: str, *, since: int) -> list[Point]:
    rows = conn.execute(
        "SELECT bucket, device_class, field, value FROM dashboard_history"
        " WHERE kind = ? AND name = ? AND bucket >= ? ORDER BY bucket, device_class, field",
        (kind, name, since),
    ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]


def heard_from(conn: Transaction) -> dict[str, bool]:
    """Every registered cluster -> whether any agent of it was ever heard from: a message
    recorded, a stream open, or a node reported (the rule of hub/service/views.py
    `cluster_view`, which shows no device count for a cluster never heard from)."""
    rows = conn.execute(
        "SELECT c.cluster_id AS cluster_id, (c.last_seen IS NOT NULL"
        " OR EXISTS (SELECT 1 FROM agent_sessions s WHERE s.cluster_id = c.cluster_id)"
        " OR EXISTS (SELECT 1 FROM nodes n WHERE n.cluster_id = c.cluster_id AND n.absent = 0))"
        " AS heard FROM clusters c"
    ).fetchall()
    return {str(r["cluster_id"]): bool(r["heard"]) for r in rows}


def project_names(conn: Transaction) -> list[str]:
    return [str(r["name"]) for r in conn.execute("SELECT name FROM projects ORDER BY name")]
