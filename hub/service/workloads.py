"""Workloads: create (placement into deployments, then admission), read, update, delete.

A workload is expanded into one deployment per cluster placement chose (hub/placement.py);
each deployment then waits for admission (hub/service/admit.py) in the same transaction.
Updates keep existing shares where they can: only added replicas are placed, removed ones are
taken from unadmitted demand first, and a serving change bumps a deployment's generation only
when its serving digest changes: on every deployment at once, or wave by wave when the
workload has a rollout policy (hub/service/rollouts.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hub import errors, placement, serving
from hub.model import (
    Deployment,
    Placement,
    RolloutPolicy,
    Serving,
    Workload,
    evolve,
)
from hub.service import (
    admit,
    dryrun,
    failover,
    rollouts,
    scoped,
    selectors,
    shares,
    validate,
    views,
    workload_checks,
)
from hub.service.context import ServiceContext, Tx, snapshot
from hub.store import (
    clusters,
    deployments,
    discovered,
    failovers,
    projects,
    workloads,
)
from hub.store.port import Transaction, project_lock

MAX_WORKLOAD_NAME = 40


@dataclass(frozen=True)
class WorkloadSpec:
    """What a user asks for; validated and normalized by `create`."""

    name: str
    project: str
    replicas: int
    device_class: str
    serving: Serving
    placement: Placement
    rollout_policy: RolloutPolicy = field(default_factory=RolloutPolicy)
    # One of hub.model.PRIORITIES; "" is the default (normal).
    priority: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkloadChange:
    """An update: None leaves the field as it is."""

    replicas: int | None = None
    serving: Serving | None = None
    placement: Placement | None = None
    rollout_policy: RolloutPolicy | None = None
    priority: str | None = None
    labels: Mapping[str, str] | None = None


def create(ctx: ServiceContext, spec: WorkloadSpec) -> views.WorkloadView:
    spec = _valid_spec(spec)
    # Scoped to the clusters its placement may choose (`_create` checks them again) and its
    # project's lock: no other write of the fleet waits for it (docs/architecture.md "Write
    # locks"). Its name is unique by the table's unique index, whatever hub inserts it.
    workload_id = scoped.write(
        ctx, _create_scope(ctx, spec.placement), lambda tx: _create(ctx, tx, spec)
    )
    # Commit and publish first: a view of every deployment can take long for a fleet-wide
    # workload, and the agents should not wait for it.
    return get(ctx, workload_id)


def preview_create(ctx: ServiceContext, spec: WorkloadSpec) -> dryrun.DryRun:
    """What `create` would do (validate_only), writing nothing."""
    spec = _valid_spec(spec)
    return dryrun.preview(ctx, lambda c, tx: _create(c, tx, spec), workload_ref="")


def _valid_spec(spec: WorkloadSpec) -> WorkloadSpec:
    validate.dns_label(spec.name, "workload.name", max_length=MAX_WORKLOAD_NAME)
    validate.dns_label(spec.project, "workload.project")
    validate.device_class(spec.device_class, "workload.device_class")
    validate.replicas(spec.replicas, "workload.replicas")
    return replace(
        spec,
        serving=serving.normalize(spec.serving, field="workload.serving"),
        placement=workload_checks.valid_placement(spec.placement),
        rollout_policy=workload_checks.valid_rollout_policy(spec.rollout_policy),
        priority=validate.priority(spec.priority, "workload.priority"),
        labels=validate.labels(spec.labels, "workload.labels"),
    )


def _create(ctx: ServiceContext, tx: Tx, spec: WorkloadSpec) -> str:
    normalized, wanted, policy = spec.serving, spec.placement, spec.rollout_policy
    # The project's lock first: it orders this create with a change of the project's quota,
    # which reads where the project has deployments (this write adds some where it may have
    # none: hub/service/projects.py), and with the project's deletion, so the project read
    # next is still there when the workload is inserted.
    tx.conn.serialize(project_lock(spec.project))
    if projects.get(tx.conn, spec.project) is None:
        # NOT_FOUND, as for a token naming one: a well-formed name of nothing is no bad
        # argument (docs/rest.md "The contract": a request the document allows is never 400).
        raise errors.NotFound("project", spec.project)
    workload = Workload(
        workload_id="wl_" + secrets.token_hex(8),
        name=spec.name,
        project=spec.project,
        replicas=spec.replicas,
        device_class=spec.device_class,
        serving=normalized,
        placement=wanted,
        create_time=tx.now,
        update_time=tx.now,
        rollout_policy=policy,
        priority=spec.priority,
        labels=spec.labels,
    )
    eligible = _eligible(tx.conn, wanted)
    placement.check_named_clusters(wanted.preferences, eligible, workload_checks.PREFERENCES_FIELD)
    # Before anything is written: placement reads the rooms of every eligible cluster, and
    # admission decides there (else run again with them: WiderScope).
    scoped.need(tx, eligible)
    workloads.insert(tx.conn, workload)
    shares = placement.place(
        replicas=workload.replicas,
        devices_per_replica=normalized.devices_per_replica,
        rooms=_rooms(tx.conn, eligible, workload.device_class),
        steps=_steps(tx.conn, wanted, eligible),
    )
    for cluster_id, share in sorted(shares.items()):
        if share > 0:
            _save(tx, _new_deployment(workload, cluster_id=cluster_id, replicas=share, now=tx.now))
    admit.run(ctx, tx, cluster_ids=eligible)
    return workload.workload_id


def get(ctx: ServiceContext, ref: str) -> views.WorkloadView:
    with snapshot(ctx) as conn:
        return _view(ctx, conn, ref)


def spec(ctx: ServiceContext, ref: str) -> Workload:
    """The stored workload alone, without its deployments' views."""
    with snapshot(ctx) as conn:
        return _get(conn, ref)


def list_page(
    ctx: ServiceContext,
    *,
    project: str,
    page_size: int,
    page_token: str,
    projects: frozenset[str] | None = None,
    label_selector: str = "",
) -> tuple[list[views.WorkloadView], str]:
    """A page of workloads (of `project`; only of `projects` when given: a scoped token's;
    only those `label_selector` matches, selected before the page is cut)."""
    limit, after = validate.page(page_size, page_token)
    selector = selectors.parse(label_selector)
    with snapshot(ctx) as conn:
        found = workloads.list_page(
            conn, after=after, limit=limit, project=project, projects=projects, selector=selector
        )
        grouped: dict[str, list[Deployment]] = {}
        for d in deployments.of_workloads(conn, [w.workload_id for w in found]):
            grouped.setdefault(d.workload_id, []).append(d)
        all_views = views.deployment_views(
            ctx, conn, [d for group in grouped.values() for d in group]
        )
        by_workload: dict[str, list[views.DeploymentView]] = {}
        for view in all_views:
            by_workload.setdefault(view.deployment.workload_id, []).append(view)
        records = failovers.of_workloads(conn, [w.workload_id for w in found])
        result = [
            views.workload_view(
                w, by_workload.get(w.workload_id, []), records.get(w.workload_id, [])
            )
            for w in found
        ]
    return result, validate.next_token([w.name for w in found], limit)


def update(ctx: ServiceContext, ref: str, change: WorkloadChange) -> views.WorkloadView:
    change = _valid_change(change)
    # Scoped to the clusters its decision reads and writes (the workload's deployments and
    # every cluster its old or new placement may choose): `_update` checks them again.
    workload_id = scoped.write(
        ctx, _scope(ctx, ref, change.placement), lambda tx: _update(ctx, tx, ref, change)
    )
    return get(ctx, workload_id)


def preview_update(ctx: ServiceContext, ref: str, change: WorkloadChange) -> dryrun.DryRun:
    """What `update` would do (validate_only), writing nothing."""
    change = _valid_change(change)
    return dryrun.preview(ctx, lambda c, tx: _update(c, tx, ref, change), workload_ref=ref)


def _valid_change(change: WorkloadChange) -> WorkloadChange:
    if change.replicas is not None:
        validate.replicas(change.replicas, "workload.replicas")
    return replace(
        change,
        serving=(
            serving.normalize(change.serving, field="workload.serving") if change.serving else None
        ),
        placement=workload_checks.valid_placement(change.placement) if change.placement else None,
        rollout_policy=(
            workload_checks.valid_rollout_policy(change.rollout_policy)
            if change.rollout_policy is not None
            else None
        ),
        priority=(
            validate.priority(change.priority, "workload.priority")
            if change.priority is not None
            else None
        ),
        labels=(
            validate.labels(change.labels, "workload.labels") if change.labels is not None else None
        ),
    )


def _update(ctx: ServiceContext, tx: Tx, ref: str, change: WorkloadChange) -> str:
    new_serving, new_placement = change.serving, change.placement
    new_policy = change.rollout_policy
    workload = before = _get(tx.conn, ref)
    current = deployments.of_workload(tx.conn, workload.workload_id)
    _need(tx, workload, current, new_placement)
    # Before anything moves: a placement change would drop the adopted deployment (and
    # with it the DGD it was found as) or render a second copy elsewhere.
    adopted = [d for d in current if d.adopted]
    if adopted:
        _check_adopted_change(workload, adopted, new_serving, new_placement)
    # Deployments already moving off a cluster that left the placement: they go on moving.
    moving = failover.moving(tx, workload)
    # Stand-ins out first, so the shares add up to the workload's replicas; failover
    # places them again below for clusters still lost (docs/placement.md).
    current = failover.settle(tx, workload, current)
    involved = {d.cluster_id for d in current}
    leaving: list[Deployment] = []
    if new_placement is not None:
        workload = replace(workload, placement=new_placement)
        eligible = _eligible(tx.conn, new_placement)
        placement.check_named_clusters(
            new_placement.preferences, eligible, workload_checks.PREFERENCES_FIELD
        )
        involved |= set(eligible)
        current, leaving = _drop_ineligible(tx, current, eligible)
    elif moving:
        # Any other update during a move (a scale, a serving change): the move goes on,
        # its replacements placed again with the new shape.
        eligible = _eligible(tx.conn, workload.placement)
        leaving = [d for d in current if d.deployment_id in moving and d.cluster_id not in eligible]
        current = [d for d in current if d not in leaving]
    if new_serving is not None and new_serving.devices_per_replica != (
        workload.serving.devices_per_replica
    ):
        raise errors.InvalidArgument(
            "workload.serving",
            "changing devices per replica (parallelism or disaggregated workers) needs a new"
            " workload: admission and placement were decided per replica size",
        )
    if new_serving is not None:
        workload = replace(workload, serving=new_serving)
    if change.replicas is not None:
        workload = replace(workload, replicas=change.replicas)
    if new_policy is not None:
        workload = replace(workload, rollout_policy=new_policy)
    if change.priority is not None:
        # Its deployments read it with the workload; admission below re-orders and may
        # preempt by it.
        workload = replace(workload, priority=change.priority)
    if change.labels is not None:
        workload = replace(workload, labels=change.labels)
    workload = replace(workload, update_time=tx.now)
    workloads.update(tx.conn, workload)
    eligible = _eligible(tx.conn, workload.placement)
    shares_before = {d.cluster_id: d.desired_replicas for d in current}
    # Replicas of deployments leaving the placement are placed again on the eligible
    # clusters here, like any new replica; the leaving ones keep running meanwhile.
    current = _rescale(tx, workload, current, eligible)
    if leaving:
        added = {
            d.cluster_id: d.desired_replicas - shares_before.get(d.cluster_id, 0)
            for d in current
            if d.desired_replicas > shares_before.get(d.cluster_id, 0)
        }
        failover.leave(tx, workload, leaving, added)
    # At once, or in waves (a rollout kept on the workload): hub/service/rollouts.py.
    rollouts.apply_change(ctx, tx, before, workload, current)
    involved |= {d.cluster_id for d in current}
    failover.reconcile(ctx, tx, [workload.workload_id])
    admit.run(ctx, tx, cluster_ids=involved)
    return workload.workload_id


def delete(ctx: ServiceContext, ref: str) -> None:
    scoped.write(ctx, _scope(ctx, ref, None), lambda tx: _delete(ctx, tx, ref))


def preview_delete(ctx: ServiceContext, ref: str) -> dryrun.DryRun:
    """What `delete` would do (validate_only), writing nothing."""
    return dryrun.preview(ctx, lambda c, tx: _delete(c, tx, ref), workload_ref=ref)


def _delete(ctx: ServiceContext, tx: Tx, ref: str) -> str:
    workload = _get(tx.conn, ref)
    current = deployments.of_workload(tx.conn, workload.workload_id)
    _need(tx, workload, current, None)
    for d in current:
        deployments.delete(tx.conn, d, now=tx.now)
        tx.touched.add(d.cluster_id)
    workloads.delete(tx.conn, workload.workload_id)
    discovered.release_workload(tx.conn, workload.workload_id)
    # Released reservations may let waiting deployments in.
    admit.run(ctx, tx, cluster_ids={d.cluster_id for d in current})
    return workload.workload_id


# -- scope ------------------------------------------------------------------------------------


def _create_scope(ctx: ServiceContext, wanted: Placement) -> set[str]:
    """The clusters a create with this placement is expected to lock (every cluster it may
    choose), read from a snapshot; checked again inside the write (`_create`). Clusters'
    labels and registrations change only under the covering lock, so the set read there holds
    for the whole write once its scoped locks are taken."""
    with snapshot(ctx) as conn:
        labels = clusters.labels_by_cluster(conn, wanted.clusters or None)
    try:
        return set(placement.eligible_clusters(wanted, labels))
    except errors.InvalidArgument:
        return set()  # none eligible: the create says so inside, before anything is written


def _scope(ctx: ServiceContext, ref: str, new_placement: Placement | None) -> set[str] | None:
    """The clusters an update or delete of the workload is expected to lock, read from a
    snapshot (None: the covering lock); checked again inside the write by `_need`."""
    with snapshot(ctx) as conn:
        workload = workloads.get(conn, ref)
        if workload is None:
            return set()  # NotFound inside, before anything is written
        current = deployments.of_workload(conn, workload.workload_id)
        if not current:
            return None
        return _reads(conn, workload, current, new_placement)


def _reads(
    conn: Transaction,
    workload: Workload,
    current: Sequence[Deployment],
    new_placement: Placement | None,
) -> set[str]:
    return shares.reads(conn, workload, current, new_placement)


def clusters_read_by(conn: Transaction, workload_ids: Iterable[str]) -> set[str]:
    """The clusters a change of these workloads reads and may write (`shares.clusters_read_by`),
    for a call that reconciles them (cordon, drain, uncordon of a cluster they run on:
    hub/service/clusters.py)."""
    return shares.clusters_read_by(conn, workload_ids)


def _need(
    tx: Tx, workload: Workload, current: Sequence[Deployment], new_placement: Placement | None
) -> None:
    """Before anything is written: the transaction holds the locks of every cluster the change
    reads (else it runs again with them: WiderScope). A workload with no deployment has no
    cluster lock guarding its own row against a concurrent change of it: covering."""
    if not current:
        scoped.need_covering(tx)
    scoped.need(tx, _reads(tx.conn, workload, current, new_placement))


# -- steps ------------------------------------------------------------------------------------


def _drop_ineligible(
    tx: Tx, current: list[Deployment], eligible: Sequence[str]
) -> tuple[list[Deployment], list[Deployment]]:
    """(the deployments on eligible clusters, those leaving make-before-break). A managed,
    enabled deployment with replicas on a cluster that left the placement keeps running until
    its replacements elsewhere do, as in a drain (hub/failover.py); any other is deleted now
    (nothing of it runs, or Wingsmith does not manage it)."""
    keep, leaving = [], []
    for d in current:
        if d.cluster_id in eligible:
            keep.append(d)
        elif d.authority == "managed" and d.enabled and not d.adopted and d.desired_replicas:
            leaving.append(d)
        else:
            deployments.delete(tx.conn, d, now=tx.now)
            tx.touched.add(d.cluster_id)
    return keep, leaving


def _rescale(
    tx: Tx, workload: Workload, current: list[Deployment], eligible: Sequence[str]
) -> list[Deployment]:
    """Make the deployments' desired replicas add up to the workload's replicas."""
    placed = sum(d.desired_replicas for d in current)
    by_cluster = {d.cluster_id: d for d in current}
    if workload.replicas == placed:
        return current
    steps = _steps(tx.conn, workload.placement, eligible)
    if workload.replicas > placed:
        shares = placement.place(
            replicas=workload.replicas - placed,
            devices_per_replica=workload.serving.devices_per_replica,
            rooms=_rooms(tx.conn, eligible, workload.device_class),
            existing={d.cluster_id: d.desired_replicas for d in current},
            steps=steps,
        )
    else:
        shares = placement.shrink(
            shares=[
                placement.Share(d.cluster_id, d.desired_replicas, d.admitted_replicas)
                for d in current
            ],
            remove=placed - workload.replicas,
            steps=steps,
        )
    result = []
    for cluster_id, share in sorted(shares.items()):
        existing = by_cluster.get(cluster_id)
        if existing is None:
            if share > 0:
                result.append(
                    _save(
                        tx,
                        _new_deployment(
                            workload, cluster_id=cluster_id, replicas=share, now=tx.now
                        ),
                    )
                )
            continue
        if share == existing.desired_replicas:
            result.append(existing)
            continue
        grows_demand = share > max(existing.desired_replicas, existing.admitted_replicas)
        was_settled = existing.admitted_replicas >= existing.desired_replicas
        result.append(
            _save(
                tx,
                replace(
                    existing,
                    desired_replicas=share,
                    update_time=tx.now,
                    # A new wait joins the back of the queue; an older wait keeps its place.
                    pending_since=tx.now
                    if grows_demand and was_settled
                    else existing.pending_since,
                ),
            )
        )
    return result


def _check_adopted_change(
    workload: Workload,
    adopted: Sequence[Deployment],
    new_serving: Serving | None,
    new_placement: Placement | None,
) -> None:
    """An adopted workload stays on the cluster it was found on, with the cluster's own pod
    template: Wingsmith enforces its replicas and, once set, engine_args as the worker's args;
    nothing else can change (docs/adoption.md). Checked against the stored workload."""
    if new_placement is not None and new_placement != workload.placement:
        found_on = ", ".join(sorted({d.cluster_id for d in adopted}))
        raise errors.FailedPrecondition(
            f"workload {workload.name} was adopted from cluster {found_on} and is pinned to it",
            [
                "its placement cannot change: moving it would delete the DGD it was found as,"
                " or run the model twice",
                "to serve the model elsewhere, create a new workload: Wingsmith renders that"
                " one wherever its placement says",
            ],
        )
    if new_serving is None:
        return
    if replace(new_serving, engine_args=()) != replace(workload.serving, engine_args=()):
        raise errors.FailedPrecondition(
            f"workload {workload.name} was adopted: its pod template is the cluster's",
            [
                "change engine_args (the worker's args) or replicas",
                "to change anything else, create a workload Wingsmith renders",
            ],
        )


def _new_deployment(
    workload: Workload, *, cluster_id: str, replicas: int, now: float
) -> Deployment:
    return shares.new_deployment(workload, cluster_id=cluster_id, replicas=replicas, now=now)


def _save(tx: Tx, deployment: Deployment) -> Deployment:
    tx.touched.add(deployment.cluster_id)
    return evolve(deployment, revision=deployments.save(tx.conn, deployment))


def _eligible(conn: Transaction, wanted: Placement) -> list[str]:
    # An explicit list needs only those clusters' rows, not every cluster's labels.
    labels = clusters.labels_by_cluster(conn, wanted.clusters or None)
    eligible = placement.eligible_clusters(wanted, labels)
    if not eligible:
        raise errors.InvalidArgument(
            "workload.placement",
            "no cluster matches: register a cluster or change the selector",
        )
    return eligible


def _steps(conn: Transaction, wanted: Placement, eligible: Sequence[str]) -> list[placement.Step]:
    """The preferences as ordered steps; [] (no preferences) keeps today's levelling."""
    if not wanted.preferences:
        return []
    needs_labels = any(pref.cluster_selector for pref in wanted.preferences)
    labels = clusters.labels_by_cluster(conn, list(eligible)) if needs_labels else {}
    return placement.resolve_steps(wanted.preferences, eligible, labels)


def _rooms(
    conn: Transaction, eligible: Sequence[str], device_class: str
) -> list[placement.ClusterRoom]:
    return shares.rooms(conn, eligible, device_class)


def _get(conn: Transaction, ref: str) -> Workload:
    workload = workloads.get(conn, ref)
    if workload is None:
        raise errors.NotFound("workload", ref)
    return workload


def _view(ctx: ServiceContext, conn: Transaction, ref: str) -> views.WorkloadView:
    workload = _get(conn, ref)
    found = deployments.of_workload(conn, workload.workload_id)
    records = failovers.of_workloads(conn, [workload.workload_id]).get(workload.workload_id, [])
    return views.workload_view(workload, views.deployment_views(ctx, conn, found), records)
