"""Admission's records: the demands a pass decides, the view of quota and capacity it reads,
and the decisions it returns (hub/admission/__init__.py says the rules). Values only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hub.model import PRIORITY_DEFAULT, REASON_DISABLED, REASON_NONE

QuotaKey = tuple[str, str]  # (project, device class)
CapacityKey = tuple[str, str]  # (cluster id, device class)


@dataclass(frozen=True)
class Demand:
    deployment_id: str
    project: str
    cluster_id: str
    device_class: str
    devices_per_replica: int
    desired_replicas: int
    admitted_replicas: int
    enabled: bool
    pending_since: float
    # Devices its pods hold now (an adopted deployment holds them before any admission).
    held: int = 0
    rolling: bool = False
    surge_replicas: int = 0
    # The reason the deployment holds now ("" when none yet): a decision that keeps the
    # replicas and the reason changes nothing (Decision.changed).
    reason: str = ""
    # Failover (hub/failover.py): the cover (AdmissionView.covers) this deployment belongs to,
    # as the "lost" deployment or as a "stand_in" host; a host's first base_replicas are its
    # own, the next stand_in_replicas stand in for the lost one.
    cover: str = ""
    cover_role: str = ""
    base_replicas: int = 0
    stand_in_replicas: int = 0
    # The message it holds now: a preempted deployment keeps the one naming its preemptor.
    message: str = ""
    # Preemption: the workload's priority class and identity, and whether the hub may take
    # its replicas back at all (an observed deployment: never).
    priority: str = PRIORITY_DEFAULT
    workload_id: str = ""
    workload_name: str = ""
    managed: bool = True
    # Set when no agent of ours will create its replicas (an observed deployment; a cluster
    # whose agent runs read-only): the reason and message it then waits with. It is admitted
    # no further than `exists`, so nothing is reserved for replicas that never will be.
    idle_reason: str = ""
    idle_message: str = ""
    # With idle_reason: the replicas that exist without our agent creating any (its pods,
    # and those its DGD asks for as the cluster reports it: Dynamo keeps them).
    exists: int = 0

    def charge(self, *, admitted: int, surge: int) -> int:
        return max((admitted + surge) * self.devices_per_replica, self.held)

    def releasing(self) -> int:
        """Devices its pods hold beyond what it is admitted: going, once it was preempted."""
        admitted = (self.admitted_replicas + self.surge_replicas) * self.devices_per_replica
        return max(0, self.held - admitted)


@dataclass(frozen=True)
class Cover:
    """A workload's failovers, for the quota: a replica and its stand-in are charged once.

    The project is charged max(lost, stand_in) for the pair rather than the sum: `lost` is the
    charge of the lost deployments (devices), `stand_in` that of the stand-in replicas of the
    hosts. AdmissionView.quota_charged already counts the pair once."""

    lost: int
    stand_in: int


@dataclass(frozen=True)
class AdmissionView:
    """Quota and capacity as they stand, read in the deciding transaction."""

    quota_limits: Mapping[QuotaKey, int]
    quota_charged: Mapping[QuotaKey, int]
    cluster_free: Mapping[CapacityKey, int]
    # Clusters silent past the grace period: they offer no free device to a new admission
    # (their last report may be long false), but keep what they hold (docs/admission.md).
    stale_clusters: frozenset[str] = frozenset()
    # Clusters no agent ever connected for: nothing known, so the message says that.
    unheard_clusters: frozenset[str] = frozenset()
    # Cordoned (or draining) clusters, and (cluster, class) pairs cordoned for one class: like
    # a stale cluster they offer no free device to new demand and keep what they hold.
    # (A cordoned node's idle devices are already left out of cluster_free.)
    cordoned_clusters: frozenset[str] = frozenset()
    cordoned_classes: frozenset[CapacityKey] = frozenset()
    # Failovers' quota credits, by Demand.cover.
    covers: Mapping[str, Cover] = field(default_factory=dict)
    # Preemption on (the hub's --preemption); off, nothing below is looked at.
    preemption: bool = False
    # Admitted deployments that wait for nothing, on the clusters in scope: the possible
    # victims besides the waiting demands themselves.
    admitted: Sequence[Demand] = ()
    # Projects whose policy lets another project's higher-priority workload preempt them.
    preemptible_projects: frozenset[str] = frozenset()
    # (cluster, class) -> devices allocated + reserved beyond the verified total: a cluster
    # that came back smaller than what it had admitted. The pass takes admitted replicas that
    # are only reserved back (lowest priority, most recently admitted first) until it fits.
    overcommitted: Mapping[CapacityKey, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    deployment_id: str
    admitted_replicas: int
    reason: str
    message: str
    surge_replicas: int = 0
    # The admitted or surge replicas or the reason differ from what the deployment held: a
    # re-evaluation that leaves a waiting deployment waiting for the same reason is not a change.
    changed: bool = True

    @property
    def waiting(self) -> bool:
        return self.reason not in (REASON_NONE, REASON_DISABLED)
