"""Discovered workloads (table discovered): what agents found running that the hub never
declared, and what the user decided about each (new, tracked, ignored, promoted).

A sighting replaces the stored observation if it is newer; an absent sighting marks the entry
gone (kept, never erased), whatever its state, a promoted one included (the agent keeps
adopted DGDs in its discovered set while Wingsmith manages them, so absent means deleted); a
gone entry seen again is no longer gone and keeps its decision. A complete set (the agent's
first report after connecting or gaining leadership) marks gone every entry of its cluster
that it lacks and that was not seen after it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

from hub.filters import EVERYTHING, LabelSelector
from hub.model import Discovered, DiscoveredObservation, DiscoveredService, ReplicaObservation
from hub.store import codec
from hub.store.labels import OF_DEPLOYMENT, selected
from hub.store.port import Row, Transaction


def discovered_id(cluster_id: str, namespace: str, name: str) -> str:
    return "dsc_" + hashlib.sha256(f"{cluster_id}/{namespace}/{name}".encode()).hexdigest()[:16]


def write(
    conn: Transaction, *, cluster_id: str, observation: DiscoveredObservation, now: float
) -> bool:
    """Apply one sighting; False when an equal or newer one is stored."""
    row = conn.execute(
        "SELECT observe_ns FROM discovered WHERE cluster_id = ? AND namespace = ? AND name = ?",
        (cluster_id, observation.namespace, observation.name),
    ).fetchone()
    if row is not None and row["observe_ns"] >= observation.observe_ns:
        return False
    if row is None and observation.absent:
        return False  # never seen, now gone: nothing to remember
    if observation.absent:
        conn.execute(
            "UPDATE discovered SET gone = 1, gone_time = ?, observe_ns = ?"
            " WHERE cluster_id = ? AND namespace = ? AND name = ? AND gone = 0",
            (now, observation.observe_ns, cluster_id, observation.namespace, observation.name),
        )
        return True
    conn.execute(
        "INSERT INTO discovered (discovered_id, cluster_id, namespace, name, state, gone,"
        " observation, observe_ns, first_seen, last_seen) VALUES (?, ?, ?, ?, 'new', 0, ?, ?, ?, ?)"
        " ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET gone = 0, gone_time = NULL,"
        " observation = excluded.observation, observe_ns = excluded.observe_ns,"
        " last_seen = excluded.last_seen",
        (
            discovered_id(cluster_id, observation.namespace, observation.name),
            cluster_id,
            observation.namespace,
            observation.name,
            codec.dumps(_document(observation)),
            observation.observe_ns,
            now,
            now,
        ),
    )
    return True


def mark_missing_gone(
    conn: Transaction,
    *,
    cluster_id: str,
    present: Sequence[tuple[str, str]],
    observe_ns: int,
    now: float,
) -> int:
    """The cluster's complete set as observed at `observe_ns` is `present` (namespace, name):
    mark gone every other entry of it not seen since. Returns how many were marked."""
    keep = set(present)
    rows = conn.execute(
        "SELECT namespace, name FROM discovered"
        " WHERE cluster_id = ? AND gone = 0 AND observe_ns < ?",
        (cluster_id, observe_ns),
    ).fetchall()
    missing = [(r["namespace"], r["name"]) for r in rows if (r["namespace"], r["name"]) not in keep]
    conn.executemany(
        "UPDATE discovered SET gone = 1, gone_time = ?, observe_ns = ?"
        " WHERE cluster_id = ? AND namespace = ? AND name = ?",
        [(now, observe_ns, cluster_id, namespace, name) for namespace, name in missing],
    )
    return len(missing)


def get(conn: Transaction, ref: str) -> Discovered | None:
    """By id ("dsc_...") or by name ("<cluster>.<namespace>.<name>")."""
    row = conn.execute(f"{_SELECT} WHERE d.discovered_id = ?", (ref,)).fetchone()
    if row is None and ref.count(".") >= 2:
        cluster_id, namespace, name = ref.split(".", 2)
        row = conn.execute(
            f"{_SELECT} WHERE d.cluster_id = ? AND d.namespace = ? AND d.name = ?",
            (cluster_id, namespace, name),
        ).fetchone()
    return _discovered(row) if row else None


def list_page(
    conn: Transaction,
    *,
    cluster_id: str,
    include_ignored: bool,
    after: str,
    limit: int,
    selector: LabelSelector = EVERYTHING,
) -> list[Discovered]:
    """A page by id; `selector` tests the labels of the workload it was promoted to (none
    before: an entry's DGD labels are not reported)."""
    clauses, params = ["d.discovered_id > ?"], [after]
    if cluster_id:
        clauses.append("d.cluster_id = ?")
        params.append(cluster_id)
    if not include_ignored:
        clauses.append("d.state != 'ignored'")
    chosen, values = selected(conn, selector, OF_DEPLOYMENT.format(d="d"))
    clauses += chosen
    params += values
    rows = conn.execute(
        f"{_SELECT} WHERE {' AND '.join(clauses)} ORDER BY d.discovered_id LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [_discovered(r) for r in rows]


def set_state(conn: Transaction, *, discovered_id: str, state: str, workload_id: str = "") -> None:
    conn.execute(
        "UPDATE discovered SET state = ?, workload_id = ? WHERE discovered_id = ?",
        (state, workload_id, discovered_id),
    )


def release_workload(conn: Transaction, workload_id: str) -> None:
    """The promoted workload was deleted: its entry goes back to tracked (it still runs)."""
    conn.execute(
        "UPDATE discovered SET state = 'tracked', workload_id = '' WHERE workload_id = ?",
        (workload_id,),
    )


def _document(observation: DiscoveredObservation) -> dict[str, Any]:
    document = dataclasses.asdict(observation)
    document.pop("observe_ns")
    document.pop("absent")
    return document


def _observation(document: dict[str, Any], observe_ns: int) -> DiscoveredObservation:
    services = tuple(
        DiscoveredService(**{**s, "args": tuple(s.get("args", ()))})
        for s in document.pop("services", ())
    )
    pods = tuple(ReplicaObservation(**p) for p in document.pop("pods", ()))
    return DiscoveredObservation(
        observe_ns=observe_ns,
        services=services,
        pods=pods,
        imported_args=tuple(document.pop("imported_args", ())),
        **document,
    )


# Every read joins the cluster's liveness: see _discovered's last_seen.
_SELECT = (
    "SELECT d.*, c.last_seen AS cluster_last_seen FROM discovered d"
    " LEFT JOIN clusters c ON c.cluster_id = d.cluster_id"
)


def _discovered(row: Row) -> Discovered:
    return Discovered(
        discovered_id=row["discovered_id"],
        cluster_id=row["cluster_id"],
        namespace=row["namespace"],
        name=row["name"],
        state=row["state"],
        gone=bool(row["gone"]),
        observation=_observation(codec.loads(row["observation"]), row["observe_ns"]),
        first_seen=row["first_seen"],
        # Sightings are sent when the DGD changes, not while it runs unchanged: an entry not
        # gone is still there as of the cluster's last report (level-triggered, docs/stream.md;
        # a vanished DGD is reported absent). A gone one was last seen when it was.
        last_seen=(
            row["last_seen"]
            if row["gone"]
            else max(row["last_seen"], row["cluster_last_seen"] or 0.0)
        ),
        gone_time=row["gone_time"],
        workload_id=row["workload_id"],
    )
