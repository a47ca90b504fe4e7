"""Deployments, the plane-written half (table deployments), and their tombstones.

Every change to what the agent sees of a deployment (its spec: replicas admitted, enabled,
authority, serving, generation) goes through `save`, which takes a fresh cluster revision, so
the sync layer can send exactly what changed since an agent's revision. Deletions leave a
tombstone carrying the revision of the deletion, and whether it is a *release* (the deployment
was observed: its DGD stays, the agent only lets go of it) or a removal (managed: its DGD is
deleted).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import typing
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hub import serving
from hub.filters import DeploymentFilter
from hub.model import Deployment, Serving
from hub.store import clusters, codec, port
from hub.store.labels import selected
from hub.store.port import Row, Transaction

# The fields a statement reads (keys, filters, the waiting clause, the accounting sums, the
# admission order, a rollout's four-column read, preemption's managed-only filter) are columns
# of their own; so are `serving` (one text shared by a workload's deployments, parsed once per
# distinct text) and the two times (distinct in every record: as columns they leave `body` the
# same text across a workload's deployments, so it too is parsed once per distinct text).
# Every other field rides in `body`, one JSON document derived from the model (codec.Fields):
# adding a Deployment field with a default touches neither this file nor the schema.
_COLUMNS = (
    "deployment_id",
    "workload_id",
    "cluster_id",
    "project",
    "desired_replicas",
    "admitted_replicas",
    "admission_reason",
    "admission_message",
    "pending_since",
    "generation",
    "authority",
    "enabled",
    "device_class",
    "devices_per_replica",
    "revision",
    "surge_replicas",
    "rolling",
    "serving_digest",
    "serving",
    "create_time",
    "update_time",
)
# Read with the deployment from its workload's row, never stored with it.
_JOINED = ("workload_name", "topology", "priority")
# Never changed once inserted (an upsert leaves them).
_IDENTITY = ("deployment_id", "workload_id", "cluster_id", "project")
_BODY = codec.Fields(
    Deployment,
    [f.name for f in dataclasses.fields(Deployment) if f.name not in (*_COLUMNS, *_JOINED)],
)
_BOOLEAN_COLUMNS = frozenset(
    name for name, kind in typing.get_type_hints(Deployment).items() if kind is bool
) & frozenset(_COLUMNS)
_read_columns = operator.itemgetter(*_COLUMNS)
_STORED = (*_COLUMNS, "body")
_UPSERT = (
    f"INSERT INTO deployments ({', '.join(_STORED)}) VALUES ({', '.join('?' * len(_STORED))})"
    " ON CONFLICT (deployment_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _STORED if c not in _IDENTITY)
)


def save(conn: Transaction, deployment: Deployment) -> int:
    """Insert or update; bumps the cluster's revision and returns it (the stored revision)."""
    revision = clusters.bump_revision(conn, deployment.cluster_id)
    conn.execute(_UPSERT, _row(deployment, revision=revision))
    return revision


def save_many(conn: Transaction, changed: Sequence[Deployment]) -> None:
    """`save` for several deployments in two round trips, not two each (an admission pass
    over a fleet; on PostgreSQL each statement is a round trip): one revision bump per
    cluster, which all of that cluster's deployments here take (one atomic change to its
    desired state, read by the agent as one delta), then one batched upsert."""
    if not changed:
        return
    revisions = clusters.bump_revisions(conn, [d.cluster_id for d in changed])
    conn.executemany(_UPSERT, [_row(d, revision=revisions[d.cluster_id]) for d in changed])


def set_admission_notes(conn: Transaction, notes: Sequence[tuple[str, str, str]]) -> None:
    """Record why deployments still wait, (deployment id, reason, message) each, in one batch;
    not part of their spec, so no revision."""
    conn.executemany(
        "UPDATE deployments SET admission_reason = ?, admission_message = ?"
        " WHERE deployment_id = ?",
        [(reason, message, deployment_id) for deployment_id, reason, message in notes],
    )


def set_rolling(conn: Transaction, *, deployment_id: str, rolling: bool) -> None:
    """Mark a rollout started or ended; not part of the agent's spec, so no revision (the
    surge it frees is, and admission changes it with a revision)."""
    conn.execute(
        "UPDATE deployments SET rolling = ? WHERE deployment_id = ?", (int(rolling), deployment_id)
    )


def get(conn: Transaction, ref: str) -> Deployment | None:
    """By id ("dep_...") or by name ("<workload>.<cluster>")."""
    row = conn.execute(_select("d.deployment_id = ?"), (ref,)).fetchone()
    if row is None and "." in ref:
        workload_name, cluster_id = ref.rsplit(".", 1)
        row = conn.execute(
            _select("w.name = ? AND d.cluster_id = ?"), (workload_name, cluster_id)
        ).fetchone()
    return _deployment(row) if row else None


def list_page(
    conn: Transaction, *, where: DeploymentFilter, after: str, limit: int
) -> list[Deployment]:
    where_ = (
        port.Where("d.deployment_id > ?", after)
        .equal(
            ("d.workload_id", where.workload_id),
            ("d.cluster_id", where.cluster_id),
            ("d.project", where.project),
        )
        .among("d.project", where.projects)
        .extend(selected(conn, where.labels, "w.labels"))
    )
    rows = conn.execute(
        _select(where_.condition()) + " ORDER BY d.deployment_id LIMIT ?",
        [*where_.params, limit],
    ).fetchall()
    return [_deployment(r) for r in rows]


def of_workload(conn: Transaction, workload_id: str) -> list[Deployment]:
    rows = conn.execute(
        _select("d.workload_id = ?") + " ORDER BY d.cluster_id", (workload_id,)
    ).fetchall()
    return [_deployment(r) for r in rows]


@dataclass(frozen=True)
class RolloutRow:
    """What a rollout's wave decision reads of a deployment (hub/rollout.py)."""

    cluster_id: str
    serving_digest: str
    rolling: bool
    admitted_replicas: int


def rollout_rows(conn: Transaction, workload_id: str) -> list[RolloutRow]:
    """The workload's deployments, four columns each: the periodic wave pass reads this for
    every rollout every second, and whole deployments cost over ten times as much to read
    (1,000 deployments: 30 ms against 2 ms)."""
    rows = conn.execute(
        "SELECT cluster_id, serving_digest, rolling, admitted_replicas FROM deployments"
        " WHERE workload_id = ? ORDER BY cluster_id",
        (workload_id,),
    ).fetchall()
    return [
        RolloutRow(r["cluster_id"], r["serving_digest"], bool(r["rolling"]), r["admitted_replicas"])
        for r in rows
    ]


def of_workload_on(
    conn: Transaction, workload_id: str, cluster_ids: Iterable[str]
) -> list[Deployment]:
    """The workload's deployments on these clusters."""
    result: list[Deployment] = []
    for chunk in port.chunks(cluster_ids):
        rows = conn.execute(
            _select(f"d.workload_id = ? AND d.cluster_id IN ({port.marks(chunk)})")
            + " ORDER BY d.cluster_id",
            [workload_id, *chunk],
        ).fetchall()
        result.extend(_deployment(r) for r in rows)
    return result


def of_workloads(conn: Transaction, workload_ids: Sequence[str]) -> list[Deployment]:
    """The deployments of these workloads, by cluster."""
    result: list[Deployment] = []
    for chunk in port.chunks(workload_ids):
        rows = conn.execute(_select(f"d.workload_id IN ({port.marks(chunk)})"), chunk)
        result.extend(_deployment(r) for r in rows)
    return sorted(result, key=lambda d: d.cluster_id)


def on_clusters(conn: Transaction, cluster_ids: Sequence[str]) -> list[Deployment]:
    """Every deployment on these clusters, by cluster then id."""
    result: list[Deployment] = []
    for chunk in port.chunks(cluster_ids):  # sorted chunks: the order holds across them
        rows = conn.execute(
            _select(f"d.cluster_id IN ({port.marks(chunk)})")
            + " ORDER BY d.cluster_id, d.deployment_id",
            chunk,
        )
        result.extend(_deployment(r) for r in rows)
    return result


def changed_since(conn: Transaction, cluster_id: str, revision: int) -> list[Deployment]:
    rows = conn.execute(
        _select("d.cluster_id = ? AND d.revision > ?") + " ORDER BY d.revision",
        (cluster_id, revision),
    ).fetchall()
    return [_deployment(r) for r in rows]


def removed_since(conn: Transaction, cluster_id: str, revision: int) -> list[str]:
    """Deployments deleted while managed after `revision`: their DGDs are to be deleted."""
    return _tombstones_since(conn, cluster_id, revision, release=False)


def released_since(conn: Transaction, cluster_id: str, revision: int) -> list[str]:
    """Deployments deleted while observed after `revision`: their DGDs stay (0: every one
    still kept, for a snapshot)."""
    return _tombstones_since(conn, cluster_id, revision, release=True)


def _tombstones_since(
    conn: Transaction, cluster_id: str, revision: int, *, release: bool
) -> list[str]:
    rows = conn.execute(
        "SELECT deployment_id FROM tombstones WHERE cluster_id = ? AND revision > ?"
        " AND release = ? ORDER BY revision",
        (cluster_id, revision, int(release)),
    ).fetchall()
    return [r["deployment_id"] for r in rows]


# (cluster id, revision) pairs: what several agents hold, asked about in one statement.
Since = tuple[str, int]
_SINCE_CHUNK = 400


def _rows_since(conn: Transaction, pairs: Sequence[Since], select: str) -> Iterator[Row]:
    """Rows of `select` (which reads the pairs as table `since (cluster_id, revision)`), a
    few hundred pairs per statement."""
    for start in range(0, len(pairs), _SINCE_CHUNK):
        chunk = pairs[start : start + _SINCE_CHUNK]
        marks = ",".join("(?, ?)" for _ in chunk)
        yield from conn.execute(
            f"WITH since (cluster_id, revision) AS (VALUES {marks}) {select}",
            [value for pair in chunk for value in pair],
        )


def changed_since_each(conn: Transaction, wants: Sequence[Since]) -> dict[Since, list[Deployment]]:
    """`changed_since` for many (cluster, revision) pairs at once: the fan-out of one change
    to thousands of agents reads their deltas a few hundred per statement."""
    result: dict[Since, list[Deployment]] = {want: [] for want in wants}
    for r in _rows_since(
        conn,
        list(result),
        "SELECT s.revision AS since_revision, d.*, w.name AS workload_name,"
        " w.placement AS workload_placement, w.priority AS workload_priority FROM since s"
        " JOIN deployments d ON d.cluster_id = s.cluster_id AND d.revision > s.revision"
        " JOIN workloads w ON w.workload_id = d.workload_id ORDER BY d.revision",
    ):
        result[(r["cluster_id"], r["since_revision"])].append(_deployment(r))
    return result


def tombstones_since_each(
    conn: Transaction, wants: Sequence[Since]
) -> dict[Since, tuple[list[str], list[str]]]:
    """`removed_since` and `released_since` for many (cluster, revision) pairs at once:
    (removals, releases) per pair."""
    result: dict[Since, tuple[list[str], list[str]]] = {want: ([], []) for want in wants}
    for r in _rows_since(
        conn,
        list(result),
        "SELECT s.cluster_id, s.revision AS since_revision, t.deployment_id, t.release"
        " FROM since s JOIN tombstones t"
        " ON t.cluster_id = s.cluster_id AND t.revision > s.revision ORDER BY t.revision",
    ):
        removals, releases = result[(r["cluster_id"], r["since_revision"])]
        (releases if r["release"] else removals).append(r["deployment_id"])
    return result


def waiting(conn: Transaction, *, cluster_ids: Sequence[str] | None = None) -> list[Deployment]:
    """Deployments whose admitted replicas differ from what they should hold, or that still
    carry a reason to wait after their demand was met or withdrawn (a cancelled scale-up),
    oldest first."""
    clause = (
        "((d.enabled = 1 AND d.admitted_replicas != d.desired_replicas)"
        " OR (d.enabled = 1 AND d.admission_reason != '')"
        " OR (d.enabled = 0 AND (d.admitted_replicas > 0 OR d.admission_reason != 'disabled'))"
        # A rollout that could use more surge, or holds surge it no longer may.
        " OR (d.rolling = 1 AND d.surge_replicas < d.admitted_replicas)"
        " OR (d.surge_replicas > 0 AND (d.rolling = 0 OR d.surge_replicas > d.admitted_replicas)))"
    )
    if cluster_ids is None:
        everywhere = conn.execute(_select(clause) + " ORDER BY d.pending_since")
        return [_deployment(r) for r in everywhere]
    result: list[Deployment] = []
    for chunk in port.chunks(cluster_ids):
        rows = conn.execute(_select(f"{clause} AND d.cluster_id IN ({port.marks(chunk)})"), chunk)
        result.extend(_deployment(r) for r in rows)
    return sorted(result, key=lambda d: d.pending_since)


def admitted_managed(conn: Transaction, cluster_ids: Sequence[str]) -> list[Deployment]:
    """Enabled managed deployments on these clusters with admitted replicas: what a
    higher-priority demand there could preempt (docs/admission.md)."""
    result: list[Deployment] = []
    for chunk in port.chunks(cluster_ids):
        rows = conn.execute(
            _select(
                "d.enabled = 1 AND d.admitted_replicas > 0 AND d.authority = 'managed'"
                f" AND d.cluster_id IN ({port.marks(chunk)})"
            ),
            chunk,
        ).fetchall()
        result.extend(_deployment(r) for r in rows)
    return result


def observed_on(conn: Transaction, cluster_ids: Sequence[str] | None) -> list[Deployment]:
    """Observed deployments on these clusters (None: everywhere): admitted only as far as
    their replicas exist, so decided again whenever their cluster reports (docs/admission.md
    "Replicas no agent creates")."""
    if cluster_ids is None:
        rows = conn.execute(_select("d.authority = 'observed'")).fetchall()
        return [_deployment(r) for r in rows]
    result: list[Deployment] = []
    for start in range(0, len(cluster_ids), 500):
        chunk = list(cluster_ids[start : start + 500])
        rows = conn.execute(
            _select(f"d.authority = 'observed' AND d.cluster_id IN ({','.join('?' * len(chunk))})"),
            chunk,
        ).fetchall()
        result.extend(_deployment(r) for r in rows)
    return result


def clusters_of_project(conn: Transaction, project: str) -> list[str]:
    """The clusters where the project has deployments."""
    rows = conn.execute(
        "SELECT DISTINCT cluster_id FROM deployments WHERE project = ? ORDER BY cluster_id",
        (project,),
    ).fetchall()
    return [r["cluster_id"] for r in rows]


def rolling(conn: Transaction, deployment_ids: Sequence[str]) -> list[Deployment]:
    """The deployments among these that are rolling out."""
    result: list[Deployment] = []
    for chunk in port.chunks(deployment_ids):
        rows = conn.execute(
            _select(f"d.rolling = 1 AND d.deployment_id IN ({port.marks(chunk)})"),
            chunk,
        ).fetchall()
        result.extend(_deployment(r) for r in rows)
    return result


def owners(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, str]:
    """deployment id -> cluster id, for the ids that exist."""
    result: dict[str, str] = {}
    for chunk in port.chunks(deployment_ids):
        rows = conn.execute(
            "SELECT deployment_id, cluster_id FROM deployments"
            f" WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        )
        result.update({r["deployment_id"]: r["cluster_id"] for r in rows})
    return result


def tombstoned(conn: Transaction, cluster_id: str, deployment_ids: Sequence[str]) -> set[str]:
    result: set[str] = set()
    for chunk in port.chunks(deployment_ids):
        rows = conn.execute(
            "SELECT deployment_id FROM tombstones WHERE cluster_id = ?"
            f" AND deployment_id IN ({port.marks(chunk)})",
            [cluster_id, *chunk],
        )
        result |= {r["deployment_id"] for r in rows}
    return result


def delete(conn: Transaction, deployment: Deployment, *, now: float) -> int:
    """Delete and leave a tombstone; returns the tombstone's revision. An observed deployment's
    tombstone is a release: whatever the agent last applied, it must not delete the DGD."""
    revision = clusters.bump_revision(conn, deployment.cluster_id)
    conn.execute("DELETE FROM deployments WHERE deployment_id = ?", (deployment.deployment_id,))
    conn.execute(
        "INSERT INTO tombstones (cluster_id, deployment_id, revision, delete_time, release)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (cluster_id, deployment_id)"
        " DO UPDATE SET revision = excluded.revision, delete_time = excluded.delete_time,"
        " release = excluded.release",
        (
            deployment.cluster_id,
            deployment.deployment_id,
            revision,
            now,
            int(deployment.authority != "managed"),
        ),
    )
    return revision


def workloads_on(conn: Transaction, cluster_ids: Sequence[str]) -> set[str]:
    """The workloads with a deployment on any of these clusters."""
    result: set[str] = set()
    for chunk in port.chunks(cluster_ids):
        rows = conn.execute(
            "SELECT DISTINCT workload_id FROM deployments"
            f" WHERE cluster_id IN ({port.marks(chunk)})",
            chunk,
        )
        result |= {r["workload_id"] for r in rows}
    return result


def count_on_cluster(conn: Transaction, cluster_id: str) -> int:
    row = conn.execute(
        "SELECT COUNT(*) FROM deployments WHERE cluster_id = ?", (cluster_id,)
    ).fetchone()
    return int(row[0])


def _select(where: str, *, extra: str = "") -> str:
    return (
        f"SELECT d.*, w.name AS workload_name, w.placement AS workload_placement,"
        f" w.priority AS workload_priority{extra}"
        " FROM deployments d"
        f" JOIN workloads w ON w.workload_id = d.workload_id WHERE {where}"
    )


def _row(d: Deployment, *, revision: int) -> list[object]:
    values: list[object] = []
    for column in _COLUMNS:
        value = getattr(d, column)
        if column == "serving":
            value = serving.encode(value)
        elif column == "revision":
            value = revision
        elif column in _BOOLEAN_COLUMNS:
            value = int(value)
        values.append(value)
    values.append(_BODY.dumps(d))
    return values


def _deployment(row: Row) -> Deployment:
    return _record(
        _read_columns(row),
        row["body"],
        row["workload_name"],
        row["workload_placement"],
        row["workload_priority"],
    )


# The record of a row, by the row's values: a page read again (a list polled, 64 clients on
# one page) finds its rows unchanged, and building a record of ~50 fields is most of the
# mapping's cost. Records are frozen; equal values make an equal record. 1,024: ten pages of
# 100 (a few MiB at most: the hub's memory per agent is a benchmark figure too).
@functools.lru_cache(maxsize=1024)
def _record(
    values: tuple[Any, ...], body: str, workload_name: str, placement: str, priority: str
) -> Deployment:
    columns = dict(zip(_COLUMNS, values, strict=True))
    for column in _BOOLEAN_COLUMNS:
        columns[column] = bool(columns[column])
    columns["serving"] = _serving(columns["serving"])
    return Deployment(
        **_body_values(body),
        **columns,
        workload_name=workload_name,
        topology=_topology(placement),
        priority=priority,
    )


# A workload's deployments carry the same body text (thousands of rows for a fleet-wide one):
# parsed once per distinct text. The dict is shared: callers only unpack it, never change it.
@functools.lru_cache(maxsize=4096)
def _body_values(text: str) -> dict[str, Any]:
    return _BODY.values(codec.loads(text))


# Rows of one workload repeat the same serving text (a list page of 100: one or two texts);
# a Serving is frozen, its parts tuples and frozen records: shared safely.
@functools.lru_cache(maxsize=4096)
def _serving(text: str) -> Serving:
    return serving.decode(text)


# Rows of one workload repeat the same placement text (a fleet-wide workload: thousands of
# rows); the parsed value is immutable, so it is cached by text.
@functools.lru_cache(maxsize=4096)
def _topology(placement_text: str) -> str:
    return str(codec.loads(placement_text).get("topology", ""))
