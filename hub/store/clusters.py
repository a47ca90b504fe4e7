"""Clusters: identity, labels, agent token hashes, liveness and sync bookkeeping (table clusters).

The agent token is stored only as its SHA-256: the token is 32 random bytes, so a fast hash is
enough (there is nothing to brute-force), and a hash index finds the token's cluster at once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from hub import errors
from hub.model import Cluster
from hub.store import codec


def insert(
    conn: sqlite3.Connection,
    *,
    cluster_id: str,
    labels: Mapping[str, str],
    token_hash: str,
    now: float,
) -> None:
    try:
        conn.execute(
            "INSERT INTO clusters (cluster_id, labels, token_hash, create_time)"
            " VALUES (?, ?, ?, ?)",
            (cluster_id, codec.dumps(dict(labels)), token_hash, now),
        )
    except sqlite3.IntegrityError as e:
        raise errors.AlreadyExists("cluster", cluster_id) from e


def get(conn: sqlite3.Connection, cluster_id: str) -> Cluster | None:
    row = conn.execute("SELECT * FROM clusters WHERE cluster_id = ?", (cluster_id,)).fetchone()
    return _cluster(row) if row else None


def by_token_hash(conn: sqlite3.Connection, token_hash: str) -> str | None:
    row = conn.execute(
        "SELECT cluster_id FROM clusters WHERE token_hash = ?", (token_hash,)
    ).fetchone()
    return str(row["cluster_id"]) if row else None


def list_page(conn: sqlite3.Connection, *, after: str, limit: int) -> list[Cluster]:
    rows = conn.execute(
        "SELECT * FROM clusters WHERE cluster_id > ? ORDER BY cluster_id LIMIT ?", (after, limit)
    ).fetchall()
    return [_cluster(r) for r in rows]


def labels_by_cluster(conn: sqlite3.Connection) -> dict[str, dict[str, str]]:
    rows = conn.execute("SELECT cluster_id, labels FROM clusters").fetchall()
    return {r["cluster_id"]: codec.loads(r["labels"]) for r in rows}


def delete(conn: sqlite3.Connection, cluster_id: str) -> None:
    # Observations of the cluster go with it; nodes cascade to devices and allocations.
    conn.execute("DELETE FROM replicas WHERE cluster_id = ?", (cluster_id,))
    conn.execute("DELETE FROM clusters WHERE cluster_id = ?", (cluster_id,))


def bump_revision(conn: sqlite3.Connection, cluster_id: str) -> int:
    row = conn.execute(
        "UPDATE clusters SET desired_revision = desired_revision + 1 WHERE cluster_id = ?"
        " RETURNING desired_revision",
        (cluster_id,),
    ).fetchone()
    if row is None:
        raise errors.NotFound("cluster", cluster_id)
    return int(row["desired_revision"])


def record_hello(
    conn: sqlite3.Connection,
    *,
    cluster_id: str,
    session_id: str,
    agent_version: str,
    read_only: bool,
    now: float,
) -> None:
    conn.execute(
        "UPDATE clusters SET connected_session = ?, agent_version = ?, read_only = ?,"
        " last_seen = ? WHERE cluster_id = ?",
        (session_id, agent_version, int(read_only), now, cluster_id),
    )


def record_disconnect(conn: sqlite3.Connection, *, cluster_id: str, session_id: str) -> None:
    """Clear the session, unless a newer session of the cluster took over meanwhile."""
    conn.execute(
        "UPDATE clusters SET connected_session = NULL"
        " WHERE cluster_id = ? AND connected_session = ?",
        (cluster_id, session_id),
    )


def clear_sessions(conn: sqlite3.Connection) -> None:
    """At hub start: no stream is open yet (one hub per database; docs/stream.md)."""
    conn.execute("UPDATE clusters SET connected_session = NULL")


def record_liveness(
    conn: sqlite3.Connection,
    *,
    last_seen: Mapping[str, float],
    applied: Mapping[str, int],
) -> None:
    """Batched: last message times and acknowledged revisions (both only move forward)."""
    conn.executemany(
        "UPDATE clusters SET last_seen = MAX(COALESCE(last_seen, 0), ?) WHERE cluster_id = ?",
        [(seen, cluster_id) for cluster_id, seen in last_seen.items()],
    )
    conn.executemany(
        "UPDATE clusters SET applied_revision = MAX(applied_revision, ?) WHERE cluster_id = ?",
        [(revision, cluster_id) for cluster_id, revision in applied.items()],
    )


def sync_positions(conn: sqlite3.Connection, cluster_id: str) -> tuple[int, int]:
    """(desired_revision, tombstone_floor) of a cluster."""
    row = conn.execute(
        "SELECT desired_revision, tombstone_floor FROM clusters WHERE cluster_id = ?",
        (cluster_id,),
    ).fetchone()
    if row is None:
        raise errors.NotFound("cluster", cluster_id)
    return int(row["desired_revision"]), int(row["tombstone_floor"])


def prune_tombstones(conn: sqlite3.Connection, *, older_than: float) -> int:
    """Drop old tombstones; raise each cluster's floor so agents behind it get a snapshot."""
    rows = conn.execute(
        "SELECT cluster_id, MAX(revision) AS floor FROM tombstones WHERE delete_time < ?"
        " GROUP BY cluster_id",
        (older_than,),
    ).fetchall()
    for r in rows:
        conn.execute(
            "UPDATE clusters SET tombstone_floor = MAX(tombstone_floor, ?) WHERE cluster_id = ?",
            (r["floor"], r["cluster_id"]),
        )
        conn.execute(
            "DELETE FROM tombstones WHERE cluster_id = ? AND revision <= ?",
            (r["cluster_id"], r["floor"]),
        )
    return len(rows)


def ids(conn: sqlite3.Connection) -> Iterable[str]:
    return [r["cluster_id"] for r in conn.execute("SELECT cluster_id FROM clusters")]


def _cluster(row: sqlite3.Row) -> Cluster:
    return Cluster(
        cluster_id=row["cluster_id"],
        labels=codec.loads(row["labels"]),
        create_time=row["create_time"],
        desired_revision=row["desired_revision"],
        applied_revision=row["applied_revision"],
        last_seen=row["last_seen"],
        connected=row["connected_session"] is not None,
        agent_version=row["agent_version"],
        read_only=bool(row["read_only"]),
    )
