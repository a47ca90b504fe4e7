"""The admission pass, `decide`: its steps in order (releases first, shedding an overcommitted
cluster, whole demands by priority and age with preemption, partial shares, surge) and one
demand's decision against the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hub.admission.ledger import Ledger
from hub.admission.preemption import Pass, kept_preempted, without_releasing
from hub.admission.records import AdmissionView, Decision, Demand
from hub.model import (
    REASON_CORDONED,
    REASON_DISABLED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
    REASON_PREEMPTED,
    priority_rank,
)


def decide(demands: Sequence[Demand], view: AdmissionView) -> list[Decision]:
    """One decision per demand: first release the surge of rollouts that ended, then admit
    demands by priority and oldest first, spending quota and capacity as it goes (preempting
    lower-priority deployments when the view allows it), then grant surge to rolling
    deployments from what is left. Deployments of `view.admitted` preempted in the pass get
    a decision too, after those of the demands."""
    ledger = Ledger(view, demands)
    # Demands of one instant (the deployments one call created) in cluster order, not by
    # their random ids: the same call admits the same way every time, so a dry run of it
    # (validate_only, whose ids differ) predicts the real call exactly.
    # What shrinks (a scale-down, a disable) goes first: the room it gives back is there for
    # everyone the pass decides, so no preemption takes a replica that room would have spared.
    ordered = [
        _release_surge(without_releasing(d), ledger)
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
    pass_ = Pass(view, ledger, ordered)
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
        decisions[demand.deployment_id] = kept_preempted(demand, decision, pass_)
    for demand in ordered:
        demand = preempted.get(demand.deployment_id, demand)
        decision = decisions[demand.deployment_id]
        if decision.waiting and decision.admitted_replicas < demand.desired_replicas:
            decision = kept_preempted(demand, _admit_part(demand, decision, ledger), pass_)
            decisions[demand.deployment_id] = decision
    for demand in ordered:
        demand = preempted.get(demand.deployment_id, demand)
        decision = decisions[demand.deployment_id]
        decisions[demand.deployment_id] = _with_surge(demand, decision, ledger)
    result = [_changed(d, _with_share(d, decisions[d.deployment_id])) for d in demands]
    return result + pass_.victims_of_admitted()


def _shed(ordered: list[Demand], view: AdmissionView, ledger: Ledger) -> list[Demand]:
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


def _spend_admitted(demand: Demand, decision: Decision, ledger: Ledger) -> None:
    ledger.spend(
        demand,
        demand.charge(admitted=demand.admitted_replicas, surge=demand.surge_replicas),
        demand.charge(admitted=decision.admitted_replicas, surge=demand.surge_replicas),
    )


def _admit_part(demand: Demand, waiting: Decision, ledger: Ledger) -> Decision:
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


def _release_surge(demand: Demand, ledger: Ledger) -> Demand:
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


def _decide_one(demand: Demand, ledger: Ledger) -> Decision:
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


def _idle(demand: Demand, ledger: Ledger) -> Decision:
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


def _capacity_message(demand: Demand, delta: int, free: int, ledger: Ledger) -> str:
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


def _with_surge(demand: Demand, decision: Decision, ledger: Ledger) -> Decision:
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
