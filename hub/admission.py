"""Admission: which deployments' demand fits quota and capacity. Pure.

hub/service/admission.py reads an `AdmissionView` and the waiting `Demand`s inside one write
transaction, calls `decide`, and commits the decisions in that same transaction, so two
admissions can never both spend the same quota or the same free device (docs/admission.md).

Accounting, per device class:
- A deployment *charges* max((admitted + surge replicas) x devices_per_replica, devices it
  holds in live allocations): `used` (allocated) plus `reserved` (admitted, not yet allocated).
- A project's quota is spent by the charges of its deployments: admit only if the charge after
  admitting still fits the limit (charged + delta <= limit).
- A cluster's free devices = verified healthy devices - allocated devices (anyone's pods) -
  reservations of admitted deployments. Admit only if delta <= free.
- Demand is first tried whole: the delta (desired - admitted replicas, less what the deployment
  already holds) is admitted whole or waits, so that a demand that fits whole is never cut
  short by an older one that does not. Then, once every whole demand had its turn, a second
  pass admits to each waiting deployment, oldest first, as many whole replicas as quota and
  capacity still allow: whenever some of its replicas could run, some do, and the rest wait as
  its own pending share (reason and message say for what). Admitted replicas keep running
  while the rest waits.
- Scale-downs and disabled deployments release at once (they need no check).
- A stale cluster (silent past the grace period) offers no free device: new demand there waits
  on insufficient_capacity, saying the cluster is stale; what it already admitted stays.
- A cordoned cluster (or one cordoned for the demand's class) likewise offers no free device
  to new demand, which waits on `cordoned`; a cordoned node's idle devices are not free.
- A cluster no agent ever connected for has reported no device: demand there waits on
  insufficient_capacity saying so, not "0 free" (that would claim a count nobody reported).
- A rolling deployment may also get *surge* replicas, so old and new run side by side: as many
  as quota and capacity allow, up to its admitted replicas, granted after every regular demand
  of the pass (a rollout never takes room a waiting deployment could use). With no surge the
  rollout replaces old replicas in place (docs/rollouts.md): it is never blocked.

Order: best-effort FIFO. Demands are considered oldest first (pending_since); one that does not
fit does not block a later, smaller one that does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from hub.model import (
    REASON_CORDONED,
    REASON_DISABLED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
)

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

    def charge(self, *, admitted: int, surge: int) -> int:
        return max((admitted + surge) * self.devices_per_replica, self.held)


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


class _Ledger:
    """Quota charged and capacity free, spent as the pass admits."""

    def __init__(self, view: AdmissionView) -> None:
        self.limits = view.quota_limits
        self.charged = dict(view.quota_charged)
        self.free = dict(view.cluster_free)
        self.stale = view.stale_clusters
        self.unheard = view.unheard_clusters
        self.cordoned = view.cordoned_clusters
        self.cordoned_classes = view.cordoned_classes
        self.covers = {key: [c.lost, c.stand_in] for key, c in view.covers.items()}

    def closed(self, demand: Demand) -> bool:
        """Cordoned for this demand: it takes nothing new, whatever it has free."""
        return (
            demand.cluster_id in self.cordoned
            or (demand.cluster_id, demand.device_class) in self.cordoned_classes
        )

    def headroom(self, demand: Demand) -> tuple[int | None, int]:
        """(quota left or None when the class has no quota, free devices: none on a stale
        cluster, even what a scale-down in this pass gave back)."""
        key = (demand.project, demand.device_class)
        limit = self.limits.get(key)
        quota_left = None if limit is None else limit - self.charged.get(key, 0)
        if demand.cluster_id in self.stale or self.closed(demand):
            return quota_left, 0
        return quota_left, self.free.get((demand.cluster_id, demand.device_class), 0)

    def quota_cost(self, demand: Demand, before: int, after: int) -> int:
        """What moving the demand's charge from `before` to `after` devices costs the
        project's quota: the difference, except that a failover's pair (a lost replica and its
        stand-in) is charged once, the larger of the two (Cover)."""
        cover = self.covers.get(demand.cover) if demand.cover else None
        if cover is None:
            return after - before
        lost, stand_in = cover
        if demand.cover_role == "lost":
            return max(lost + after - before, stand_in) - max(lost, stand_in)
        moved = _portion(demand, after) - _portion(demand, before)
        return (after - before - moved) + max(lost, stand_in + moved) - max(lost, stand_in)

    def spend(self, demand: Demand, before: int, after: int) -> None:
        """Move the demand's charge from `before` to `after` devices (after < before: give
        back what a scale-down or release frees)."""
        if before == after:
            return
        quota_key = (demand.project, demand.device_class)
        capacity_key = (demand.cluster_id, demand.device_class)
        self.charged[quota_key] = self.charged.get(quota_key, 0) + self.quota_cost(
            demand, before, after
        )
        self.free[capacity_key] = self.free.get(capacity_key, 0) - (after - before)
        cover = self.covers.get(demand.cover) if demand.cover else None
        if cover is not None:
            if demand.cover_role == "lost":
                cover[0] += after - before
            else:
                cover[1] += _portion(demand, after) - _portion(demand, before)


def _portion(demand: Demand, charge: int) -> int:
    """The part of a stand-in host's charge that stands in for a lost cluster's replicas."""
    own = demand.base_replicas * demand.devices_per_replica
    return max(0, min(charge - own, demand.stand_in_replicas * demand.devices_per_replica))


def decide(demands: Sequence[Demand], view: AdmissionView) -> list[Decision]:
    """One decision per demand: first release the surge of rollouts that ended, then admit
    demands oldest first, spending quota and capacity as it goes, then grant surge to rolling
    deployments from what is left."""
    ledger = _Ledger(view)
    # Demands of one instant (the deployments one call created) in cluster order, not by
    # their random ids: the same call admits the same way every time, so a dry run of it
    # (validate_only, whose ids differ) predicts the real call exactly.
    ordered = [
        _release_surge(d, ledger)
        for d in sorted(demands, key=lambda d: (d.pending_since, d.cluster_id, d.deployment_id))
    ]
    decisions = {}
    for demand in ordered:
        decision = _decide_one(demand, ledger)
        _spend_admitted(demand, decision, ledger)
        decisions[demand.deployment_id] = decision
    for demand in ordered:
        decision = decisions[demand.deployment_id]
        if decision.waiting and decision.admitted_replicas < demand.desired_replicas:
            decision = _admit_part(demand, decision, ledger)
            decisions[demand.deployment_id] = decision
    for demand in ordered:
        decision = decisions[demand.deployment_id]
        decisions[demand.deployment_id] = _with_surge(demand, decision, ledger)
    return [_changed(d, _with_share(d, decisions[d.deployment_id])) for d in demands]


def _spend_admitted(demand: Demand, decision: Decision, ledger: _Ledger) -> None:
    ledger.spend(
        demand,
        demand.charge(admitted=demand.admitted_replicas, surge=demand.surge_replicas),
        demand.charge(admitted=decision.admitted_replicas, surge=demand.surge_replicas),
    )


def _admit_part(demand: Demand, waiting: Decision, ledger: _Ledger) -> Decision:
    """As many more whole replicas of a waiting demand as quota and capacity allow now; the
    rest keeps waiting, with the reason and message of what it still waits for."""
    admitted = waiting.admitted_replicas
    while admitted < demand.desired_replicas:
        quota_left, free = ledger.headroom(demand)
        if quota_left is None:
            break
        before = demand.charge(admitted=admitted, surge=demand.surge_replicas)
        after = demand.charge(admitted=admitted + 1, surge=demand.surge_replicas)
        if ledger.quota_cost(demand, before, after) > quota_left or after - before > free:
            break
        ledger.spend(demand, before, after)
        admitted += 1
    if admitted == waiting.admitted_replicas:
        return waiting
    return _decide_one(replace(demand, admitted_replicas=admitted), ledger)


def _with_share(demand: Demand, decision: Decision) -> Decision:
    """A deployment with replicas admitted and others waiting says so, in every pass (a
    partial admission, a scale-up that waits), before what the rest waits for."""
    admitted, desired = decision.admitted_replicas, demand.desired_replicas
    if not decision.waiting or not 0 < admitted < desired:
        return decision
    waits = desired - admitted
    return replace(
        decision,
        message=f"{admitted} of {desired} replicas admitted; the other {waits}"
        f" {'waits' if waits == 1 else 'wait'}: {decision.message}",
    )


def _changed(demand: Demand, decision: Decision) -> Decision:
    held = (demand.admitted_replicas, demand.surge_replicas, demand.reason)
    decided = (decision.admitted_replicas, decision.surge_replicas, decision.reason)
    return replace(decision, changed=held != decided)


def _release_surge(demand: Demand, ledger: _Ledger) -> Demand:
    """A deployment no longer rolling (or disabled) gives its surge back before anyone asks."""
    if not demand.surge_replicas or (demand.rolling and demand.enabled):
        return demand
    admitted = demand.admitted_replicas
    ledger.spend(
        demand,
        demand.charge(admitted=admitted, surge=demand.surge_replicas),
        demand.charge(admitted=admitted, surge=0),
    )
    return replace(demand, surge_replicas=0)


def _decide_one(demand: Demand, ledger: _Ledger) -> Decision:
    if not demand.enabled:
        return Decision(demand.deployment_id, 0, REASON_DISABLED, "deployment is disabled")
    if demand.desired_replicas <= demand.admitted_replicas:
        return Decision(demand.deployment_id, demand.desired_replicas, REASON_NONE, "")
    before = demand.charge(admitted=demand.admitted_replicas, surge=demand.surge_replicas)
    after = demand.charge(admitted=demand.desired_replicas, surge=demand.surge_replicas)
    delta = after - before
    cost = ledger.quota_cost(demand, before, after)
    quota_left, free = ledger.headroom(demand)
    if quota_left is None:
        return Decision(
            demand.deployment_id,
            demand.admitted_replicas,
            REASON_INSUFFICIENT_QUOTA,
            f"project {demand.project} has no quota for {demand.device_class}",
        )
    if cost > quota_left:
        limit = ledger.limits[(demand.project, demand.device_class)]
        return Decision(
            demand.deployment_id,
            demand.admitted_replicas,
            REASON_INSUFFICIENT_QUOTA,
            f"needs {delta} {demand.device_class}; project {demand.project} has "
            f"{max(0, quota_left)} of {limit} left",
        )
    if delta > free:
        return Decision(
            demand.deployment_id,
            demand.admitted_replicas,
            REASON_CORDONED if ledger.closed(demand) else REASON_INSUFFICIENT_CAPACITY,
            _capacity_message(demand, delta, free, ledger),
        )
    return Decision(demand.deployment_id, demand.desired_replicas, REASON_NONE, "")


def _capacity_message(demand: Demand, delta: int, free: int, ledger: _Ledger) -> str:
    needs = f"needs {delta} {demand.device_class}"
    cluster = demand.cluster_id
    if cluster in ledger.unheard:
        return (
            f"{needs}; no agent of cluster {cluster} has ever connected: nothing can run there"
            " until one does"
        )
    if ledger.closed(demand):
        scope = "" if cluster in ledger.cordoned else f" for {demand.device_class}"
        return (
            f"{needs}; cluster {cluster} is cordoned{scope}: it takes no new placements until"
            f" it is uncordoned (wingsmith uncordon cluster {cluster})"
        )
    if cluster in ledger.stale:
        return (
            f"{needs}; cluster {cluster} is stale (no report within the grace period): it takes"
            " no new admissions until its agent reports again"
        )
    return f"{needs}; cluster {cluster} has {max(0, free)} free"


def _with_surge(demand: Demand, decision: Decision, ledger: _Ledger) -> Decision:
    """Grant, keep or release surge replicas for a rollout (never more than admitted)."""
    admitted = decision.admitted_replicas
    surge = 0
    if demand.rolling and demand.enabled and admitted > 0:
        surge = min(demand.surge_replicas, admitted)
        ledger.spend(
            demand,
            demand.charge(admitted=admitted, surge=demand.surge_replicas),
            demand.charge(admitted=admitted, surge=surge),
        )
        while surge < admitted:
            quota_left, free = ledger.headroom(demand)
            if quota_left is None:
                break
            before = demand.charge(admitted=admitted, surge=surge)
            after = demand.charge(admitted=admitted, surge=surge + 1)
            if ledger.quota_cost(demand, before, after) > quota_left or after - before > free:
                break
            ledger.spend(demand, before, after)
            surge += 1
    else:
        ledger.spend(
            demand,
            demand.charge(admitted=admitted, surge=demand.surge_replicas),
            demand.charge(admitted=admitted, surge=0),
        )
    return Decision(decision.deployment_id, admitted, decision.reason, decision.message, surge)
