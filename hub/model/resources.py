"""The control plane's resources, the plane-written half: projects and their quotas, clusters
and their capacity and maintenance, workloads with their placement, failovers and rollouts, and
deployments as the hub decides them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from common.serving import Serving
from hub.model.words import PRIORITY_DEFAULT


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
