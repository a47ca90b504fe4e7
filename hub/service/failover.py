"""Failover, failback and drain, applied: read the workloads' state, decide (hub/failover.py),
commit the plan and run admission, in one write transaction.

`tick` runs about once a second (hub/app/chores.py): it reads first and opens a write transaction
only when some workload's plan changes something, so a quiet fleet costs one read. The use
cases that change what failover looks at call `reconcile` in their own transaction: a cordon
or drain (hub/service/clusters.py) and a workload update (hub/service/workloads.py, which
first `settle`s the workload's stand-ins so its replicas add up again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hub import errors, failover, placement
from hub.model import Cluster, Deployment, FailoverRecord, StatusReport, Workload, evolve
from hub.service import admit, scoped, shares
from hub.service.context import ServiceContext, Tx, snapshot
from hub.store import accounting, clusters, deployments, failovers, observations, workloads
from hub.store.port import Transaction

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Planned:
    workload: Workload
    current: Sequence[Deployment]
    plan: failover.Plan


def tick(ctx: ServiceContext) -> int:
    """Decide for every workload failover concerns; commit only when something changes.
    Returns the number of workloads changed."""
    with snapshot(ctx) as conn:
        pending = [p for p in _plans(ctx, conn, now=ctx.clock()) if not p.plan.empty]
    if not pending:
        return 0
    due = [p.workload.workload_id for p in pending]
    with snapshot(ctx) as conn:
        scope = _reads(conn, due)

    def body(tx: Tx) -> int:
        # Decided again inside the transaction, once the clusters its decisions read are
        # locked: another hub (or a control call) may have acted since the read.
        clusters_now = _reads(tx.conn, due)
        if clusters_now is None:
            scoped.need_covering(tx)
        else:
            scoped.need(tx, clusters_now)
        return reconcile(ctx, tx, due)

    return scoped.write(ctx, scope, body)


def reconcile(ctx: ServiceContext, tx: Tx, workload_ids: Iterable[str] | None = None) -> int:
    """Apply the failover plans of these workloads (None: every workload it concerns) in the
    caller's transaction, then run admission where desired replicas changed."""
    changed = 0
    touched: set[str] = set()
    for planned in _plans(ctx, tx.conn, now=tx.now, workload_ids=workload_ids):
        if planned.plan.empty:
            continue
        changed += 1
        touched |= _apply(tx, planned)
    if touched:
        admit.run(ctx, tx, cluster_ids=touched)
    return changed


def _reads(conn: Transaction, workload_ids: Sequence[str]) -> set[str] | None:
    """The clusters the failover decisions of these workloads read and may write: each one's
    deployments (lost, draining, moving; admission there) and every cluster its placement may
    choose (the sites and rooms of stand-ins). None (the covering lock) when one of them has no
    deployment: no cluster lock guards what is written of it then."""
    wanted = sorted(set(workload_ids))
    having = {d.workload_id for d in deployments.of_workloads(conn, wanted)}
    if any(i not in having and workloads.get(conn, i) is not None for i in wanted):
        return None
    return shares.clusters_read_by(conn, wanted)


def settle(tx: Tx, workload: Workload, current: list[Deployment]) -> list[Deployment]:
    """End the workload's failovers and take their stand-ins out of the deployments' desired
    replicas, so they add up to the workload's replicas again (a workload update reshapes
    its shares, then `reconcile` places stand-ins anew for clusters still lost)."""
    records = [
        r
        for r in failovers.of_workloads(tx.conn, [workload.workload_id]).get(
            workload.workload_id, []
        )
        if r.active
    ]
    if not records:
        return current
    extra: dict[str, int] = {}
    for record in records:
        for cluster_id, count in record.stand_ins.items():
            extra[cluster_id] = extra.get(cluster_id, 0) + count
        failovers.save(
            tx.conn,
            evolve(
                record,
                state="failed_back",
                end_time=tx.now,
                recovered_since=None,
                message="the workload changed: its stand-ins were re-placed",
            ),
        )
    result = []
    for d in current:
        remove = extra.get(d.cluster_id, 0)
        if remove:
            desired = max(0, d.desired_replicas - remove)
            # The stand-ins' admission goes with them: it was granted against the lost
            # replicas' charge (counted once with them), which ends here. Left admitted, a
            # scale-up placed on this cluster would find them "already admitted" and run as
            # ordinary replicas past the quota; stand-ins placed anew below are admitted anew.
            d = evolve(
                d,
                desired_replicas=desired,
                admitted_replicas=min(d.admitted_replicas, desired),
                surge_replicas=min(d.surge_replicas, desired),
                update_time=tx.now,
            )
            d = evolve(d, revision=deployments.save(tx.conn, d))
            tx.touched.add(d.cluster_id)
        result.append(d)
    return result


def moving(tx: Tx, workload: Workload) -> set[str]:
    """The deployments of the workload moving off clusters that left its placement now."""
    records = failovers.of_workloads(tx.conn, [workload.workload_id]).get(workload.workload_id, [])
    return {r.deployment_id for r in records if r.active and r.cause == failover.CAUSE_PLACEMENT}


def leave(
    tx: Tx, workload: Workload, leaving: Sequence[Deployment], added: Mapping[str, int]
) -> None:
    """Deployments on clusters that left the workload's placement go make-before-break, as in
    a drain: the replicas `added` on the eligible clusters (a workload update placed them)
    are their replacements, recorded as their stand-ins (charged to the quota once), and each
    leaving deployment is removed once every cluster holding its replacements runs all its
    replicas ready (hub/failover.py). One that got no replacement (the update also scaled
    down) goes at once."""
    left = dict(added)
    for d in sorted(leaving, key=lambda d: d.cluster_id):
        need, stand_ins = d.desired_replicas, {}
        for cluster_id in sorted(left):
            take = min(need, left[cluster_id])
            if take:
                stand_ins[cluster_id] = take
                left[cluster_id] -= take
                need -= take
        if not stand_ins:
            deployments.delete(tx.conn, d, now=tx.now)
            tx.touched.add(d.cluster_id)
            continue
        failovers.save(
            tx.conn,
            FailoverRecord(
                workload_id=workload.workload_id,
                cluster_id=d.cluster_id,
                deployment_id=d.deployment_id,
                cause=failover.CAUSE_PLACEMENT,
                start_time=tx.now,
                replicas=d.desired_replicas,
                stand_ins=stand_ins,
                state="failed_over",
                message=failover.leaving_message(d.cluster_id, stand_ins),
            ),
        )


def _apply(tx: Tx, planned: _Planned) -> set[str]:
    workload, plan = planned.workload, planned.plan
    by_cluster = {d.cluster_id: d for d in planned.current}
    touched: set[str] = set()
    removed = set(plan.remove)
    for cluster_id, count in sorted(plan.desired.items()):
        existing = by_cluster.get(cluster_id)
        if existing is not None and existing.deployment_id in removed:
            continue
        if existing is None:
            d = shares.new_deployment(workload, cluster_id=cluster_id, replicas=count, now=tx.now)
        else:
            grows = count > max(existing.desired_replicas, existing.admitted_replicas)
            settled = existing.admitted_replicas >= existing.desired_replicas
            d = evolve(
                existing,
                desired_replicas=count,
                update_time=tx.now,
                # A new wait joins the back of the queue (as a scale-up does).
                pending_since=tx.now if grows and settled else existing.pending_since,
            )
        deployments.save(tx.conn, d)
        touched.add(cluster_id)
    for d in planned.current:
        if d.deployment_id in removed:
            deployments.delete(tx.conn, d, now=tx.now)
            touched.add(d.cluster_id)
    for record in plan.records:
        failovers.save(tx.conn, record)
        log.info(
            "failover of workload %s on cluster %s: %s (%s)",
            workload.name,
            record.cluster_id,
            record.state,
            record.message,
        )
    tx.touched |= touched
    return touched


def _plans(
    ctx: ServiceContext,
    conn: Transaction,
    *,
    now: float,
    workload_ids: Iterable[str] | None = None,
) -> list[_Planned]:
    if workload_ids is None:
        # A workload needs a decision only with a failover in progress, or a deployment on a
        # cluster that is stale, cordoned or draining: a healthy fleet reads no workload.
        troubled = accounting.silent_clusters(
            conn, seen_before=now - ctx.settings.stale_after_s
        ) | set(clusters.with_maintenance(conn))
        wanted = set(failovers.active_workloads(conn))
        if troubled:
            wanted |= deployments.workloads_on(conn, sorted(troubled))
        workload_ids = wanted
    # Only workloads failover concerns: a workload update of any other costs two reads.
    asked = sorted(set(workload_ids))
    active = set(failovers.active_workloads_among(conn, asked))
    draining = clusters.draining(conn)
    on_draining = deployments.workloads_on(conn, draining) if draining else set()
    concerned = {}
    for workload_id in asked:
        found = workloads.get(conn, workload_id)
        if found is not None and (
            found.placement.failover is not None
            or workload_id in active
            or workload_id in on_draining
        ):
            concerned[workload_id] = found
    if not concerned:
        return []
    current: dict[str, list[Deployment]] = {}
    for d in deployments.of_workloads(conn, sorted(concerned)):
        current.setdefault(d.workload_id, []).append(d)
    records = failovers.of_workloads(conn, concerned)
    # Explicit placements need only their clusters' rows; a selector needs every label.
    named = {c for w in concerned.values() for c in w.placement.clusters}
    every = any(not w.placement.clusters for w in concerned.values())
    labels = clusters.labels_by_cluster(conn, None if every else named)
    reports = observations.reports(
        conn, [d.deployment_id for found in current.values() for d in found]
    )
    involved = set(labels) | {d.cluster_id for found in current.values() for d in found}
    known = clusters.get_many(conn, involved)
    result = []
    for workload_id, workload in sorted(concerned.items()):
        try:
            eligible = placement.eligible_clusters(workload.placement, labels)
        except errors.InvalidArgument:
            eligible = [c for c in workload.placement.clusters if c in labels]
        present = current.get(workload_id, [])
        sites = {
            cluster_id: _site(ctx, known[cluster_id], workload.device_class, now)
            for cluster_id in {*eligible, *(d.cluster_id for d in present)}
            if cluster_id in known
        }
        state = failover.WorkloadState(
            workload_id=workload_id,
            policy=workload.placement.failover,
            devices_per_replica=workload.serving.devices_per_replica,
            eligible=eligible,
            shares=[_share(d, reports, sites) for d in present],
            records=records.get(workload_id, []),
            steps=placement.resolve_steps(workload.placement.preferences, eligible, labels),
        )
        # Rooms cost three reads: only a new failover places anything.
        active = {r.cluster_id for r in state.records if r.active}
        placing = any(
            d.cluster_id not in active
            and failover.lost_cause(sites.get(d.cluster_id), workload.placement.failover)
            for d in present
        )
        rooms = (
            {r.cluster_id: r for r in shares.rooms(conn, eligible, workload.device_class)}
            if placing
            else {}
        )
        plan = failover.decide(state, sites, rooms, now)
        result.append(_Planned(workload, present, plan))
    return result


def _site(ctx: ServiceContext, cluster: Cluster, device_class: str, now: float) -> failover.Site:
    marks = cluster.maintenance
    if cluster.last_seen is None:
        # Never heard from: not lost for silence (it never went quiet), and no place for
        # stand-ins; a cordon or drain still counts.
        return failover.Site(
            cluster.cluster_id,
            stale=True,
            silent_s=0.0,
            closed=marks.closed_to(device_class),
            draining=marks.draining,
        )
    silent = max(0.0, now - cluster.last_seen)
    return failover.Site(
        cluster_id=cluster.cluster_id,
        stale=silent > ctx.settings.stale_after_s,
        silent_s=silent,
        closed=marks.closed_to(device_class),
        draining=marks.draining,
    )


def _share(
    d: Deployment, reports: Mapping[str, StatusReport | None], sites: Mapping[str, failover.Site]
) -> failover.Share:
    report = reports.get(d.deployment_id)
    site = sites.get(d.cluster_id)
    stale = site is None or site.stale
    ready = 0 if stale or report is None else report.ready_replicas
    return failover.Share(
        deployment_id=d.deployment_id,
        cluster_id=d.cluster_id,
        desired=d.desired_replicas,
        ready=ready,
        movable=d.authority == "managed" and d.enabled and not d.adopted,
        observed_s=None if report is None else report.observe_ns / 1e9,
    )


def records_of(conn: Transaction, workload_ids: Sequence[str]) -> dict[str, list[FailoverRecord]]:
    return failovers.of_workloads(conn, workload_ids)
