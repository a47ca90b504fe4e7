"""The hub's domain values: frozen dataclasses the core (store, decisions, service) works with.

Protobuf messages never travel past hub/api and hub/sync: those edges convert to and from these
values (hub/api/convert.py, hub/sync/convert.py). Enum-like fields hold the lower-case words of
the design ("pending", "managed", "vllm"), the same words the REST surface shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

# The serving configuration is one type for hub and agent (common/serving.py).
from common.serving import KvCache as KvCache
from common.serving import Serving as Serving

_Value = TypeVar("_Value")

ENGINES = ("vllm", "sglang", "trtllm")
SERVING_MODES = ("aggregated", "disaggregated")
ROUTER_MODES = ("", "round_robin", "kv")
AUTHORITIES = ("managed", "observed")

# Admission phases, in the order a deployment advances through them ("failed" is apart).
PHASE_PENDING = "pending"
PHASE_ADMITTED = "admitted"
PHASE_PLACED = "placed"
PHASE_RUNNING = "running"
PHASE_FAILED = "failed"
PHASE_ORDER = (PHASE_PENDING, PHASE_ADMITTED, PHASE_PLACED, PHASE_RUNNING)

REASON_NONE = ""
REASON_INSUFFICIENT_QUOTA = "insufficient_quota"
REASON_INSUFFICIENT_CAPACITY = "insufficient_capacity"
REASON_DISABLED = "disabled"
# Its cluster's agent runs read-only and creates nothing: admission admits no replica beyond
# what its pods already are, so it reserves nothing (docs/admission.md "Replicas no agent
# creates"); a read view also says it for an admitted deployment the agent never applied.
REASON_CLUSTER_READ_ONLY = "cluster_read_only"
# An observed (adopted, not handed over) deployment wants more replicas than its pods are: the
# agent never writes it, so admission reserves nothing for them (docs/admission.md).
REASON_OBSERVED = "observed"
# The agent rejected the current generation: derived on read from the rejection (views), the
# way the phase is, never stored as an admission decision.
REASON_REJECTED = "rejected"
# The cluster is cordoned (whole or for the deployment's device class): no new demand there.
REASON_CORDONED = "cordoned"
# Admitted replicas taken back for a higher-priority deployment on the same cluster (decided by
# admission when the hub runs with --preemption; docs/admission.md "Priority and preemption").
REASON_PREEMPTED = "preempted"

# Workload priority classes, lowest first (docs/admission.md): higher ones are admitted first
# and, with preemption on, may take lower ones' devices.
PRIORITIES = ("low", "normal", "high", "critical")
PRIORITY_DEFAULT = "normal"


_RANKS = {priority: rank for rank, priority in enumerate(PRIORITIES)}


def priority_rank(priority: str) -> int:
    """The class's place in PRIORITIES ("" reads as the default)."""
    return _RANKS[priority or PRIORITY_DEFAULT]


TOPOLOGIES = ("", "node", "nvlink_domain")


@dataclass(frozen=True)
class PlacementPreference:
    """One step of the preferences: exactly one of the three is set (docs/placement.md)."""

    clusters: tuple[str, ...] = ()
    cluster_selector: Mapping[str, str] = field(default_factory=dict)
    # cluster id -> static weight: the step's replicas split in proportion.
    weights: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FailoverPolicy:
    """placement.failover (docs/placement.md "Failover and failback"), in seconds."""

    toleration_s: int = 300
    stabilization_s: int = 300


FAILOVER_CAUSES = ("stale", "cordoned", "draining", "placement")
FAILOVER_STATES = ("failed_over", "stays", "recovering", "failed_back", "drained", "moved")


@dataclass(frozen=True)
class FailoverRecord:
    """A failover of one cluster of a workload: its replicas there stand in elsewhere."""

    workload_id: str
    # The lost cluster and its deployment there (kept: nothing is deleted on a lost cluster).
    cluster_id: str
    deployment_id: str
    cause: str
    start_time: float
    # Replicas of that deployment that got stand-ins, and the stand-ins per cluster.
    replicas: int
    stand_ins: Mapping[str, int]
    # Back, uncordoned and its replicas ready since then (failback once stabilized).
    recovered_since: float | None = None
    # Ended (failed back, or drained) at; an ended record is history only.
    end_time: float | None = None
    state: str = "failed_over"
    message: str = ""

    @property
    def active(self) -> bool:
        return self.end_time is None


@dataclass(frozen=True)
class Placement:
    clusters: tuple[str, ...] = ()
    cluster_selector: Mapping[str, str] = field(default_factory=dict)
    # "" (none) | "node" | "nvlink_domain": each replica's devices within one such domain.
    topology: str = ""
    # Ordered: fill the first step, spill to the next. Empty: level over every eligible cluster.
    preferences: tuple[PlacementPreference, ...] = ()
    # None: no failover (a lost cluster's replicas wait for it).
    failover: FailoverPolicy | None = None


@dataclass(frozen=True)
class Project:
    name: str
    quotas: Mapping[str, int]
    create_time: float
    update_time: float
    # A higher-priority deployment of another project may preempt this project's managed
    # deployments (within the project it always may, when the hub runs with --preemption).
    preemptible_by_other_projects: bool = False
    # Kubernetes-style labels (hub/service/validate.py), selected by on lists.
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaUsage:
    used: int
    reserved: int
    limit: int


@dataclass(frozen=True)
class AgentSession:
    session_id: str
    instance: str
    node_name: str
    leader: bool
    agent_version: str
    connect_time: float


@dataclass(frozen=True)
class Maintenance:
    """An admin's maintenance marks on a cluster (docs/placement.md, "Cordon and drain")."""

    # The whole cluster takes no new placements or admissions.
    cordoned: bool = False
    # Only these device classes / nodes take none.
    device_classes: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    # Cordoned, and its managed deployments are being re-placed elsewhere.
    draining: bool = False

    def closed_to(self, device_class: str) -> bool:
        """No new demand of this class may be placed or admitted here."""
        return self.cordoned or self.draining or device_class in self.device_classes

    @property
    def any(self) -> bool:
        return self.cordoned or self.draining or bool(self.device_classes or self.nodes)


@dataclass(frozen=True)
class Cluster:
    cluster_id: str
    labels: Mapping[str, str]
    create_time: float
    desired_revision: int = 0
    applied_revision: int = 0
    last_seen: float | None = None
    agent_version: str = ""
    read_only: bool = False
    agents: tuple[AgentSession, ...] = ()
    leader_term: int = 0
    # The DGD API version its agent writes; "none": none served; "": not reported yet.
    dgd_version: str = ""
    maintenance: Maintenance = field(default_factory=Maintenance)

    @property
    def connected(self) -> bool:
        return bool(self.agents)

    @property
    def never_connected(self) -> bool:
        """No message of its agents recorded and no stream open (views also ask that no node
        was ever reported: ingest may run a moment before liveness is recorded)."""
        return self.last_seen is None and not self.agents


@dataclass(frozen=True)
class Capacity:
    """Devices of one class in one cluster (docs/admission.md)."""

    total: int
    allocated: int
    reserved: int
    unusable: int = 0

    @property
    def free(self) -> int:
        return max(0, self.total - self.allocated - self.reserved)


# A workload's rollout of a serving change in waves (docs/rollouts.md "Waves"); "" when it
# never rolled in waves. The same words name a cluster's place in it (hub/rollout.py).
ROLLOUT_ROLLING = "rolling"
ROLLOUT_PAUSED = "paused"
ROLLOUT_CONVERGED = "converged"
ROLLOUT_ABORTED = "aborted"
ROLLOUT_STATES = ("", ROLLOUT_ROLLING, ROLLOUT_PAUSED, ROLLOUT_CONVERGED, ROLLOUT_ABORTED)
# A deployment's rollout word when nothing rolls yet replicas run another digest (drift).
ROLLOUT_DRIFTED = "drifted"
# A wave not ready on the new digest within this long pauses the rollout (0 in the policy).
DEFAULT_WAVE_DEADLINE_S = 600


@dataclass(frozen=True)
class RolloutPolicy:
    # Clusters that may be changing at once; 0: every cluster at once (no waves).
    max_clusters_in_flight: int = 0
    # Seconds a wave may take to be ready on the new digest; 0: DEFAULT_WAVE_DEADLINE_S.
    wave_deadline_seconds: int = 0

    @property
    def waves(self) -> bool:
        return self.max_clusters_in_flight > 0


@dataclass(frozen=True)
class WorkloadRollout:
    """A serving change rolling out in waves, as the hub keeps it on the workload."""

    state: str = ""
    target_digest: str = ""
    # The config the clusters ran before the change: what waiting clusters keep, and what an
    # abort restores on the clusters already changed.
    previous: Serving | None = None
    previous_digest: str = ""
    # Cluster id -> when the change reached it (its wave started).
    changed_at: Mapping[str, float] = field(default_factory=dict)
    # Why it paused or stopped ("wave_deadline_exceeded", "aborted"), and the details.
    reason: str = ""
    message: str = ""
    start_time: float = 0.0
    update_time: float = 0.0

    @property
    def active(self) -> bool:
        return self.state in (ROLLOUT_ROLLING, ROLLOUT_PAUSED)


@dataclass(frozen=True)
class Workload:
    workload_id: str
    name: str
    project: str
    replicas: int
    device_class: str
    serving: Serving
    placement: Placement
    create_time: float
    update_time: float
    rollout_policy: RolloutPolicy = field(default_factory=RolloutPolicy)
    rollout: WorkloadRollout = field(default_factory=WorkloadRollout)
    # One of PRIORITIES: admission order and preemption (docs/admission.md).
    priority: str = PRIORITY_DEFAULT
    # Kubernetes-style labels (hub/service/validate.py), selected by on lists.
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Deployment:
    """The plane-written half of a deployment."""

    deployment_id: str
    workload_id: str
    workload_name: str
    project: str
    cluster_id: str
    desired_replicas: int
    admitted_replicas: int
    admission_reason: str
    admission_message: str
    generation: int
    authority: str
    enabled: bool
    engine_args: tuple[str, ...]
    imported_args: tuple[str, ...]
    serving: Serving
    serving_digest: str
    device_class: str
    devices_per_replica: int
    revision: int
    create_time: float
    update_time: float
    # Admission order: when the deployment last started waiting (best-effort FIFO).
    pending_since: float = 0.0
    # Extra replicas admitted while a serving change rolls out (docs/rollouts.md).
    surge_replicas: int = 0
    rolling: bool = False
    # An adopted deployment's DGD (not the agent's own) and the discovered entry it came from.
    dgd_namespace: str = ""
    dgd_name: str = ""
    adopted_from: str = ""
    # The workload's topology requirement (read with the deployment; stored on the workload).
    topology: str = ""
    # The workload's priority class (read with the deployment; stored on the workload).
    priority: str = PRIORITY_DEFAULT

    @property
    def name(self) -> str:
        return f"{self.workload_name}.{self.cluster_id}"

    @property
    def adopted(self) -> bool:
        return bool(self.adopted_from)


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
class ReplicaObservation:
    name: str
    namespace: str
    node_id: str
    ready: bool
    serving_digest: str
    engine_version: str
    role: str


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


@dataclass(frozen=True)
class DiscoveredService:
    name: str
    component_type: str
    sub_component_type: str
    replicas: int
    ready_replicas: int
    gpus_per_pod: int
    image: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiscoveredObservation:
    namespace: str
    name: str
    observe_ns: int
    absent: bool = False
    backend_framework: str = ""
    services: tuple[DiscoveredService, ...] = ()
    replicas: int = 0
    ready_replicas: int = 0
    imported_args: tuple[str, ...] = ()
    engine_version: str = ""
    device_class: str = ""
    devices_per_replica: int = 0
    pods: tuple[ReplicaObservation, ...] = ()


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


def evolve(value: _Value, **changes: Any) -> _Value:
    """`dataclasses.replace` for these values, without re-running `__init__`: a copy of the
    instance's fields with `changes` applied. None of them has a `__post_init__`, so the
    result is the same, at a twentieth of the cost; a fleet-wide change evolves every one of
    its 10,000 deployments twice in one transaction."""
    unknown = changes.keys() - _field_names(type(value))
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field(s) {sorted(unknown)}")
    copy = object.__new__(type(value))
    copy.__dict__.update(value.__dict__)
    copy.__dict__.update(changes)
    return copy


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(kind: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = frozenset(f.name for f in fields(kind))
    return names


@dataclass(frozen=True)
class ApiToken:
    """A scoped API token (hub/access.py roles); the hub keeps its secret's hash only."""

    name: str
    role: str
    projects: tuple[str, ...]
    create_time: float
    created_by: str
    revoke_time: float | None = None


@dataclass(frozen=True)
class AuditRecord:
    """One audited event (docs/security.md): a mutating call or an agent's connection event."""

    time: float
    actor: str
    role: str
    edge: str
    action: str
    target: str
    outcome: str
    message: str = ""
    id: int = 0
