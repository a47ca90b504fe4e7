"""A cluster's nodes as its agents report them: nodes, devices, allocations.

One node observation replaces the node's devices and allocations; an older one than stored is
ignored. Unchanged node state is not rewritten (agents resend their full state after every
reconnect): the hub remembers what it last committed per node (`NodeHashes`). A device UUID
belongs to the node that verified it first (docs/security.md). A group of observations is
written a statement per table and chunk, never per node or row (`port.write_rows`). Caller:
hub/service/ingest.py, and hub/service/sync.py (dropping nodes no agent reports); clusters'
views read `nodes_of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace

from hub.model import (
    AllocationObservation,
    Device,
    Node,
    NodeObservation,
)
from hub.store import node_devices, port
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


_DEVICE_COLUMNS = ("cluster_id", "node_id", *node_devices.COLUMNS)


_NODE_KEY = ("cluster_id", "node_id")

# A plain INSERT: the node's rows were deleted just before in the same transaction (under its
# cluster's lock) and `_allocation_rows` keeps one row per key, so no row can conflict; an
# `ON CONFLICT DO NOTHING` cost PostgreSQL a speculative insertion per row (about 15% of the
# statement, the largest of ingest's).
_ALLOCATION_INSERT = (
    "INSERT INTO allocations (cluster_id, node_id, namespace, pod_name,"
    " device_id, resource_name) {rows}"
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
    fresh = {key: obs for key, obs in newest.items() if stored.get(key, -1) < obs.observe_ns}
    # Each node's device hash and ids, built once (the claims check, the change check and the
    # allocations' check read them), and not again while its devices stay the same records.
    reported = {
        key: node_devices.derived(key, () if obs.absent else obs.devices)
        for key, obs in fresh.items()
    }
    check = _claims_to_check(reported, known)
    holders = _verified_holders(conn, (d.uuid for key in check for d in fresh[key].devices))
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
    for key, obs in fresh.items():
        cluster_id, node_id = key
        applied.add(key)
        devices = reported[key]
        refused: list[DeviceRefusal] = []
        if key in check:
            # The device set changed since it was last written clean: check every claim.
            bound = _bound_devices(key, devices.devices, holders, claims, refused)
            if len(bound) != len(devices.devices):
                devices = node_devices.build(bound)
        owned = _own_allocations(key, () if obs.absent else obs.allocations, devices, refused)
        allocations = _allocation_rows(owned)
        if refusals is not None:
            refusals.extend(refused)
        devices_changed, allocations_changed = _node_changes(
            conn,
            key=(cluster_id, node_id),
            is_new=(cluster_id, node_id) not in stored,
            devices=devices,
            allocations=allocations,
            known=known,
            written=written,
        )
        node_rows.append(
            (cluster_id, node_id, obs.observe_ns, obs.inventory_error, int(obs.absent))
        )
        if devices_changed:
            device_keys.append((cluster_id, node_id))
            device_rows.extend(
                (cluster_id, node_id, *node_devices.stored_row(d))
                for d in sorted(node_devices.rows(devices.devices))
            )
        if allocations_changed:
            held.add(cluster_id)
            allocation_keys.append((cluster_id, node_id))
            allocation_rows.extend((cluster_id, node_id, *a) for a in sorted(allocations))
        if devices_changed or allocations_changed:
            changed.add(cluster_id)
            nodes_changed += 1
            records += 1 + len(devices.devices) + len(allocations)
    # A node gone takes its pods with it (Kubernetes garbage-collects the pods of a deleted
    # node): no replica may name a node the cluster no longer has.
    gone = [key for key, obs in newest.items() if obs.absent and key in applied]
    changed.update(cluster_id for cluster_id, _ in gone)
    held.update(cluster_id for cluster_id, _ in gone)
    # Every row is built and nothing below reads: pipelined (on PostgreSQL the server runs one
    # statement while the next one's parameters are sent; docs/benchmark.md, stop 23).
    with conn.pipeline():
        port.write_rows(
            conn, "DELETE FROM replicas WHERE (cluster_id, node_id) " + port.KEYS_IN, gone
        )
        port.write_rows(
            conn,
            "INSERT INTO nodes (cluster_id, node_id, observe_ns, inventory_error, absent)"
            " {rows} ON CONFLICT (cluster_id, node_id) DO UPDATE SET"
            " observe_ns = excluded.observe_ns, inventory_error = excluded.inventory_error,"
            " absent = excluded.absent",
            node_rows,
        )
        _delete_of_nodes(conn, "devices", device_keys)
        port.write_rows(
            conn,
            conn.dialect.replace_rows("devices", _DEVICE_COLUMNS, ("cluster_id", "uuid")),
            device_rows,
            unique=(0, 2),
        )
        _delete_of_nodes(conn, "allocations", allocation_keys)
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
    devices: node_devices.NodeDevices,
    allocations: set[tuple[str, ...]],
    known: NodeHashes | None,
    written: NodeHashes | None,
) -> tuple[bool, bool]:
    """(devices changed, allocations changed) for one node."""
    hashes = (devices.digest, hash(frozenset(allocations)))
    if written is not None:
        written[key] = hashes
    if is_new:
        return True, True
    last = known.get(key) if known is not None else None
    if last is not None:
        return last[0] != hashes[0], last[1] != hashes[1]
    cluster_id, node_id = key
    return (
        _stored_devices(conn, cluster_id, node_id) != node_devices.rows(devices.devices),
        _stored_allocations(conn, cluster_id, node_id) != allocations,
    )


def _stored_node_versions(
    conn: Transaction, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """(cluster id, node id) -> observe_ns of those of `keys` the hub holds: a statement per
    chunk of keys, not one per cluster."""
    stored: dict[tuple[str, str], int] = {}
    for condition, params in conn.dialect.keys_in("nodes", _NODE_KEY, keys):
        for r in conn.execute(
            f"SELECT cluster_id, node_id, observe_ns FROM nodes WHERE {condition}", params
        ):
            stored[(r["cluster_id"], r["node_id"])] = r["observe_ns"]
    return stored


def _delete_of_nodes(conn: Transaction, table: str, keys: Sequence[tuple[str, str]]) -> None:
    """Delete the rows of `table` (devices, allocations) on the nodes `keys`: a search of the
    table's (cluster_id, node_id) index per key on both engines (`Dialect.keys_in`)."""
    for condition, params in conn.dialect.keys_in(table, _NODE_KEY, keys):
        conn.execute(f"DELETE FROM {table} WHERE {condition}", params)


def _claims_to_check(
    reported: Mapping[tuple[str, str], node_devices.NodeDevices],
    known: NodeHashes | None,
) -> set[tuple[str, str]]:
    """The nodes of the group whose device set changed since it was last written clean:
    write_nodes checks their claims, their UUIDs looked up together (one statement per chunk
    for the whole group rather than one per node: a round trip each on PostgreSQL)."""
    check: set[tuple[str, str]] = set()
    for key, devices in reported.items():
        last = known.get(key) if known is not None else None
        if devices.devices and (last is None or devices.digest != last[0]):
            check.add(key)
    return check


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
    devices: node_devices.NodeDevices,
    refused: list[DeviceRefusal],
) -> tuple[AllocationObservation, ...]:
    """The allocations with only device ids of the node's own devices (a time-slicing
    replica `<uuid>::<n>` names its GPU; `MIG-GPU-<uuid>/<gi>/<ci>` a slice of that GPU); an
    allocation left with none is dropped. What is dropped goes to `refused`."""
    if not allocations:
        return ()
    uuids = devices.ids
    # Hot path (every node report): almost every allocation names whole GPUs of the node by
    # their UUID, checked by set inclusion in C; only the others are parsed id by id.
    if all(uuids.issuperset(a.device_ids) for a in allocations):
        return tuple(allocations)
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


def _allocation_rows(allocations: Iterable[AllocationObservation]) -> set[tuple[str, ...]]:
    """A node's allocation rows, one per key (namespace, pod, device): validation already
    refuses a pod twice on a node and a device twice in a pod; a device given twice stays
    once, as INSERT OR IGNORE kept it, whatever the caller."""
    rows: set[tuple[str, ...]] = {
        (a.namespace, a.pod_name, device_id, a.resource_name)
        for a in allocations
        for device_id in a.device_ids
    }
    if len({row[:3] for row in rows}) != len(rows):
        rows = set({row[:3]: row for row in sorted(rows)}.values())
    return rows


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
