"""Topology: do a replica's devices lie within the domain its workload requires? Pure.

Called by hub/service/views.py on every read of a deployment whose workload sets
placement.topology, with the devices each of its replicas holds (allocations joined to the
node inventories). The hub cannot choose devices (the cluster's scheduler does); it checks and
shows violations (docs/topology.md):
- "node": all of a replica's devices on one node;
- "nvlink_domain": all in one NVLink domain (as NVML's GPU fabric info names it); a device
  that reports no domain, or that no inventory lists, is a violation: nothing shows it is in one.
A replica is one worker pod: for disaggregated serving the prefill and decode pods of one
replica are not told apart, so each pod is checked on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub.model import HeldDevice


@dataclass(frozen=True)
class Violation:
    replica_id: str
    name: str
    reason: str


def violations(
    requirement: str, replicas: Mapping[tuple[str, str], Sequence[HeldDevice]]
) -> list[Violation]:
    if not requirement:
        return []
    found = []
    for (replica_id, name), devices in sorted(replicas.items()):
        reason = _check(requirement, devices)
        if reason:
            found.append(Violation(replica_id, name, reason))
    return found


def _check(requirement: str, devices: Sequence[HeldDevice]) -> str:
    if requirement == "node":
        nodes = sorted({d.node_id for d in devices})
        return f"devices on {len(nodes)} nodes: {', '.join(nodes)}" if len(nodes) > 1 else ""
    unknown = sorted(d.device_id for d in devices if not d.nvlink_domain)
    if unknown:
        return f"no NVLink domain reported for {', '.join(unknown)}"
    domains = sorted({d.nvlink_domain or "" for d in devices})
    if len(domains) > 1:
        return f"devices span {len(domains)} NVLink domains: {', '.join(domains)}"
    return ""
