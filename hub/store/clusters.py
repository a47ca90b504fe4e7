"""Clusters: identity, labels, agent token hashes, liveness and sync bookkeeping (table clusters).

The agent token is stored only as its SHA-256: the token is 32 random bytes, so a fast hash is
enough (there is nothing to brute-force), and a hash index finds the token's cluster at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hub import errors
from hub.filters import EVERYTHING, LabelSelector
from hub.model import AgentSession, Cluster, Maintenance
from hub.store import codec
from hub.store.labels import selected
from hub.store.port import IntegrityError, Row, Transaction, check_held, chunks, marks


def insert(
    conn: Transaction,
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
    except IntegrityError as e:
        raise errors.AlreadyExists("cluster", cluster_id) from e


def get(conn: Transaction, cluster_id: str) -> Cluster | None:
    row = conn.execute("SELECT * FROM clusters WHERE cluster_id = ?", (cluster_id,)).fetchone()
    if row is None:
        return None
    return _cluster(row, sessions(conn, [cluster_id]).get(cluster_id, ()))


def get_many(conn: Transaction, cluster_ids: Iterable[str]) -> dict[str, Cluster]:
    """The clusters of these ids (unknown ones left out), in two statements per 500 ids: a
    page of deployments over many clusters reads them at once, not one by one."""
    rows: list[Row] = []
    for chunk in chunks(cluster_ids):
        rows += conn.execute(
            f"SELECT * FROM clusters WHERE cluster_id IN ({marks(chunk)})", chunk
        ).fetchall()
    found = sessions(conn, [r["cluster_id"] for r in rows])
    return {r["cluster_id"]: _cluster(r, found.get(r["cluster_id"], ())) for r in rows}


@dataclass(frozen=True)
class SyncState:
    """What a deployment's view reads of its cluster: how far its agent applied, when it was
    last heard from, and whether it connected read-only."""

    applied_revision: int
    last_seen: float | None
    read_only: bool


def sync_states(conn: Transaction, cluster_ids: Iterable[str]) -> dict[str, SyncState]:
    """Those three columns of the clusters of these ids (unknown ones left out): a list page
    of deployments over 64 clusters reads them without the clusters' labels, maintenance and
    agent sessions, which get_many decodes."""
    result = {}
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            "SELECT cluster_id, applied_revision, last_seen, read_only FROM clusters"
            f" WHERE cluster_id IN ({marks(chunk)})",
            chunk,
        ):
            result[r["cluster_id"]] = SyncState(
                applied_revision=r["applied_revision"],
                last_seen=r["last_seen"],
                read_only=bool(r["read_only"]),
            )
    return result


def read_only_among(conn: Transaction, cluster_ids: Sequence[str] | None = None) -> set[str]:
    """The clusters (among these; None: all) whose agent last connected read-only."""
    if cluster_ids is None:
        rows = conn.execute("SELECT cluster_id FROM clusters WHERE read_only = 1").fetchall()
        return {r["cluster_id"] for r in rows}
    found: set[str] = set()
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            f"SELECT cluster_id FROM clusters WHERE read_only = 1 AND cluster_id IN"
            f" ({marks(chunk)})",
            chunk,
        ):
            found.add(r["cluster_id"])
    return found


def by_token_hash(conn: Transaction, token_hash: str) -> str | None:
    row = conn.execute(
        "SELECT cluster_id FROM clusters WHERE token_hash = ?", (token_hash,)
    ).fetchone()
    return str(row["cluster_id"]) if row else None


def token_hashes(conn: Transaction, cluster_ids: Iterable[str]) -> dict[str, str]:
    """The current token hash of each of these clusters (deleted ones are left out)."""
    result: dict[str, str] = {}
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            f"SELECT cluster_id, token_hash FROM clusters WHERE cluster_id IN ({marks(chunk)})",
            chunk,
        ):
            result[r["cluster_id"]] = r["token_hash"]
    return result


def set_token_hash(conn: Transaction, cluster_id: str, token_hash: str) -> None:
    found = conn.execute(
        "UPDATE clusters SET token_hash = ? WHERE cluster_id = ? RETURNING cluster_id",
        (token_hash, cluster_id),
    ).fetchone()
    if found is None:
        raise errors.NotFound("cluster", cluster_id)


def certificate_revoked(conn: Transaction, fingerprint: str) -> bool:
    row = conn.execute(
        "SELECT revoked_time FROM client_certificates WHERE fingerprint = ?", (fingerprint,)
    ).fetchone()
    return row is not None and row["revoked_time"] is not None


def bind_certificate(conn: Transaction, *, fingerprint: str, cluster_id: str, now: float) -> None:
    """Remember that this certificate opened a stream of this cluster (first time only)."""
    conn.execute(
        "INSERT INTO client_certificates (fingerprint, cluster_id, first_seen) VALUES (?, ?, ?)"
        " ON CONFLICT (fingerprint) DO NOTHING",
        (fingerprint, cluster_id, now),
    )


def revoke_certificates(conn: Transaction, cluster_id: str, *, now: float) -> int:
    """Revoke every certificate seen on this cluster's streams; returns how many."""
    revoked = conn.execute(
        "UPDATE client_certificates SET revoked_time = ?"
        " WHERE cluster_id = ? AND revoked_time IS NULL RETURNING fingerprint",
        (now, cluster_id),
    ).fetchall()
    return len(revoked)


def list_page(
    conn: Transaction, *, after: str, limit: int, selector: LabelSelector = EVERYTHING
) -> list[Cluster]:
    """A page by id; only those whose labels `selector` matches."""
    clauses, params = selected(conn, selector, "clusters.labels")
    rows = conn.execute(
        "SELECT * FROM clusters WHERE "
        + " AND ".join(["cluster_id > ?", *clauses])
        + " ORDER BY cluster_id LIMIT ?",
        [after, *params, limit],
    ).fetchall()
    found = sessions(conn, [r["cluster_id"] for r in rows])
    return [_cluster(r, found.get(r["cluster_id"], ())) for r in rows]


def set_labels(conn: Transaction, *, cluster_id: str, labels: Mapping[str, str]) -> None:
    conn.execute(
        "UPDATE clusters SET labels = ? WHERE cluster_id = ?",
        (codec.dumps(dict(labels)), cluster_id),
    )


def labels_by_cluster(
    conn: Transaction, cluster_ids: Iterable[str] | None = None
) -> dict[str, dict[str, str]]:
    """Labels of every cluster, or of just these (unknown ids are left out)."""
    if cluster_ids is None:
        rows = conn.execute("SELECT cluster_id, labels FROM clusters").fetchall()
        return {r["cluster_id"]: codec.loads(r["labels"]) for r in rows}
    result: dict[str, dict[str, str]] = {}
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            f"SELECT cluster_id, labels FROM clusters WHERE cluster_id IN ({marks(chunk)})", chunk
        ):
            result[r["cluster_id"]] = codec.loads(r["labels"])
    return result


def delete(conn: Transaction, cluster_id: str) -> None:
    # Observations of the cluster go with it; its nodes cascade to their devices. Allocations
    # hold no key to their node (migration 0024: ingest's cost), so they are deleted here.
    conn.execute("DELETE FROM replicas WHERE cluster_id = ?", (cluster_id,))
    conn.execute("DELETE FROM allocations WHERE cluster_id = ?", (cluster_id,))
    conn.execute("DELETE FROM clusters WHERE cluster_id = ?", (cluster_id,))


def bump_revisions(conn: Transaction, cluster_ids: Sequence[str]) -> dict[str, int]:
    """`bump_revision` for several clusters, a statement per 500: cluster id -> its new
    revision. NotFound when one of them does not exist. Only under their clusters' locks
    (locks.py's lock order): another writer of the cluster may be deciding from its state."""
    check_held(conn, cluster_ids)
    revisions: dict[str, int] = {}
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            "UPDATE clusters SET desired_revision = desired_revision + 1"
            f" WHERE cluster_id IN ({marks(chunk)}) RETURNING cluster_id, desired_revision",
            chunk,
        ):
            revisions[r["cluster_id"]] = int(r["desired_revision"])
    missing = sorted(set(cluster_ids) - set(revisions))
    if missing:
        raise errors.NotFound("cluster", missing[0])
    return revisions


def bump_revision(conn: Transaction, cluster_id: str) -> int:
    return bump_revisions(conn, [cluster_id])[cluster_id]


def open_session(
    conn: Transaction,
    session: AgentSession,
    *,
    cluster_id: str,
    read_only: bool,
    hub_id: str = "",
    slot: str = "",
) -> list[tuple[str, str]]:
    """Record an open stream held by `hub_id` in `slot`. Returns the (session id, hub id) of
    the streams of that slot on other hubs: this one supersedes them (their rows are gone)."""
    superseded = [
        (str(r["session_id"]), str(r["hub_id"]))
        for r in conn.execute(
            "SELECT session_id, hub_id FROM agent_sessions"
            " WHERE cluster_id = ? AND slot = ? AND hub_id != ? AND session_id != ?",
            (cluster_id, slot, hub_id, session.session_id),
        )
    ]
    for session_id, _ in superseded:
        conn.execute("DELETE FROM agent_sessions WHERE session_id = ?", (session_id,))
    conn.execute(
        "INSERT INTO agent_sessions (session_id, cluster_id, instance, node_name,"
        " leader, agent_version, connect_time, hub_id, slot) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (session_id) DO UPDATE SET cluster_id = excluded.cluster_id,"
        " instance = excluded.instance, node_name = excluded.node_name,"
        " leader = excluded.leader, agent_version = excluded.agent_version,"
        " connect_time = excluded.connect_time, hub_id = excluded.hub_id, slot = excluded.slot",
        (
            session.session_id,
            cluster_id,
            session.instance,
            session.node_name,
            int(session.leader),
            session.agent_version,
            session.connect_time,
            hub_id,
            slot,
        ),
    )
    conn.execute(
        "UPDATE clusters SET agent_version = ?, read_only = ?, last_seen = ? WHERE cluster_id = ?",
        (session.agent_version, int(read_only), session.connect_time, cluster_id),
    )
    return superseded


def set_dgd_version(conn: Transaction, *, cluster_id: str, dgd_version: str) -> None:
    conn.execute(
        "UPDATE clusters SET dgd_version = ? WHERE cluster_id = ?", (dgd_version, cluster_id)
    )


def close_session(conn: Transaction, session_id: str) -> None:
    conn.execute("DELETE FROM agent_sessions WHERE session_id = ?", (session_id,))


def set_leader(conn: Transaction, *, cluster_id: str, session_id: str | None) -> None:
    """Mark which session leads the cluster (None: none does)."""
    conn.execute(
        "UPDATE agent_sessions SET leader = CASE WHEN session_id = ? THEN 1 ELSE 0 END"
        " WHERE cluster_id = ?",
        (session_id or "", cluster_id),
    )


def next_leader_term(conn: Transaction, *, cluster_id: str) -> int:
    """One past the newest leader term, recorded and returned in one statement (a grant);
    0 when the cluster is gone."""
    check_held(conn, [cluster_id])
    row = conn.execute(
        "UPDATE clusters SET leader_term = leader_term + 1 WHERE cluster_id = ?"
        " RETURNING leader_term",
        (cluster_id,),
    ).fetchone()
    return int(row["leader_term"]) if row else 0


def raise_leader_term(conn: Transaction, *, cluster_id: str, term: int) -> int:
    """Record a newer leader term (terms never go back); returns the newest one."""
    row = conn.execute(
        f"UPDATE clusters SET leader_term = {conn.dialect.greatest('leader_term', '?')}"
        " WHERE cluster_id = ? RETURNING leader_term",
        (term, cluster_id),
    ).fetchone()
    return int(row["leader_term"]) if row else 0


def clear_sessions(conn: Transaction) -> None:
    """At the start of the only hub on a database: no stream is open yet (docs/stream.md)."""
    conn.execute("DELETE FROM agent_sessions")


def register_hub(conn: Transaction, *, hub_id: str, now: float) -> None:
    conn.execute(
        "INSERT INTO hubs (hub_id, started, heartbeat) VALUES (?, ?, ?)"
        " ON CONFLICT (hub_id) DO UPDATE SET heartbeat = excluded.heartbeat",
        (hub_id, now, now),
    )


def beat(conn: Transaction, *, hub_id: str, now: float) -> bool:
    """The hub's heartbeat; False when its row is gone (another hub declared it dead)."""
    row = conn.execute(
        "UPDATE hubs SET heartbeat = ? WHERE hub_id = ? RETURNING hub_id", (now, hub_id)
    ).fetchone()
    return row is not None


def remove_hub(conn: Transaction, hub_id: str) -> None:
    """A hub stopping cleanly: its streams are closed, its row goes."""
    conn.execute("DELETE FROM agent_sessions WHERE hub_id = ?", (hub_id,))
    conn.execute("DELETE FROM hubs WHERE hub_id = ?", (hub_id,))


def sweep_dead_hubs(conn: Transaction, *, beat_before: float) -> list[str]:
    """Forget hubs silent since `beat_before`, and the streams they held (their agents have
    reconnected elsewhere, or will: a stream on a dead hub is not open). Also drops stream rows
    of no live hub (a hub that died before registering, or a database of an older version)."""
    dead = [
        str(r["hub_id"])
        for r in conn.execute("SELECT hub_id FROM hubs WHERE heartbeat < ?", (beat_before,))
    ]
    for hub_id in dead:
        conn.execute("DELETE FROM hubs WHERE hub_id = ?", (hub_id,))
    conn.execute("DELETE FROM agent_sessions WHERE hub_id NOT IN (SELECT hub_id FROM hubs)")
    return dead


def live_hubs(conn: Transaction) -> list[str]:
    return [str(r["hub_id"]) for r in conn.execute("SELECT hub_id FROM hubs ORDER BY hub_id")]


def sessions(conn: Transaction, cluster_ids: Iterable[str]) -> dict[str, tuple[AgentSession, ...]]:
    result: dict[str, list[AgentSession]] = {}
    for chunk in chunks(cluster_ids):
        rows = conn.execute(
            f"SELECT * FROM agent_sessions WHERE cluster_id IN ({marks(chunk)}) ORDER BY instance",
            chunk,
        )
        for r in rows:
            result.setdefault(r["cluster_id"], []).append(
                AgentSession(
                    session_id=r["session_id"],
                    instance=r["instance"],
                    node_name=r["node_name"],
                    leader=bool(r["leader"]),
                    agent_version=r["agent_version"],
                    connect_time=r["connect_time"],
                )
            )
    return {cluster_id: tuple(found) for cluster_id, found in result.items()}


def record_liveness(
    conn: Transaction,
    *,
    last_seen: Mapping[str, float],
    applied: Mapping[str, int],
) -> None:
    """Batched: last message times and acknowledged revisions (both only move forward)."""
    greatest = conn.dialect.greatest
    conn.executemany(
        f"UPDATE clusters SET last_seen = {greatest('COALESCE(last_seen, 0)', '?')}"
        " WHERE cluster_id = ?",
        [(seen, cluster_id) for cluster_id, seen in last_seen.items()],
    )
    conn.executemany(
        f"UPDATE clusters SET applied_revision = {greatest('applied_revision', '?')}"
        " WHERE cluster_id = ?",
        [(revision, cluster_id) for cluster_id, revision in applied.items()],
    )


def sync_positions(conn: Transaction, cluster_id: str) -> tuple[int, int]:
    """(desired_revision, tombstone_floor) of a cluster."""
    row = conn.execute(
        "SELECT desired_revision, tombstone_floor FROM clusters WHERE cluster_id = ?",
        (cluster_id,),
    ).fetchone()
    if row is None:
        raise errors.NotFound("cluster", cluster_id)
    return int(row["desired_revision"]), int(row["tombstone_floor"])


def sync_positions_of(conn: Transaction, cluster_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """cluster id -> (desired_revision, tombstone_floor), for those that exist."""
    result: dict[str, tuple[int, int]] = {}
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            "SELECT cluster_id, desired_revision, tombstone_floor FROM clusters"
            f" WHERE cluster_id IN ({marks(chunk)})",
            chunk,
        ):
            result[r["cluster_id"]] = (int(r["desired_revision"]), int(r["tombstone_floor"]))
    return result


def prune_tombstones(conn: Transaction, *, older_than: float) -> int:
    """Drop old tombstones; raise each cluster's floor so agents behind it get a snapshot."""
    rows = conn.execute(
        "SELECT cluster_id, MAX(revision) AS floor FROM tombstones WHERE delete_time < ?"
        " GROUP BY cluster_id",
        (older_than,),
    ).fetchall()
    for r in rows:
        conn.execute(
            f"UPDATE clusters SET tombstone_floor = {conn.dialect.greatest('tombstone_floor', '?')}"
            " WHERE cluster_id = ?",
            (r["floor"], r["cluster_id"]),
        )
        conn.execute(
            "DELETE FROM tombstones WHERE cluster_id = ? AND revision <= ?",
            (r["cluster_id"], r["floor"]),
        )
    return len(rows)


def ids(conn: Transaction) -> Iterable[str]:
    return [r["cluster_id"] for r in conn.execute("SELECT cluster_id FROM clusters")]


def _cluster(row: Row, agents: tuple[AgentSession, ...]) -> Cluster:
    return Cluster(
        cluster_id=row["cluster_id"],
        labels=codec.loads(row["labels"]),
        create_time=row["create_time"],
        desired_revision=row["desired_revision"],
        applied_revision=row["applied_revision"],
        last_seen=row["last_seen"],
        agent_version=row["agent_version"],
        read_only=bool(row["read_only"]),
        agents=agents,
        leader_term=row["leader_term"],
        dgd_version=row["dgd_version"],
        maintenance=_maintenance(row["maintenance"]),
    )


def set_maintenance(conn: Transaction, cluster_id: str, maintenance: Maintenance) -> None:
    found = conn.execute(
        "UPDATE clusters SET maintenance = ? WHERE cluster_id = ? RETURNING cluster_id",
        (
            codec.dumps(
                {
                    "cordoned": maintenance.cordoned,
                    "device_classes": sorted(maintenance.device_classes),
                    "nodes": sorted(maintenance.nodes),
                    "draining": maintenance.draining,
                }
            ),
            cluster_id,
        ),
    ).fetchone()
    if found is None:
        raise errors.NotFound("cluster", cluster_id)


def maintenance_of(conn: Transaction, cluster_ids: Iterable[str]) -> dict[str, Maintenance]:
    """The maintenance marks of those of these clusters that have any."""
    result: dict[str, Maintenance] = {}
    for chunk in chunks(cluster_ids):
        for r in conn.execute(
            "SELECT cluster_id, maintenance FROM clusters WHERE maintenance != '{}'"
            f" AND cluster_id IN ({marks(chunk)})",
            chunk,
        ):
            found = _maintenance(r["maintenance"])
            if found.any:
                result[r["cluster_id"]] = found
    return result


def with_maintenance(conn: Transaction) -> dict[str, Maintenance]:
    """Every cluster with a maintenance mark (cordoned in whole or part, or draining)."""
    rows = conn.execute(
        "SELECT cluster_id, maintenance FROM clusters WHERE maintenance != '{}'"
    ).fetchall()
    found = {r["cluster_id"]: _maintenance(r["maintenance"]) for r in rows}
    return {c: m for c, m in found.items() if m.any}


def draining(conn: Transaction) -> list[str]:
    """Clusters being drained."""
    rows = conn.execute(
        "SELECT cluster_id, maintenance FROM clusters WHERE maintenance != '{}'"
    ).fetchall()
    return sorted(r["cluster_id"] for r in rows if _maintenance(r["maintenance"]).draining)


def _maintenance(text: str) -> Maintenance:
    if text in ("", "{}"):
        return Maintenance()
    document = codec.loads(text)
    return Maintenance(
        cordoned=bool(document.get("cordoned")),
        device_classes=tuple(document.get("device_classes", ())),
        nodes=tuple(document.get("nodes", ())),
        draining=bool(document.get("draining")),
    )


def count_behind(conn: Transaction) -> int:
    """Clusters whose agent has not acknowledged the latest desired revision."""
    row = conn.execute(
        "SELECT COUNT(*) FROM clusters WHERE applied_revision < desired_revision"
    ).fetchone()
    return int(row[0])
