"""The cluster-written half: what agents report. The state the hub keeps from it (a
deployment's status report, replicas, allocations, devices, nodes, discovered DGDs) and the
observations as they arrive from an agent (validated at hub/sync/observed.py)."""

from __future__ import annotations

from dataclasses import dataclass

# What agents report of pods and of DGDs nobody declared is one type for hub and agent.
from common.discovered import DiscoveredObservation, ReplicaObservation


@dataclass(frozen=True)
class StatusReport:
    """The cluster-written half: the agent's last answer about a deployment."""

    phase: str
    reason: str
    message: str
    ready_replicas: int
    # The replicas the cluster's DGD asks for (the agent's `desired_replicas`): what was applied,
    # not the plane's desired_replicas (docs/phases.md).
    applied_replicas: int
    applied_generation: int
    observe_ns: int
    absent: bool = False
    # The worker's args as the DGD runs them (drift checks of adopted deployments).
    live_args: tuple[str, ...] = ()
    # Who sets the replicas on the cluster: "", "adapter" or "autoscaler:<field manager>".
    replicas_owner: str = ""


@dataclass(frozen=True)
class Rejection:
    revision: int
    generation: int
    error: str


@dataclass(frozen=True)
class Replica:
    replica_id: str
    deployment_id: str
    cluster_id: str
    name: str
    namespace: str
    node_id: str
    ready: bool
    serving_digest: str
    engine_version: str
    role: str
    observe_ns: int
    device_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Allocation:
    replica_id: str
    deployment_id: str
    cluster_id: str
    project: str
    node_id: str
    pod_name: str
    namespace: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class Device:
    uuid: str
    name: str
    memory_bytes: int
    pci_bus_id: str
    device_class: str
    healthy: bool
    health_reason: str
    verified: bool
    nvlink_domain: str = ""
    parent_uuid: str = ""


@dataclass(frozen=True)
class HeldDevice:
    """A device a replica holds, where it is (topology checks, hub/topology.py)."""

    device_id: str
    node_id: str
    # None: no inventory lists the device; "": it reports no NVLink domain.
    nvlink_domain: str | None
    # The holding pod's role (worker | prefill | decode) and serving digest: which pods form
    # one replica for the check (hub/topology.py).
    role: str = ""
    serving_digest: str = ""


@dataclass(frozen=True)
class Node:
    node_id: str
    devices: tuple[Device, ...]
    inventory_error: str
    observe_ns: int


# -- Observations as they arrive from an agent (validated at hub/sync/observed.py) ------------


@dataclass(frozen=True)
class AppliedObject:
    """The Kubernetes object the agent applied for a deployment, as the cluster holds it."""

    deployment_id: str
    api_version: str
    kind: str
    namespace: str
    name: str
    # "sha256:<hex>" of the canonical JSON body.
    digest: str
    # Canonical JSON; "" when truncated by the agent, or when read without bodies.
    body: str
    truncated: bool
    # The observation in which this digest was first seen.
    observe_ns: int


@dataclass(frozen=True)
class DeploymentObservation:
    deployment_id: str
    observe_ns: int
    status: StatusReport | None
    replicas: tuple[ReplicaObservation, ...]
    absent: bool = False
    live_args: tuple[str, ...] = ()
    # The deployment's DGD as the agent read it back; None while it has none.
    applied: AppliedObject | None = None


@dataclass(frozen=True)
class AllocationObservation:
    pod_name: str
    namespace: str
    device_ids: tuple[str, ...]
    resource_name: str


@dataclass(frozen=True)
class NodeObservation:
    node_id: str
    observe_ns: int
    devices: tuple[Device, ...]
    allocations: tuple[AllocationObservation, ...]
    absent: bool = False
    inventory_error: str = ""


DISCOVERED_STATES = ("new", "tracked", "ignored", "promoted")


@dataclass(frozen=True)
class Discovered:
    discovered_id: str
    cluster_id: str
    namespace: str
    name: str
    state: str
    gone: bool
    observation: DiscoveredObservation
    first_seen: float
    last_seen: float
    gone_time: float | None = None
    workload_id: str = ""

    @property
    def ref(self) -> str:
        return f"{self.cluster_id}.{self.namespace}.{self.name}"


@dataclass(frozen=True)
class ObservationBatch:
    seq: int
    deployments: tuple[DeploymentObservation, ...] = ()
    nodes: tuple[NodeObservation, ...] = ()
    discovered: tuple[DiscoveredObservation, ...] = ()
    # Non-zero: `discovered` is the cluster's complete set as observed then (entries missing
    # from it are gone).
    discovered_complete_ns: int = 0
