"""Dashboard sessions (table dashboard_sessions): a session lives while its row does."""

from __future__ import annotations

from hub.store.port import Transaction


def insert(
    conn: Transaction, *, session_id: str, actor: str, now: float, expire_time: float
) -> None:
    conn.execute(
        "INSERT INTO dashboard_sessions (session_id, actor, create_time, expire_time)"
        " VALUES (?, ?, ?, ?)",
        (session_id, actor, now, expire_time),
    )


def actor_of(conn: Transaction, session_id: str, *, now: float) -> str | None:
    """The actor of a live session, or None once it ended or expired."""
    row = conn.execute(
        "SELECT actor FROM dashboard_sessions WHERE session_id = ? AND expire_time > ?",
        (session_id, now),
    ).fetchone()
    return str(row["actor"]) if row else None


def delete(conn: Transaction, session_id: str) -> None:
    conn.execute("DELETE FROM dashboard_sessions WHERE session_id = ?", (session_id,))


def delete_of_actor(conn: Transaction, actor: str) -> None:
    conn.execute("DELETE FROM dashboard_sessions WHERE actor = ?", (actor,))


def delete_expired(conn: Transaction, *, now: float) -> None:
    conn.execute("DELETE FROM dashboard_sessions WHERE expire_time <= ?", (now,))
