"""The cluster-written tables: reports, rejections, applied objects, replicas, nodes, devices,
allocations.

Observations are level-triggered: one deployment observation replaces the deployment's report
and its whole replica set; one node observation replaces the node's devices and allocations.
Each carries the agent's observation time (ns), and a record older than the one stored is
ignored, so a delayed batch can never roll state back. Unchanged node state is not rewritten
(agents resend their full state after every reconnect).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace

from hub.model import (
    AllocationObservation,
    AppliedObject,
    DeploymentObservation,
    Device,
    HeldDevice,
    Node,
    NodeObservation,
    Rejection,
    ReplicaObservation,
    StatusReport,
)
from hub.store import codec, port
from hub.store.port import Transaction


@dataclass(frozen=True)
class DeviceRefusal:
    """A node report's device or allocation that contradicts what the hub knows, not stored
    (docs/security.md "A cluster reports only its own devices"). `kind`: "device_bound" (a
    UUID another node verified first) or "foreign_allocation" (a device id that is not one of
    the reporting node's devices)."""

    cluster_id: str
    node_id: str
    field: str
    kind: str
    reason: str


@dataclass(frozen=True)
class PodCounts:
    pods: int
    ready: int


def replica_id(cluster_id: str, namespace: str, name: str) -> str:
    """Stable id of a replica: the same pod always gets the same id, on every hub."""
    return "rep_" + hashlib.sha256(f"{cluster_id}/{namespace}/{name}".encode()).hexdigest()[:16]


# -- writes -----------------------------------------------------------------------------------


_REPORT_UPSERT = (
    "INSERT INTO deployment_reports (deployment_id, observe_ns, has_status, phase, reason,"
    " message, ready_replicas, desired_replicas, applied_generation, absent, live_args,"
    " replicas_owner)"
    " {rows} ON CONFLICT (deployment_id) DO UPDATE SET"
    " observe_ns = excluded.observe_ns, has_status = excluded.has_status,"
    " phase = excluded.phase, reason = excluded.reason, message = excluded.message,"
    " ready_replicas = excluded.ready_replicas, desired_replicas = excluded.desired_replicas,"
    " applied_generation = excluded.applied_generation, absent = excluded.absent,"
    " live_args = excluded.live_args, replicas_owner = excluded.replicas_owner"
)
# Rows replaced whole (Dialect.replace). A replica's id is a hash of (cluster, namespace,
# name): one key conflicts iff the other does, so replacing on the id is replacing the pod.
_REPLICA_COLUMNS = (
    "replica_id",
    "deployment_id",
    "cluster_id",
    "namespace",
    "name",
    "node_id",
    "ready",
    "serving_digest",
    "engine_version",
    "role",
    "observe_ns",
)
_DEVICE_COLUMNS = (
    "cluster_id",
    "node_id",
    "uuid",
    "name",
    "memory_bytes",
    "pci_bus_id",
    "device_class",
    "healthy",
    "health_reason",
    "verified",
    "nvlink_domain",
    "parent_uuid",
)
_ALLOCATION_INSERT = (
    "INSERT INTO allocations (cluster_id, node_id, namespace, pod_name,"
    " device_id, resource_name) {rows} ON CONFLICT DO NOTHING"
)


def write_deployments(
    conn: Transaction, items: Sequence[tuple[str, DeploymentObservation]]
) -> list[tuple[str, DeploymentObservation]]:
    """Apply deployment observations (cluster id, observation), a statement per table for the
    whole group rather than per record: SQLite's cost is per statement far more than per row.
    Returns those written; an observation not newer than the stored one is skipped, and of two
    for the same deployment in the group the newer wins."""
    newest: dict[str, tuple[str, DeploymentObservation]] = {}
    for cluster_id, obs in items:
        current = newest.get(obs.deployment_id)
        if current is None or obs.observe_ns > current[1].observe_ns:
            newest[obs.deployment_id] = (cluster_id, obs)
    stored: dict[str, int] = {}
    for chunk in port.chunks(list(newest)):
        for r in conn.execute(
            "SELECT deployment_id, observe_ns FROM deployment_reports"
            f" WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            stored[r["deployment_id"]] = r["observe_ns"]
    fresh = [
        (cluster_id, obs)
        for deployment_id, (cluster_id, obs) in newest.items()
        if stored.get(deployment_id, -1) < obs.observe_ns
    ]
    if not fresh:
        return []
    port.write_rows(conn, _REPORT_UPSERT, [_report_row(obs) for _, obs in fresh])
    conn.executemany(
        "DELETE FROM deployment_rejections WHERE deployment_id = ? AND generation <= ?",
        [
            (obs.deployment_id, obs.status.applied_generation)
            for _, obs in fresh
            if obs.status is not None and obs.status.applied_generation
        ],
    )
    _write_applied(conn, fresh)
    port.write_rows(
        conn,
        "DELETE FROM replicas WHERE deployment_id IN ({rows})",
        [(obs.deployment_id,) for _, obs in fresh],
    )
    port.write_rows(
        conn,
        conn.dialect.replace_rows("replicas", _REPLICA_COLUMNS, ("replica_id",)),
        [
            row
            for cluster_id, obs in fresh
            for row in _replica_rows(cluster_id, obs.deployment_id, obs.replicas, obs.observe_ns)
        ],
        unique=(0,),
    )
    return fresh


def adopt_replicas(
    conn: Transaction,
    *,
    cluster_id: str,
    deployment_id: str,
    pods: Sequence[ReplicaObservation],
    observe_ns: int,
) -> None:
    """Record a discovered DGD's pods, as its agent last reported them, as the replicas of
    the deployment that adopts it (promotion). Until the agent reports the deployment itself,
    the devices those pods hold are then counted as the deployment's (held), not reserved a
    second time beside the allocations already seen. The agent's first report of the
    deployment is newer and replaces these rows (write_deployments)."""
    port.write_rows(
        conn,
        conn.dialect.replace_rows("replicas", _REPLICA_COLUMNS, ("replica_id",)),
        _replica_rows(cluster_id, deployment_id, pods, observe_ns),
        unique=(0,),
    )


def _replica_rows(
    cluster_id: str, deployment_id: str, pods: Sequence[ReplicaObservation], observe_ns: int
) -> list[tuple[object, ...]]:
    """Rows of table replicas (_REPLICA_COLUMNS) for a deployment's reported pods."""
    return [
        (
            replica_id(cluster_id, r.namespace, r.name),
            deployment_id,
            cluster_id,
            r.namespace,
            r.name,
            r.node_id,
            int(r.ready),
            r.serving_digest,
            r.engine_version,
            r.role,
            observe_ns,
        )
        for r in pods
    ]


def _write_applied(conn: Transaction, fresh: Sequence[tuple[str, DeploymentObservation]]) -> None:
    """Each observation replaces the applied object the hub held (none: the row goes); an
    unchanged digest rewrites nothing, so the body is stored once per change, not per report."""
    port.write_rows(
        conn,
        "DELETE FROM deployment_applied WHERE deployment_id IN ({rows})",
        [(obs.deployment_id,) for _, obs in fresh if obs.applied is None],
    )
    port.write_rows(
        conn,
        "INSERT INTO deployment_applied (deployment_id, cluster_id, api_version, kind,"
        " namespace, name, digest, body, truncated, observe_ns)"
        " {rows} ON CONFLICT (deployment_id) DO UPDATE SET"
        " api_version = excluded.api_version, kind = excluded.kind,"
        " namespace = excluded.namespace, name = excluded.name, digest = excluded.digest,"
        " body = excluded.body, truncated = excluded.truncated,"
        " observe_ns = excluded.observe_ns"
        " WHERE deployment_applied.digest != excluded.digest",
        [
            (
                obs.deployment_id,
                cluster_id,
                a.api_version,
                a.kind,
                a.namespace,
                a.name,
                a.digest,
                a.body,
                int(a.truncated),
                a.observe_ns,
            )
            for cluster_id, obs in fresh
            if (a := obs.applied) is not None
        ],
    )


def applied_objects(
    conn: Transaction, deployment_ids: Sequence[str], *, with_body: bool = False
) -> dict[str, AppliedObject]:
    """deployment id -> the object its agent applied; bodies only when asked (they are the
    bulk: a list of deployments shows the object's coordinates and digest)."""
    body = "body" if with_body else "'' AS body"
    result: dict[str, AppliedObject] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, api_version, kind, namespace, name, digest, truncated,"
            f" observe_ns, {body} FROM deployment_applied"
            f" WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            result[r["deployment_id"]] = AppliedObject(
                deployment_id=r["deployment_id"],
                api_version=r["api_version"],
                kind=r["kind"],
                namespace=r["namespace"],
                name=r["name"],
                digest=r["digest"],
                body=r["body"],
                truncated=bool(r["truncated"]),
                observe_ns=r["observe_ns"],
            )
    return result


def _report_row(obs: DeploymentObservation) -> tuple[object, ...]:
    status = obs.status
    return (
        obs.deployment_id,
        obs.observe_ns,
        int(status is not None),
        status.phase if status else "",
        status.reason if status else "",
        status.message if status else "",
        status.ready_replicas if status else 0,
        status.applied_replicas if status else 0,
        status.applied_generation if status else 0,
        int(obs.absent),
        codec.dumps(list(obs.live_args)),
        status.replicas_owner if status else "",
    )


# (cluster id, node id) -> hashes of the device and allocation rows last committed. Per process,
# per database (the service context holds it, and updates it only once a transaction commits):
# it spares reading a node's rows back to see that they did not change. A miss (a new process)
# falls back to reading them; a node row that is gone (its cluster was deleted) is rewritten.
NodeHashes = MutableMapping[tuple[str, str], tuple[int, int]]


@dataclass(frozen=True)
class NodesWritten:
    """What `write_nodes` changed. `capacity_changed`: clusters whose devices or allocations
    changed (admission runs again there); `held_changed`: those whose allocations or replicas
    changed (what their deployments hold is counted again; a device's health is not held)."""

    capacity_changed: set[str]
    held_changed: set[str]
    nodes: int
    records: int


def write_nodes(
    conn: Transaction,
    items: Sequence[tuple[str, NodeObservation]],
    *,
    known: NodeHashes | None = None,
    written: NodeHashes | None = None,
    refusals: list[DeviceRefusal] | None = None,
) -> NodesWritten:
    """Apply node observations (cluster id, observation) for a whole group, a statement per
    table. Pods come and go far more often than GPUs: only the table that changed is rewritten.
    Returns what changed, and how many nodes and records were written.

    A device UUID belongs to the node that verified it first, for as long as that node
    reports it; another node's claim on it is not stored, and an allocation of a device the
    reporting node does not have is not stored either: each is added to `refusals`."""
    newest: dict[tuple[str, str], NodeObservation] = {}
    for cluster_id, obs in items:
        key = (cluster_id, obs.node_id)
        current = newest.get(key)
        if current is None or obs.observe_ns > current.observe_ns:
            newest[key] = obs
    stored = _stored_node_versions(conn, list(newest))
    holders = _verified_holders(conn, _claims_to_check(newest, stored, known))
    node_rows: list[tuple[object, ...]] = []
    device_keys: list[tuple[str, str]] = []
    device_rows: list[tuple[object, ...]] = []
    allocation_keys: list[tuple[str, str]] = []
    allocation_rows: list[tuple[object, ...]] = []
    changed: set[str] = set()
    held: set[str] = set()
    nodes_changed = records = 0
    applied: set[tuple[str, str]] = set()
    claims: dict[str, tuple[str, str]] = {}  # verified UUIDs claimed in this group so far
    for (cluster_id, node_id), obs in newest.items():
        if stored.get((cluster_id, node_id), -1) >= obs.observe_ns:
            continue
        applied.add((cluster_id, node_id))
        key = (cluster_id, node_id)
        kept = () if obs.absent else obs.devices
        devices = _device_rows(kept)
        last = known.get(key) if known is not None else None
        refused: list[DeviceRefusal] = []
        if kept and (last is None or hash(frozenset(devices)) != last[0]):
            # The device set changed since it was last written clean: check every claim.
            kept = _bound_devices(key, kept, holders, claims, refused)
            devices = _device_rows(kept)
        owned = _own_allocations(key, () if obs.absent else obs.allocations, kept, refused)
        allocations = _allocation_rows(owned)
        if refusals is not None:
            refusals.extend(refused)
        devices_changed, allocations_changed = _node_changes(
            conn,
            key=(cluster_id, node_id),
            is_new=(cluster_id, node_id) not in stored,
            rows=(devices, allocations),
            known=known,
            written=written,
        )
        node_rows.append(
            (cluster_id, node_id, obs.observe_ns, obs.inventory_error, int(obs.absent))
        )
        if devices_changed:
            device_keys.append((cluster_id, node_id))
            device_rows.extend((cluster_id, node_id, *d) for d in sorted(devices))
        if allocations_changed:
            held.add(cluster_id)
            allocation_keys.append((cluster_id, node_id))
            allocation_rows.extend((cluster_id, node_id, *a) for a in sorted(allocations))
        if devices_changed or allocations_changed:
            changed.add(cluster_id)
            nodes_changed += 1
            records += 1 + len(devices) + len(allocations)
    # A node gone takes its pods with it (Kubernetes garbage-collects the pods of a deleted
    # node): no replica may name a node the cluster no longer has.
    gone = [key for key, obs in newest.items() if obs.absent and key in applied]
    port.write_rows(conn, "DELETE FROM replicas WHERE (cluster_id, node_id) IN ({rows})", gone)
    changed.update(cluster_id for cluster_id, _ in gone)
    held.update(cluster_id for cluster_id, _ in gone)
    port.write_rows(
        conn,
        "INSERT INTO nodes (cluster_id, node_id, observe_ns, inventory_error, absent)"
        " {rows} ON CONFLICT (cluster_id, node_id) DO UPDATE SET"
        " observe_ns = excluded.observe_ns, inventory_error = excluded.inventory_error,"
        " absent = excluded.absent",
        node_rows,
    )
    port.write_rows(
        conn, "DELETE FROM devices WHERE (cluster_id, node_id) IN ({rows})", device_keys
    )
    port.write_rows(
        conn,
        conn.dialect.replace_rows("devices", _DEVICE_COLUMNS, ("cluster_id", "uuid")),
        device_rows,
        unique=(0, 2),
    )
    port.write_rows(
        conn, "DELETE FROM allocations WHERE (cluster_id, node_id) IN ({rows})", allocation_keys
    )
    port.write_rows(conn, _ALLOCATION_INSERT, allocation_rows)
    return NodesWritten(changed, held, nodes_changed, records)


def unreported_nodes(conn: Transaction) -> list[tuple[str, str]]:
    """(cluster id, node id) of the nodes the hub counts that no open stream reports, in
    clusters some stream of which is open: a DaemonSet whose agent on that node is gone while
    the cluster lives on. An agent of a whole cluster (no node name) reports all its nodes, and
    reports absent the ones it lacks itself; a cluster with no stream open is merely quiet
    (stale), and nothing is taken from it."""
    rows = conn.execute(
        # From the clusters with a node agent's stream open (none where whole-cluster agents
        # report, as in the fleet benchmark): the nodes table is not scanned.
        "SELECT n.cluster_id, n.node_id FROM"
        " (SELECT DISTINCT cluster_id FROM agent_sessions WHERE node_name != '') a"
        " JOIN nodes n ON n.cluster_id = a.cluster_id WHERE n.absent = 0"
        " AND NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.cluster_id = n.cluster_id"
        " AND (s.node_name = '' OR s.node_name = n.node_id))"
    ).fetchall()
    # Sorted here: an ORDER BY would have SQLite scan the nodes table in key order instead.
    return sorted((r["cluster_id"], r["node_id"]) for r in rows)


def drop_nodes(
    conn: Transaction,
    keys: Sequence[tuple[str, str]],
    *,
    known: NodeHashes | None = None,
    written: NodeHashes | None = None,
) -> set[str]:
    """Mark these nodes (cluster id, node id) absent as if their cluster had reported it, just
    after their last observation: devices, allocations and replicas on them go. A later
    report from the node (its agent back) is newer, and brings it back. Returns the clusters
    whose capacity changed."""
    stored = _stored_node_versions(conn, list(keys))
    absent = [
        (cluster_id, NodeObservation(node_id, observe_ns + 1, (), (), absent=True))
        for (cluster_id, node_id), observe_ns in stored.items()
    ]
    return write_nodes(conn, absent, known=known, written=written).capacity_changed


def _node_changes(
    conn: Transaction,
    *,
    key: tuple[str, str],
    is_new: bool,
    rows: tuple[set[tuple[object, ...]], set[tuple[str, ...]]],
    known: NodeHashes | None,
    written: NodeHashes | None,
) -> tuple[bool, bool]:
    """(devices changed, allocations changed) for one node."""
    devices, allocations = rows
    hashes = (hash(frozenset(devices)), hash(frozenset(allocations)))
    if written is not None:
        written[key] = hashes
    if is_new:
        return True, True
    last = known.get(key) if known is not None else None
    if last is not None:
        return last[0] != hashes[0], last[1] != hashes[1]
    cluster_id, node_id = key
    return (
        _stored_devices(conn, cluster_id, node_id) != devices,
        _stored_allocations(conn, cluster_id, node_id) != allocations,
    )


def _stored_node_versions(
    conn: Transaction, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """(cluster id, node id) -> observe_ns of those of `keys` the hub holds: a statement per
    chunk of keys, not one per cluster."""
    stored: dict[tuple[str, str], int] = {}
    for values, params in port.row_chunks(sorted(set(keys))):
        for r in conn.execute(
            "SELECT cluster_id, node_id, observe_ns FROM nodes"
            f" WHERE (cluster_id, node_id) IN ({values})",
            params,
        ):
            stored[(r["cluster_id"], r["node_id"])] = r["observe_ns"]
    return stored


def write_rejection(
    conn: Transaction, *, deployment_id: str, rejection: Rejection, now: float
) -> None:
    """Record why the agent could not apply a revision; an older reject (a lower revision,
    arriving late) never replaces a newer one."""
    conn.execute(
        "INSERT INTO deployment_rejections (deployment_id, revision, generation, error,"
        " reject_time) VALUES (?, ?, ?, ?, ?) ON CONFLICT (deployment_id) DO UPDATE SET"
        " revision = excluded.revision, generation = excluded.generation,"
        " error = excluded.error, reject_time = excluded.reject_time"
        " WHERE excluded.revision >= deployment_rejections.revision",
        (deployment_id, rejection.revision, rejection.generation, rejection.error, now),
    )


def _claims_to_check(
    newest: Mapping[tuple[str, str], NodeObservation],
    stored: Mapping[tuple[str, str], int],
    known: NodeHashes | None,
) -> list[str]:
    """The UUIDs of every node of the group whose device set changed since it was last written
    clean (write_nodes checks their claims): looked up together, one statement per chunk for
    the whole group rather than one per node (a round trip each on PostgreSQL)."""
    uuids: list[str] = []
    for key, obs in newest.items():
        if obs.absent or not obs.devices or stored.get(key, -1) >= obs.observe_ns:
            continue
        last = known.get(key) if known is not None else None
        if last is None or hash(frozenset(_device_rows(obs.devices))) != last[0]:
            uuids.extend(d.uuid for d in obs.devices)
    return uuids


def _verified_holders(conn: Transaction, uuids: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """UUID -> the nodes (cluster id, node id) holding it verified, as stored."""
    holders: dict[str, list[tuple[str, str]]] = {}
    for chunk in port.chunks(uuids):
        for r in conn.execute(
            "SELECT uuid, cluster_id, node_id FROM devices"
            f" WHERE verified = 1 AND uuid IN ({port.marks(chunk)})",
            chunk,
        ):
            holders.setdefault(r["uuid"], []).append((r["cluster_id"], r["node_id"]))
    return holders


def _bound_devices(
    key: tuple[str, str],
    devices: Sequence[Device],
    holders: Mapping[str, Sequence[tuple[str, str]]],
    claims: dict[str, tuple[str, str]],
    refused: list[DeviceRefusal],
) -> tuple[Device, ...]:
    """The node's devices whose UUID no other node holds verified (`holders`: stored, or
    `claims`: claimed earlier in this group); the others go to `refused`. A verified device
    kept claims its UUID."""
    cluster_id, node_id = key
    kept: list[Device] = []
    for device in devices:
        others = [h for h in holders.get(device.uuid, ()) if h != key]
        holder = others[-1] if others else claims.get(device.uuid)
        if holder is not None and holder != key:
            # Another cluster's name is not told to this cluster's agent.
            where = f"node {holder[1]}" if holder[0] == cluster_id else "another cluster"
            refused.append(
                DeviceRefusal(
                    cluster_id,
                    node_id,
                    f"nodes[{node_id}].devices[{device.uuid}]",
                    "device_bound",
                    f"device {device.uuid} is bound to {where}, which verified it first;"
                    " not stored",
                )
            )
            continue
        kept.append(device)
        if device.verified:
            claims[device.uuid] = key
    return tuple(kept)


def _own_allocations(
    key: tuple[str, str],
    allocations: Sequence[AllocationObservation],
    devices: Sequence[Device],
    refused: list[DeviceRefusal],
) -> tuple[AllocationObservation, ...]:
    """The allocations with only device ids of the node's own devices (a time-slicing
    replica `<uuid>::<n>` names its GPU; `MIG-GPU-<uuid>/<gi>/<ci>` a slice of that GPU); an
    allocation left with none is dropped. What is dropped goes to `refused`."""
    if not allocations:
        return ()
    uuids = {d.uuid for d in devices} | {d.parent_uuid for d in devices if d.parent_uuid}
    owned: list[AllocationObservation] = []
    for allocation in allocations:
        ids = tuple(i for i in allocation.device_ids if _device_of(i) in uuids)
        if len(ids) < len(allocation.device_ids):
            foreign = [i for i in allocation.device_ids if i not in ids]
            refused.append(
                DeviceRefusal(
                    key[0],
                    key[1],
                    f"nodes[{key[1]}].allocations[{allocation.namespace}/{allocation.pod_name}]"
                    ".device_ids",
                    "foreign_allocation",
                    f"{', '.join(foreign[:4])}: not a device of node {key[1]}; not stored",
                )
            )
        if ids == allocation.device_ids:
            owned.append(allocation)
        elif ids:
            owned.append(replace(allocation, device_ids=ids))
    return tuple(owned)


def _device_of(device_id: str) -> str:
    """The device UUID a kubelet device id names."""
    base = device_id.split("::", 1)[0]
    if base.startswith("MIG-GPU-"):
        return base[len("MIG-") :].split("/", 1)[0]
    return base


def _device_rows(devices: Iterable[Device]) -> set[tuple[object, ...]]:
    return {
        (
            d.uuid,
            d.name,
            d.memory_bytes,
            d.pci_bus_id,
            d.device_class,
            int(d.healthy),
            d.health_reason,
            int(d.verified),
            d.nvlink_domain,
            d.parent_uuid,
        )
        for d in devices
    }


def _allocation_rows(allocations: Iterable[AllocationObservation]) -> set[tuple[str, ...]]:
    return {
        (a.namespace, a.pod_name, device_id, a.resource_name)
        for a in allocations
        for device_id in a.device_ids
    }


def _stored_devices(conn: Transaction, cluster_id: str, node_id: str) -> set[tuple[object, ...]]:
    rows = conn.execute(
        "SELECT uuid, name, memory_bytes, pci_bus_id, device_class, healthy, health_reason,"
        " verified, nvlink_domain, parent_uuid FROM devices WHERE cluster_id = ? AND node_id = ?",
        (cluster_id, node_id),
    )
    return {tuple(r) for r in rows}


def _stored_allocations(conn: Transaction, cluster_id: str, node_id: str) -> set[tuple[str, ...]]:
    rows = conn.execute(
        "SELECT namespace, pod_name, device_id, resource_name FROM allocations"
        " WHERE cluster_id = ? AND node_id = ?",
        (cluster_id, node_id),
    )
    return {tuple(r) for r in rows}


# -- reads ------------------------------------------------------------------------------------


def reports(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, StatusReport | None]:
    """deployment id -> its last status report; None where it reported no status yet."""
    result: dict[str, StatusReport | None] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT * FROM deployment_reports WHERE deployment_id IN ({port.marks(chunk)})", chunk
        ):
            result[r["deployment_id"]] = (
                StatusReport(
                    phase=r["phase"],
                    reason=r["reason"],
                    message=r["message"],
                    ready_replicas=r["ready_replicas"],
                    # Column desired_replicas: the agent's word for the DGD's replicas.
                    applied_replicas=r["desired_replicas"],
                    applied_generation=r["applied_generation"],
                    observe_ns=r["observe_ns"],
                    absent=bool(r["absent"]),
                    live_args=tuple(codec.loads(r["live_args"])),
                    replicas_owner=r["replicas_owner"],
                )
                if r["has_status"]
                else None
            )
    return result


def rejections(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, Rejection]:
    result = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            f"SELECT * FROM deployment_rejections WHERE deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            result[r["deployment_id"]] = Rejection(r["revision"], r["generation"], r["error"])
    return result


def pod_counts(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, PodCounts]:
    result = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, COUNT(*) AS pods, SUM(ready) AS ready FROM replicas"
            f" WHERE deployment_id IN ({port.marks(chunk)}) GROUP BY deployment_id",
            chunk,
        ):
            result[r["deployment_id"]] = PodCounts(pods=r["pods"], ready=r["ready"] or 0)
    return result


@dataclass(frozen=True)
class DigestCount:
    pods: int
    # Scheduled on a node (up), and ready.
    running: int
    ready: int


def digest_counts(
    conn: Transaction, deployment_ids: Sequence[str]
) -> dict[str, dict[str, DigestCount]]:
    """deployment id -> serving digest -> its pods (ready or not) and ready ones."""
    result: dict[str, dict[str, DigestCount]] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, serving_digest, COUNT(*) AS pods, SUM(ready) AS ready,"
            " SUM(CASE WHEN node_id != '' THEN 1 ELSE 0 END) AS running"
            f" FROM replicas WHERE deployment_id IN ({port.marks(chunk)})"
            " GROUP BY deployment_id, serving_digest",
            chunk,
        ):
            result.setdefault(r["deployment_id"], {})[r["serving_digest"]] = DigestCount(
                pods=r["pods"], running=r["running"] or 0, ready=r["ready"] or 0
            )
    return result


def digest_role_counts(
    conn: Transaction, deployment_ids: Sequence[str]
) -> dict[str, dict[tuple[str, str], DigestCount]]:
    """deployment id -> (serving digest, role) -> its pods, running and ready ones (a
    disaggregated replica is a set of pods of two roles: hub/service/views.py counts sets)."""
    result: dict[str, dict[tuple[str, str], DigestCount]] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT deployment_id, serving_digest, role, COUNT(*) AS pods, SUM(ready) AS ready,"
            " SUM(CASE WHEN node_id != '' THEN 1 ELSE 0 END) AS running"
            f" FROM replicas WHERE deployment_id IN ({port.marks(chunk)})"
            " GROUP BY deployment_id, serving_digest, role",
            chunk,
        ):
            result.setdefault(r["deployment_id"], {})[(r["serving_digest"], r["role"])] = (
                DigestCount(pods=r["pods"], running=r["running"] or 0, ready=r["ready"] or 0)
            )
    return result


def engine_versions(conn: Transaction, deployment_ids: Sequence[str]) -> dict[str, set[str]]:
    result: dict[str, set[str]] = {}
    for chunk in port.chunks(deployment_ids):
        for r in conn.execute(
            "SELECT DISTINCT deployment_id, engine_version FROM replicas"
            f" WHERE engine_version != '' AND deployment_id IN ({port.marks(chunk)})",
            chunk,
        ):
            result.setdefault(r["deployment_id"], set()).add(r["engine_version"])
    return result


def held_devices(
    conn: Transaction, deployment_ids: Sequence[str]
) -> dict[str, dict[tuple[str, str], list[HeldDevice]]]:
    """deployment id -> (replica id, pod) -> the devices it holds, with their NVLink domain
    and the pod's role and serving digest."""
    result: dict[str, dict[tuple[str, str], list[HeldDevice]]] = {}
    for chunk in port.chunks(deployment_ids):
        rows = conn.execute(
            "SELECT r.deployment_id, r.replica_id, r.name, r.role, r.serving_digest,"
            " a.device_id, a.node_id, dv.nvlink_domain, dv.uuid IS NOT NULL AS known"
            " FROM replicas r"
            " JOIN allocations a ON a.cluster_id = r.cluster_id AND a.namespace = r.namespace"
            "  AND a.pod_name = r.name"
            " LEFT JOIN devices dv ON dv.cluster_id = a.cluster_id AND dv.uuid = a.device_id"
            f" WHERE r.deployment_id IN ({port.marks(chunk)})",
            chunk,
        )
        for r in rows:
            pods = result.setdefault(r["deployment_id"], {})
            pods.setdefault((r["replica_id"], r["name"]), []).append(
                HeldDevice(
                    device_id=r["device_id"],
                    node_id=r["node_id"],
                    nvlink_domain=r["nvlink_domain"] if r["known"] else None,
                    role=r["role"],
                    serving_digest=r["serving_digest"],
                )
            )
    return result


def observed_versions(
    conn: Transaction, cluster_id: str, *, node_id: str | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """(deployment id -> observe_ns, node id -> observe_ns) of what the hub holds for a
    cluster's deployments and nodes (only `node_id` among the nodes, when given)."""
    deployments = {
        r["deployment_id"]: r["observe_ns"]
        for r in conn.execute(
            "SELECT r.deployment_id, r.observe_ns FROM deployment_reports r"
            " JOIN deployments d ON d.deployment_id = r.deployment_id WHERE d.cluster_id = ?",
            (cluster_id,),
        )
    }
    # Nodes that left are not held: the agent has nothing to resume for them.
    query = "SELECT node_id, observe_ns FROM nodes WHERE cluster_id = ? AND absent = 0"
    params: tuple[str, ...] = (cluster_id,)
    if node_id is not None:
        query, params = query + " AND node_id = ?", (cluster_id, node_id)
    nodes = {r["node_id"]: r["observe_ns"] for r in conn.execute(query, params)}
    return deployments, nodes


def nodes_of(conn: Transaction, cluster_id: str) -> list[Node]:
    node_rows = conn.execute(
        "SELECT * FROM nodes WHERE cluster_id = ? AND absent = 0 ORDER BY node_id", (cluster_id,)
    ).fetchall()
    device_rows = conn.execute(
        "SELECT * FROM devices WHERE cluster_id = ? ORDER BY node_id, pci_bus_id, uuid",
        (cluster_id,),
    ).fetchall()
    by_node: dict[str, list[Device]] = {}
    for d in device_rows:
        by_node.setdefault(d["node_id"], []).append(
            Device(
                uuid=d["uuid"],
                name=d["name"],
                memory_bytes=d["memory_bytes"],
                pci_bus_id=d["pci_bus_id"],
                device_class=d["device_class"],
                healthy=bool(d["healthy"]),
                health_reason=d["health_reason"],
                verified=bool(d["verified"]),
                nvlink_domain=d["nvlink_domain"],
                parent_uuid=d["parent_uuid"],
            )
        )
    return [
        Node(
            node_id=n["node_id"],
            devices=tuple(by_node.get(n["node_id"], ())),
            inventory_error=n["inventory_error"],
            observe_ns=n["observe_ns"],
        )
        for n in node_rows
    ]
