"""Preemption in an admission pass: the lower-priority deployments a demand waiting on
capacity may take whole replicas back from, which it takes, and what a preempted deployment
says while it waits (the rules: hub/admission/__init__.py "Preemption")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from hub.admission.ledger import Ledger
from hub.admission.records import AdmissionView, Decision, Demand
from hub.model import (
    REASON_INSUFFICIENT_CAPACITY,
    REASON_NONE,
    REASON_PREEMPTED,
    priority_rank,
)


class Pass:
    """Preemption's state over one pass: who was preempted, and by whom."""

    def __init__(self, view: AdmissionView, ledger: Ledger, demands: Sequence[Demand]) -> None:
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
        self.preempted[victim.deployment_id] = without_releasing(after)
        return _admitted_devices(victim) - admitted * per_replica


def _admitted_devices(demand: Demand) -> int:
    return (demand.admitted_replicas + demand.surge_replicas) * demand.devices_per_replica


def without_releasing(demand: Demand) -> Demand:
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
    demand: Demand, ledger: Ledger, *, quota_left: int, room: int, start: int
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


def kept_preempted(demand: Demand, decision: Decision, pass_: Pass) -> Decision:
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
