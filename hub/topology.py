"""Topology: do a replica's devices lie within the domain its workload requires? Pure.

Called by hub/service/views.py on every read of a deployment whose workload sets
placement.topology, with the devices each of its worker pods holds (allocations joined to the
node inventories and to the pods' reports). The hub cannot choose devices (the cluster's
scheduler does); it checks and shows violations (docs/topology.md):
- "node": all of a replica's devices on one node;
- "nvlink_domain": all in one NVLink domain (as NVML's GPU fabric info names it); a device
  that reports no domain, or that no inventory lists, is a violation: nothing shows it is in one.

What is a replica? The pods that exchange model state over the interconnect, and so must share
the domain, checked together:
- aggregated: one worker pod;
- disaggregated: Dynamo pairs prefill and decode workers per request, not per replica, so KV
  caches move between any prefill and any decode pod of one generation of the deployment (one
  serving digest: during a rollout the new generation runs in a Dynamo namespace of its own).
  All the prefill and decode pods of one serving digest are therefore one group, and a
  violation names them all.
Pods of one multi-node worker (multinode.nodeCount) would form one group too, but the renderer
never makes one and the agent does not report the pod labels that tie them together yet (Grove's
grove.io/podcliquescalinggroup-replica-index, LeaderWorkerSet's group-index): each such pod
is checked on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub.model import HeldDevice

DISAGGREGATED_ROLES = frozenset({"prefill", "decode"})

Pod = tuple[str, str]  # (replica id, pod name)


@dataclass(frozen=True)
class Violation:
    # The group's first pod (by replica id), and the names of all its pods.
    replica_id: str
    name: str
    reason: str


def violations(requirement: str, replicas: Mapping[Pod, Sequence[HeldDevice]]) -> list[Violation]:
    if not requirement:
        return []
    found = []
    for pods in groups(replicas):
        devices = [device for pod in pods for device in replicas[pod]]
        reason = _check(requirement, devices)
        if reason:
            found.append(Violation(pods[0][0], ", ".join(name for _, name in pods), reason))
    return found


def groups(replicas: Mapping[Pod, Sequence[HeldDevice]]) -> list[list[Pod]]:
    """The pods checked together, each group sorted, groups by their first pod."""
    by_key: dict[tuple[str, ...], list[Pod]] = {}
    for pod, devices in replicas.items():
        first = devices[0] if devices else None
        if first is not None and first.role in DISAGGREGATED_ROLES:
            key: tuple[str, ...] = ("disaggregated", first.serving_digest)
        else:
            key = ("pod", *pod)
        by_key.setdefault(key, []).append(pod)
    return sorted(sorted(pods) for pods in by_key.values())


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
