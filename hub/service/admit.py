"""The admission pass: read the view, decide (hub.admission), commit, inside the caller's
write transaction.

Every use case that changes quota, capacity or demand calls `run` before its transaction
commits, scoped to what it touched (clusters and/or projects), so a waiting deployment is
re-evaluated the moment anything it waits on changes, and the decision is committed atomically
with the change that caused it. Passes of concurrent writers, even on other hubs on the same
database, run one after another when they decide for the same project: the pass takes the
admission lock of each project in scope (`port.admission_lock`, in name order, after the
caller's cluster locks: docs/architecture.md "Write locks"). The deployments it changes are
on the clusters in scope, whose locks the caller holds (checked where a revision is bumped);
a cluster's free devices are only taken by passes holding its lock, a project's quota only
by passes holding the project's. Recorded only on SQLite (one writer); advisory locks on
PostgreSQL.

Steps of a pass:
1. list the deployments whose admitted replicas differ from what they should hold;
2. read quota limits, quota charges of their projects, free capacity of their clusters, and
   which of those clusters are stale (they offer no free capacity to new demand);
3. decide, oldest first (pure);
4. write the decisions, batched (two statements for the changed deployments, one for the
   notes, however many were decided: on PostgreSQL each statement is a round trip): a changed
   admitted or surge count is a spec change (one new revision per cluster, the agent is
   told); a changed reason or message is only a note.

With preemption on (Settings.preemption, the hub's --preemption), the view also holds the
admitted managed deployments of the clusters in scope (the possible victims) and the projects
whose policy lets other projects preempt them; a preempted deployment's admitted replicas drop
in the same transaction and it starts waiting (pending_since = now). A pass scoped to projects
(a quota change) then takes every waiting deployment of those projects' clusters, whatever its
project: a higher-priority preemptor waiting there must come first, or the lower-priority
demand would take the room its victims give back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from hub import admission, adoption, tracing
from hub.admission import AdmissionView, Decision, Demand
from hub.model import (
    PRIORITIES,
    REASON_CLUSTER_READ_ONLY,
    REASON_OBSERVED,
    REASON_PREEMPTED,
    Capacity,
    Deployment,
    Maintenance,
    evolve,
    priority_rank,
)
from hub.service import credit
from hub.service.context import AdmissionWait, ServiceContext, Tx
from hub.store import accounting, clusters, deployments, discovered, observations, projects
from hub.store.port import Transaction, admission_lock


def run(
    ctx: ServiceContext,
    tx: Tx,
    *,
    cluster_ids: Iterable[str] | None = None,
    project_names: Iterable[str] | None = None,
    every_on: Iterable[str] = (),
) -> list[Decision]:
    """Re-evaluate waiting deployments in scope (both None: everywhere), and every deployment
    of the clusters `every_on` (whose agent turned read-only or managing: what it creates
    changed) and of read-only clusters in scope, and those reserving on a cluster that holds
    less than it admitted."""
    scope_clusters = None if cluster_ids is None else sorted(set(cluster_ids))
    waiting = deployments.waiting(tx.conn, cluster_ids=scope_clusters)
    # A read-only cluster's deployments are admitted only as far as their pods run: decided
    # again whenever the cluster changes, though none waits (pods that go take their
    # admission with them: nothing will create them again).
    read_only_scope = (
        clusters.read_only_among(tx.conn, scope_clusters) if project_names is None else set()
    )
    everywhere = sorted(set(every_on) | read_only_scope)
    # Only where a cluster's capacity may have changed (a pass scoped to clusters, or
    # everywhere): a pass for a project's quota changes no cluster's devices.
    overcommitted = {} if project_names is not None else _overcommitted(tx, scope_clusters)
    extra = sorted(set(everywhere) | {c for c, _ in overcommitted})
    seen = {d.deployment_id for d in waiting}
    if extra:
        for d in deployments.on_clusters(tx.conn, extra):
            if d.deployment_id not in seen and (
                d.cluster_id in everywhere or (d.cluster_id, d.device_class) in overcommitted
            ):
                waiting.append(d)
                seen.add(d.deployment_id)
    if project_names is None:
        # Observed deployments likewise: what exists of them changes with every report.
        for d in deployments.observed_on(tx.conn, scope_clusters):
            if d.deployment_id not in seen:
                waiting.append(d)
                seen.add(d.deployment_id)
    if project_names is not None:
        wanted = set(project_names)
        if ctx.settings.preemption:
            clusters_of = {d.cluster_id for d in waiting if d.project in wanted}
            waiting = [d for d in waiting if d.cluster_id in clusters_of]
        else:
            waiting = [d for d in waiting if d.project in wanted]
    if not waiting:
        return []
    projects_in_scope = sorted({d.project for d in waiting})
    # Its decisions read the quota charges of these projects on every cluster: one pass per
    # project at a time, fleet-wide (the clusters in scope are the caller's, already locked).
    for project in projects_in_scope:
        tx.conn.serialize(admission_lock(project))
    clusters_in_scope = sorted({d.cluster_id for d in waiting})
    credits = credit.read(tx.conn, projects_in_scope)
    view = _view(
        ctx,
        tx,
        projects_in_scope=projects_in_scope,
        clusters_in_scope=clusters_in_scope,
        credits=credits,
    )
    waiting_ids = {d.deployment_id for d in waiting}
    # Possible victims: only on clusters where a demand above the lowest class wants more
    # replicas (none of the lowest class can preempt, none of the highest be preempted).
    victims: list[Deployment] = []
    contested = sorted(
        {
            d.cluster_id
            for d in waiting
            if d.enabled
            and d.desired_replicas > d.admitted_replicas
            and priority_rank(d.priority) > 0
        }
    )
    if ctx.settings.preemption and contested:
        victims = [
            d
            for d in deployments.admitted_managed(tx.conn, contested)
            if d.deployment_id not in waiting_ids
            and priority_rank(d.priority) < len(PRIORITIES) - 1
        ]
    held = accounting.held_by_deployment(
        tx.conn, [d.deployment_id for d in waiting] + [d.deployment_id for d in victims]
    )
    read_only = {
        c.cluster_id for c in clusters.get_many(tx.conn, clusters_in_scope).values() if c.read_only
    }
    # What an observed deployment's DGD asks for, as the cluster reports it: Dynamo keeps
    # those replicas. (On a read-only cluster only running pods count: a report there may
    # predate the agent turning read-only.)
    idle = [d.deployment_id for d in waiting if d.authority != "managed"]
    reported = (
        {
            key: report.applied_replicas
            for key, report in observations.reports(tx.conn, idle).items()
            if report is not None and not report.absent
        }
        if idle
        else {}
    )
    # Not reported yet (just promoted): the DGD as it was found, with the replicas it had.
    for d in waiting:
        if d.authority != "managed" and d.deployment_id not in reported and d.adopted_from:
            found = discovered.get(tx.conn, d.adopted_from)
            if found is not None:
                reported[d.deployment_id] = adoption.shape(found.observation).replicas
    demands = [_demand(d, held, credits, read_only, reported) for d in waiting]
    view = replace(view, overcommitted=overcommitted)
    if ctx.settings.preemption:
        view = replace(
            view,
            preemption=True,
            admitted=[_demand(d, held, credits, read_only, {}) for d in victims],
            preemptible_projects=projects.preemptible_by_others(tx.conn),
        )
    with tracing.tracer().start_as_current_span("admission") as span:
        decisions = admission.decide(demands, view)
        by_id = {d.deployment_id: d for d in [*waiting, *victims]}
        _commit(tx, [(by_id[decision.deployment_id], decision) for decision in decisions])
        span.set_attribute("wingsmith.admission.evaluated", len(decisions))
        span.set_attribute(
            "wingsmith.admission.admitted",
            sorted(d.deployment_id for d in decisions if d.changed and not d.waiting)[:100],
        )
    ctx.hooks.admission_decided(decisions)
    waits = _waits(tx, by_id, decisions)
    if waits:
        tx.committed.append(lambda: ctx.hooks.admission_waited(waits))
    return decisions


def _waits(
    tx: Tx, by_id: Mapping[str, Deployment], decisions: Iterable[Decision]
) -> list[AdmissionWait]:
    """Deployments this pass gave more replicas, and how long each had waited for them
    (Kueue's admission wait time: from when it started waiting until admitted)."""
    waits = []
    for decision in decisions:
        current = by_id[decision.deployment_id]
        if decision.admitted_replicas > current.admitted_replicas:
            seconds = max(0.0, tx.now - current.pending_since)
            waits.append(AdmissionWait(current.project, current.device_class, seconds))
    return waits


_NO_ROLE = credit.Role("", "")


def _overcommitted(tx: Tx, cluster_ids: list[str] | None) -> dict[tuple[str, str], int]:
    """(cluster, class) -> devices allocated and reserved beyond the verified total, where a
    cluster came back with fewer devices than it had admitted."""
    return accounting.overcommitted(tx.conn, cluster_ids)


def _idle(d: Deployment, read_only: set[str]) -> tuple[str, str]:
    """Why no agent will create this deployment's replicas ("" when one will)."""
    if d.authority != "managed":
        return (
            REASON_OBSERVED,
            f"deployment {d.workload_name}.{d.cluster_id} is observed: the agent never creates"
            " its replicas, so none is admitted beyond those that run (the replicas drift"
            " shows the difference); hand it over (POST /v1/deployments/"
            f"{d.workload_name}.{d.cluster_id}/authority, authority managed) to have them run",
        )
    if d.cluster_id in read_only:
        return (
            REASON_CLUSTER_READ_ONLY,
            f"cluster {d.cluster_id}'s agent runs read-only: it applies nothing, so no replica"
            " is admitted (nor devices reserved) beyond those that run; restart the agent"
            " managing (without --read-only or HANGAR_OPERATOR_READ_ONLY) to run it",
        )
    return "", ""


def _demand(
    d: Deployment,
    held: Mapping[str, int],
    credits: credit.Credits,
    read_only: set[str],
    reported: Mapping[str, int],
) -> Demand:
    role = credits.roles.get(d.deployment_id, _NO_ROLE)
    idle_reason, idle_message = _idle(d, read_only)
    running = held.get(d.deployment_id, 0) // d.devices_per_replica if d.devices_per_replica else 0
    # Replicas that exist without our agent: its pods, and (observed) those its DGD asks for
    # as the cluster reports it (Dynamo keeps them), or as it was found before any report.
    exists = max(running, reported.get(d.deployment_id, 0))
    return Demand(
        deployment_id=d.deployment_id,
        project=d.project,
        cluster_id=d.cluster_id,
        device_class=d.device_class,
        devices_per_replica=d.devices_per_replica,
        desired_replicas=d.desired_replicas,
        admitted_replicas=d.admitted_replicas,
        enabled=d.enabled,
        pending_since=d.pending_since,
        held=held.get(d.deployment_id, 0),
        rolling=d.rolling,
        surge_replicas=d.surge_replicas,
        reason=d.admission_reason,
        cover=role.cover,
        cover_role=role.role,
        base_replicas=role.base_replicas,
        stand_in_replicas=role.stand_in_replicas,
        message=d.admission_message,
        priority=d.priority,
        workload_id=d.workload_id,
        workload_name=d.workload_name,
        managed=d.authority == "managed",
        idle_reason=idle_reason,
        idle_message=idle_message,
        exists=exists,
    )


def _view(
    ctx: ServiceContext,
    tx: Tx,
    *,
    projects_in_scope: list[str],
    clusters_in_scope: list[str],
    credits: credit.Credits,
) -> AdmissionView:
    charges = accounting.quota_charges(tx.conn, projects_in_scope)
    capacity = accounting.capacities(tx.conn, clusters_in_scope)
    stale = accounting.silent_clusters(
        tx.conn, seen_before=tx.now - ctx.settings.stale_after_s, cluster_ids=clusters_in_scope
    )
    unheard = accounting.unheard_clusters(tx.conn, clusters_in_scope)
    marks = clusters.maintenance_of(tx.conn, clusters_in_scope)
    return AdmissionView(
        quota_limits=projects.quota_limits(tx.conn),
        # A replica and its failover stand-in count once (hub/service/credit.py).
        quota_charged={
            key: used + reserved - credits.credit.get(key, 0)
            for key, (used, reserved) in charges.items()
        },
        cluster_free=open_free(tx.conn, capacity, marks),
        stale_clusters=frozenset(stale),
        unheard_clusters=frozenset(unheard),
        cordoned_clusters=frozenset(c for c, m in marks.items() if m.cordoned or m.draining),
        cordoned_classes=frozenset(
            (c, device_class) for c, m in marks.items() for device_class in m.device_classes
        ),
        covers=credits.covers,
    )


def open_free(
    conn: Transaction,
    capacity: Mapping[tuple[str, str], Capacity],
    marks: Mapping[str, Maintenance],
) -> dict[tuple[str, str], int]:
    """Free devices per (cluster, class) that new demand may take: a cordoned node's idle
    devices are left out (placement and admission both read this)."""
    idle = accounting.cordoned_idle(conn, {c: m.nodes for c, m in marks.items() if m.nodes})
    return {key: max(0, cap.free - idle.get(key, 0)) for key, cap in capacity.items()}


def _commit(tx: Tx, decided: Iterable[tuple[Deployment, Decision]]) -> None:
    """Write the pass's decisions in batches (a statement each would be a round trip each on
    PostgreSQL): a changed admitted or surge count is a spec change, saved with a new
    revision of its cluster; a changed reason or message only a note."""
    changed: list[Deployment] = []
    notes: list[tuple[str, str, str]] = []
    for current, decision in decided:
        if (decision.admitted_replicas, decision.surge_replicas) != (
            current.admitted_replicas,
            current.surge_replicas,
        ):
            newly_preempted = (
                decision.reason == REASON_PREEMPTED
                and decision.admitted_replicas < current.admitted_replicas
            )
            changed.append(
                evolve(
                    current,
                    admitted_replicas=decision.admitted_replicas,
                    surge_replicas=decision.surge_replicas,
                    admission_reason=decision.reason,
                    admission_message=decision.message,
                    # A preempted deployment starts waiting now: the back of the queue.
                    pending_since=tx.now if newly_preempted else current.pending_since,
                    update_time=tx.now,
                )
            )
        elif (decision.reason, decision.message) != (
            current.admission_reason,
            current.admission_message,
        ):
            notes.append((current.deployment_id, decision.reason, decision.message))
    deployments.save_many(tx.conn, changed)
    deployments.set_admission_notes(tx.conn, notes)
    tx.touched.update(d.cluster_id for d in changed)
