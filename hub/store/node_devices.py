"""What ingest derives from a node's reported devices, kept per node while they stay the same.

A node is reported for its pods, and its devices come back as they were, report after report:
the validation thread hands over the very same `Device` records (hub/sync/observed.py
`DeviceCache`), only in a new tuple. hub/store/nodes.py `write_nodes` needs, for every
reported node, the hash of its device rows (to see whether they changed, `NodeHashes`) and
the device ids its pods may hold (to refuse an allocation of another node's device); both are
a pure function of the devices. `derived` answers them from the node's last report when every
device is the same record as then (compared by identity, against records this module holds,
so an answer is never one for other devices), and builds them anew otherwise.

Per process and shared by every store in it: keyed by (cluster id, node id) only to bound
what it holds (one entry per node reported), never trusted beyond the identity check.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hub.model import Device

# Nodes kept: every node of a fleet of 32,768 nodes (4,096 clusters of 8). Past it the
# memo starts over: a cost of one rebuild a node, never a wrong answer.
LIMIT = 32_768

# A device's columns in table devices after (cluster_id, node_id) (hub/store/nodes.py writes
# them in this order).
COLUMNS = (
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
# A device's columns after (cluster_id, node_id), read in C. `healthy` and `verified` stay
# bools: equal (and hashing equal) to the 0/1 the store reads back, so the change check
# compares them as they are; `stored_row` makes them integers for the write.
_ROW = operator.attrgetter(*COLUMNS)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """A node's reported devices; `digest`: the hash of their rows (`NodeHashes` keeps it);
    `ids`: their UUIDs and their parents' (the ids an allocation on the node may name)."""

    devices: tuple[Device, ...]
    digest: int
    ids: frozenset[str]


_KEPT: dict[tuple[str, str], NodeDevices] = {}


def derived(key: tuple[str, str], devices: Sequence[Device]) -> NodeDevices:
    """What `write_nodes` needs of node `key`'s devices: the last answer when every device is
    the same record as then, else built (and kept)."""
    last = _KEPT.get(key)
    if (
        last is not None
        and len(last.devices) == len(devices)
        and all(map(operator.is_, last.devices, devices))
    ):
        return last
    answer = build(devices)
    if len(_KEPT) >= LIMIT:
        _KEPT.clear()
    _KEPT[key] = answer
    return answer


def build(devices: Iterable[Device]) -> NodeDevices:
    kept = tuple(devices)
    ids = {d.uuid for d in kept}
    ids.update(d.parent_uuid for d in kept if d.parent_uuid)
    return NodeDevices(kept, hash(frozenset(rows(kept))), frozenset(ids))


def rows(devices: Iterable[Device]) -> set[tuple[object, ...]]:
    """A node's device rows as the change check compares them."""
    return set(map(_ROW, devices))


def stored_row(row: tuple[object, ...]) -> tuple[object, ...]:
    """A device row as written: `healthy` and `verified` as the integer columns they are
    (PostgreSQL refuses a boolean for an integer column)."""
    (uuid, name, memory, pci, cls, healthy, reason, verified, domain, parent) = row
    return (uuid, name, memory, pci, cls, int(healthy), reason, int(verified), domain, parent)  # type: ignore[call-overload]
