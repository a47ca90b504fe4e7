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

- A deployment whose replicas no agent of ours creates (observed; on a read-only cluster: the
  demand's idle_reason) is admitted no further than the replicas that exist without it (its
  pods, and what its DGD asks for as the cluster reports it), so nothing is reserved for
  replicas that never will; the rest waits with that reason (docs/admission.md "Replicas no
  agent creates").
- A cluster holding fewer devices than it admitted (back smaller: view.overcommitted) first
  sheds admitted replicas that are only reserved, lowest priority and most recently admitted
  first, until it fits; they wait on insufficient_capacity.

Order: higher priority first, then best-effort FIFO. Demands are considered by priority class
(hub.model.PRIORITIES, highest first), then oldest first (pending_since); one that does not fit
does not block a later, smaller one that does. With every workload at the default priority this
is plain FIFO.

Preemption (only when the view says it is on: the hub's --preemption): a demand that fits its
quota but not the cluster's free devices may take whole replicas back from *managed*, enabled
deployments of the same device class on that cluster whose workload has a strictly lower
priority, of the same project, or of a project whose policy lets other projects preempt it;
never an observed deployment, never its own workload. Victims are chosen lowest priority first,
then the most recently admitted, and only as many replicas as the demand needs (none at all
when even every eligible victim would not make one more of its replicas fit). A victim's
admitted replicas drop (its surge goes), it waits with reason `preempted` and a message naming
the preemptor, and is re-admitted when room returns, like any waiting demand. Devices its pods
still hold are *releasing*: the preemptor waits for them (it claims them for this pass, and is
first in the next one by its priority) instead of preempting again, and the victim itself does
not count them as room. Surge for a rollout never preempts: a rollout takes only free room, so
a preemption never costs the preemptor's workload a ready replica.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from hub.model import (
    PRIORITY_DEFAULT,
    REASON_CORDONED,
    REASON_DISABLED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
    REASON_PREEMPTED,
    priority_rank,
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


class _Ledger:
    """Quota charged and capacity free, spent as the pass admits."""

    def __init__(self, view: AdmissionView, demands: Sequence[Demand]) -> None:
        self.limits = view.quota_limits
        self.charged = dict(view.quota_charged)
        self.free = dict(view.cluster_free)
        self.stale = view.stale_clusters
        self.unheard = view.unheard_clusters
        self.cordoned = view.cordoned_clusters
        self.cordoned_classes = view.cordoned_classes
        self.covers = {key: [c.lost, c.stand_in] for key, c in view.covers.items()}
        # An overcommitted cluster starts below zero: shedding its reservations brings it back.
        for key, over in view.overcommitted.items():
            self.free[key] = -over
        # Devices that preempted deployments' pods still hold, per cluster and class: they
        # come free as the pods go, and a preemptor waits for them rather than preempting more.
        self.releasing: dict[CapacityKey, int] = {}
        for d in demands:
            if d.reason == REASON_PREEMPTED and d.releasing():
                key = (d.cluster_id, d.device_class)
                self.releasing[key] = self.releasing.get(key, 0) + d.releasing()

    def closed(self, demand: Demand) -> bool:
        """Cordoned for this demand: it takes nothing new, whatever it has free."""
        return (
            demand.cluster_id in self.cordoned
            or (demand.cluster_id, demand.device_class) in self.cordoned_classes
        )

    def claim(self, demand: Demand, *, free: int, releasing: int) -> None:
        """Hold room for a preemptor for the rest of this pass: capacity only, no quota."""
        key = (demand.cluster_id, demand.device_class)
        self.free[key] = self.free.get(key, 0) - free
        self.releasing[key] = self.releasing.get(key, 0) - releasing

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
    demands by priority and oldest first, spending quota and capacity as it goes (preempting
    lower-priority deployments when the view allows it), then grant surge to rolling
    deployments from what is left. Deployments of `view.admitted` preempted in the pass get
    a decision too, after those of the demands."""
    ledger = _Ledger(view, demands)
    # Demands of one instant (the deployments one call created) in cluster order, not by
    # their random ids: the same call admits the same way every time, so a dry run of it
    # (validate_only, whose ids differ) predicts the real call exactly.
    # What shrinks (a scale-down, a disable) goes first: the room it gives back is there for
    # everyone the pass decides, so no preemption takes a replica that room would have spared.
    ordered = [
        _release_surge(_without_releasing(d), ledger)
        for d in sorted(
            demands,
            key=lambda d: (
                d.enabled and d.desired_replicas >= d.admitted_replicas,
                -priority_rank(d.priority),
                d.pending_since,
                d.cluster_id,
                d.deployment_id,
            ),
        )
    ]
    ordered = _shed(ordered, view, ledger)
    pass_ = _Pass(view, ledger, ordered)
    # Demands as this pass left them (fewer admitted replicas once preempted): read inline,
    # three times per demand.
    preempted = pass_.preempted
    decisions = {}
    for demand in ordered:
        demand = preempted.get(demand.deployment_id, demand)
        decision = _decide_one(demand, ledger)
        if view.preemption and decision.reason == REASON_INSUFFICIENT_CAPACITY:
            decision = pass_.preempt(demand, decision)
        _spend_admitted(demand, decision, ledger)
        decisions[demand.deployment_id] = _kept_preempted(demand, decision, pass_)
    for demand in ordered:
        demand = preempted.get(demand.deployment_id, demand)
        decision = decisions[demand.deployment_id]
        if decision.waiting and decision.admitted_replicas < demand.desired_replicas:
            decision = _kept_preempted(demand, _admit_part(demand, decision, ledger), pass_)
            decisions[demand.deployment_id] = decision
    for demand in ordered:
        demand = preempted.get(demand.deployment_id, demand)
        decision = decisions[demand.deployment_id]
        decisions[demand.deployment_id] = _with_surge(demand, decision, ledger)
    result = [_changed(d, _with_share(d, decisions[d.deployment_id])) for d in demands]
    return result + pass_.victims_of_admitted()


class _Pass:
    """Preemption's state over one pass: who was preempted, and by whom."""

    def __init__(self, view: AdmissionView, ledger: _Ledger, demands: Sequence[Demand]) -> None:
        self.view = view
        self.ledger = ledger
        self.waiting_ids = {d.deployment_id for d in demands}
        # Every possible victim as the pass found it (the demands and the admitted).
        self.original: dict[str, Demand] = {d.deployment_id: d for d in view.admitted}
        self.original.update({d.deployment_id: d for d in demands})
        self.preempted: dict[str, Demand] = {}

    def current(self, demand: Demand) -> Demand:
        """A deployment as this pass left it: fewer admitted replicas once preempted."""
        return self.preempted.get(demand.deployment_id, demand)

    def victims_of_admitted(self) -> list[Decision]:
        """Decisions for the admitted deployments (not among the demands) preempted."""
        return [
            Decision(v.deployment_id, v.admitted_replicas, REASON_PREEMPTED, v.message, 0)
            for v in self.preempted.values()
            if v.deployment_id not in self.waiting_ids
        ]

    def _candidates(self, demand: Demand) -> list[Demand]:
        rank = priority_rank(demand.priority)
        found = [
            self.current(v)
            for v in self.original.values()
            if v.cluster_id == demand.cluster_id
            and v.device_class == demand.device_class
            and v.managed
            and v.enabled
            and v.workload_id != demand.workload_id
            and v.deployment_id != demand.deployment_id
            and priority_rank(v.priority) < rank
            and (v.project == demand.project or v.project in self.view.preemptible_projects)
        ]
        found = [v for v in found if v.admitted_replicas > 0]
        # Lowest priority first, then the most recently admitted.
        found.sort(key=lambda v: (priority_rank(v.priority), -v.pending_since, v.deployment_id))
        return found

    def preempt(self, demand: Demand, waiting: Decision) -> Decision:
        """Make room for `demand` (waiting on capacity) by taking replicas back from
        lower-priority deployments; the decision for `demand` after it (not yet spent)."""
        ledger = self.ledger
        if (
            demand.cluster_id in ledger.stale
            or demand.cluster_id in ledger.unheard
            or ledger.closed(demand)
        ):
            return waiting
        quota_left, free = ledger.headroom(demand)
        if quota_left is None:
            return waiting
        start = demand.admitted_replicas
        key = (demand.cluster_id, demand.device_class)
        releasing = max(0, ledger.releasing.get(key, 0))
        candidates = self._candidates(demand)
        # What every candidate would give back once its pods are gone (its admitted and
        # surge replicas: devices held beyond them, an autoscaler's, may well stay).
        reclaimable = sum(_admitted_devices(v) for v in candidates)
        target = _replicas_within(
            demand, ledger, quota_left=quota_left, room=free + releasing + reclaimable, start=start
        )
        wanted = _step(demand, start, target)
        if wanted <= free:
            # Free devices alone give it all it could get: the partial pass admits them.
            return waiting
        need = wanted - free - releasing
        for victim in candidates:
            if need <= 0:
                break
            need -= self._take(victim, demand, need)
        # Admit now whatever fits in what is free after the victims' reservations went; the
        # rest of the target is claimed from free and releasing devices for this pass, so no
        # lower-priority demand later in the pass takes it.
        quota_left, free = ledger.headroom(demand)
        now = min(
            target,
            _replicas_within(demand, ledger, quota_left=quota_left or 0, room=free, start=start),
        )
        rest = wanted - _step(demand, start, now)
        from_free = max(0, min(free - _step(demand, start, now), rest))
        ledger.claim(demand, free=from_free, releasing=rest - from_free)
        if now >= demand.desired_replicas:
            return Decision(demand.deployment_id, now, REASON_NONE, "")
        return Decision(
            demand.deployment_id,
            now,
            REASON_INSUFFICIENT_CAPACITY,
            f"needs {_step(demand, now, demand.desired_replicas)} {demand.device_class};"
            f" cluster {demand.cluster_id} has {from_free} free and {rest - from_free} being"
            " released by lower-priority deployments preempted for it",
        )

    def _take(self, victim: Demand, preemptor: Demand, need: int) -> int:
        """Take whole replicas back from `victim` (its surge first) until `need` devices will
        come free, or none is left; returns the devices that will come free."""
        per_replica = victim.devices_per_replica
        before = victim.charge(admitted=victim.admitted_replicas, surge=victim.surge_replicas)
        admitted = victim.admitted_replicas
        while admitted > 0 and _admitted_devices(victim) - admitted * per_replica < need:
            admitted -= 1
        had = self.original[victim.deployment_id].admitted_replicas
        what = (
            f"{had - admitted} of its {had} admitted {'replica' if had == 1 else 'replicas'}"
            if admitted < had
            else "its rollout's surge"
        )
        message = (
            f"{what} preempted by {preemptor.workload_name or preemptor.deployment_id}"
            f" (priority {preemptor.priority}, project {preemptor.project}) on cluster"
            f" {victim.cluster_id}; it waits until room returns"
        )
        after = replace(
            victim,
            admitted_replicas=admitted,
            surge_replicas=0,
            reason=REASON_PREEMPTED,
            message=message,
        )
        # Its reservation goes at once; devices its pods hold go as the pods do (releasing).
        charge_after = after.charge(admitted=admitted, surge=0)
        self.ledger.spend(victim, before, charge_after)
        key = (victim.cluster_id, victim.device_class)
        self.ledger.releasing[key] = (
            self.ledger.releasing.get(key, 0) + charge_after - admitted * per_replica
        )
        self.preempted[victim.deployment_id] = _without_releasing(after)
        return _admitted_devices(victim) - admitted * per_replica


def _shed(ordered: list[Demand], view: AdmissionView, ledger: _Ledger) -> list[Demand]:
    """On a cluster that holds fewer devices than it has admitted (it came back smaller), take
    back admitted replicas whose devices are only reserved, lowest priority and most recently
    admitted first, until what is allocated and reserved fits what the cluster has. Replicas
    whose pods run keep their devices; the rest wait on insufficient_capacity."""
    over = {key: n for key, n in view.overcommitted.items() if n > 0}
    if not over:
        return ordered
    shed: dict[str, Demand] = {}
    for demand in sorted(
        ordered,
        key=lambda d: (priority_rank(d.priority), -d.pending_since, d.deployment_id),
    ):
        key = (demand.cluster_id, demand.device_class)
        if over.get(key, 0) <= 0 or not demand.enabled or not demand.devices_per_replica:
            continue
        floor = -(-demand.held // demand.devices_per_replica)  # replicas its pods are
        admitted, surge = demand.admitted_replicas, demand.surge_replicas
        while over[key] > 0 and (surge > 0 or admitted > floor):
            before = demand.charge(admitted=admitted, surge=surge)
            if surge > 0:
                surge -= 1
            else:
                admitted -= 1
            after = demand.charge(admitted=admitted, surge=surge)
            ledger.spend(demand, before, after)
            over[key] -= before - after
        if (admitted, surge) != (demand.admitted_replicas, demand.surge_replicas):
            shed[demand.deployment_id] = replace(
                demand, admitted_replicas=admitted, surge_replicas=surge
            )
    return [shed.get(d.deployment_id, d) for d in ordered]


def _admitted_devices(demand: Demand) -> int:
    return (demand.admitted_replicas + demand.surge_replicas) * demand.devices_per_replica


def _without_releasing(demand: Demand) -> Demand:
    """A preempted deployment's pods hold devices that are going to its preemptor: they do
    not count as room for itself (its replicas come back only with devices free besides
    them). The ledger keeps charging what it really holds; only its own steps see less."""
    if demand.reason != REASON_PREEMPTED:
        return demand
    admitted = (demand.admitted_replicas + demand.surge_replicas) * demand.devices_per_replica
    return replace(demand, held=min(demand.held, admitted))


def _step(demand: Demand, start: int, end: int) -> int:
    """Devices going from `start` to `end` admitted replicas adds to its charge."""
    return demand.charge(admitted=end, surge=demand.surge_replicas) - demand.charge(
        admitted=start, surge=demand.surge_replicas
    )


def _replicas_within(
    demand: Demand, ledger: _Ledger, *, quota_left: int, room: int, start: int
) -> int:
    """The most admitted replicas (from `start`, up to desired) whose extra charge fits
    `quota_left` (as the quota counts it) and `room` devices."""
    before = demand.charge(admitted=start, surge=demand.surge_replicas)
    admitted = start
    while admitted < demand.desired_replicas:
        after = demand.charge(admitted=admitted + 1, surge=demand.surge_replicas)
        if after - before > room or ledger.quota_cost(demand, before, after) > quota_left:
            break
        admitted += 1
    return admitted


def _kept_preempted(demand: Demand, decision: Decision, pass_: _Pass) -> Decision:
    """A preempted deployment waiting with nothing new admitted keeps its reason and the
    message naming its preemptor (a later pass would only say "0 free"): whatever else it
    waits for in the pass that preempted it, and in later passes while it waits on capacity
    (a quota it now waits on, say, is then the news)."""
    if not (demand.reason == REASON_PREEMPTED and decision.waiting):
        return decision
    if decision.admitted_replicas <= demand.admitted_replicas and (
        decision.reason == REASON_INSUFFICIENT_CAPACITY or demand.deployment_id in pass_.preempted
    ):
        return replace(decision, reason=REASON_PREEMPTED, message=demand.message)
    if decision.reason == REASON_INSUFFICIENT_CAPACITY:
        # Partly admitted again: the part still waiting is the preempted part, and says so
        # (issue 20: it once read insufficient_capacity, as if never preempted).
        admitted, desired = decision.admitted_replicas, demand.desired_replicas
        waits = desired - admitted
        return replace(
            decision,
            reason=REASON_PREEMPTED,
            message=f"{admitted} of {desired} replicas admitted again; the other {waits}"
            f" {'waits' if waits == 1 else 'wait'}: {_SHARE_SAID.sub('', demand.message)}",
        )
    return decision


# The share a partly readmitted victim's message starts with (said again, not nested).
_SHARE_SAID = re.compile(r"^\d+ of \d+ replicas admitted again; the other \d+ waits?: ")


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
    while admitted < demand.desired_replicas and not demand.idle_reason:
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
    if decision.reason == REASON_PREEMPTED:
        return decision  # its message says how many replicas went, and why
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
    if demand.idle_reason:
        return _idle(demand, ledger)
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


def _idle(demand: Demand, ledger: _Ledger) -> Decision:
    """No agent of ours creates its replicas: admitted (quota and capacity as usual) only as
    far as replicas exist without it, so nothing is reserved for replicas that never will;
    the rest waits saying why."""
    capped = replace(
        demand,
        desired_replicas=min(demand.desired_replicas, demand.exists),
        idle_reason="",
    )
    decision = _decide_one(capped, ledger)
    if decision.waiting or capped.desired_replicas >= demand.desired_replicas:
        return decision
    return Decision(
        demand.deployment_id, decision.admitted_replicas, demand.idle_reason, demand.idle_message
    )


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
    if demand.rolling and demand.enabled and admitted > 0 and not demand.idle_reason:
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
