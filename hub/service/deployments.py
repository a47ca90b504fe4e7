"""Deployments: read, list, and enable or disable."""

from __future__ import annotations

from dataclasses import replace

from hub import errors
from hub.filters import DeploymentFilter
from hub.model import PHASE_FAILED, PHASE_ORDER, AppliedObject, Deployment
from hub.service import admit, dryrun, scoped, validate, views
from hub.service.context import ServiceContext, Tx, snapshot
from hub.store import deployments, observations, workloads
from hub.store.port import Transaction


def get(ctx: ServiceContext, ref: str) -> views.DeploymentView:
    with snapshot(ctx) as conn:
        return views.deployment_views(ctx, conn, [_get(conn, ref)])[0]


def applied_object(ctx: ServiceContext, ref: str) -> AppliedObject:
    """The object the agent applied for the deployment, with its body; NotFound until its
    agent reported one (docs/rendering.md)."""
    with snapshot(ctx) as conn:
        deployment = _get(conn, ref)
        found = observations.applied_objects(conn, [deployment.deployment_id], with_body=True)
    applied = found.get(deployment.deployment_id)
    if applied is None:
        raise errors.NotFound(
            "applied object of deployment", f"{ref} (its agent has not reported one yet)"
        )
    return applied


def project_of(ctx: ServiceContext, deployment_id: str) -> str:
    """The project of a deployment; "" when it is gone (a replica outliving it)."""
    with snapshot(ctx) as conn:
        found = deployments.get(conn, deployment_id)
    return found.project if found is not None else ""


def list_page(
    ctx: ServiceContext, *, where: DeploymentFilter, page_size: int, page_token: str
) -> tuple[list[views.DeploymentView], str]:
    limit, after = validate.page(page_size, page_token)
    with snapshot(ctx) as conn:
        if where.workload_id:
            workload = workloads.get(conn, where.workload_id)
            if workload is None or (
                where.projects is not None and workload.project not in where.projects
            ):
                # Another project's workload reads as none to a scoped token (hub/access.py).
                raise errors.NotFound("workload", where.workload_id)
            where = replace(where, workload_id=workload.workload_id)
        found = deployments.list_page(conn, where=where, after=after, limit=limit)
        result = views.deployment_views(ctx, conn, found)
    return result, validate.next_token([d.deployment_id for d in found], limit)


def set_enabled(ctx: ServiceContext, ref: str, *, enabled: bool) -> views.DeploymentView:
    """Disabling releases the deployment's reservation at once (waiting ones may be admitted);
    enabling puts its demand back in the admission queue."""
    # Its cluster's lock: the deployment's row, its cluster's revision and admission there
    # (the pass takes the admission locks); a deployment never changes cluster.
    with snapshot(ctx) as conn:
        found = deployments.get(conn, ref)
    scope = [found.cluster_id] if found is not None else []
    deployment_id = scoped.write(
        ctx, scope, lambda tx: _set_enabled(ctx, tx, ref, enabled=enabled)
    ).deployment_id
    return get(ctx, deployment_id)


def preview_set_enabled(
    ctx: ServiceContext, ref: str, *, enabled: bool
) -> tuple[views.DeploymentView, dryrun.DryRun]:
    """What `set_enabled` would do (validate_only), writing nothing: the deployment as it
    would be, and every deployment that would change."""
    chosen: list[str] = []

    def call(c: ServiceContext, tx: Tx) -> str:
        current = _set_enabled(c, tx, ref, enabled=enabled)
        chosen.append(current.deployment_id)
        return current.workload_id

    preview = dryrun.preview(ctx, call, workload_ref="")
    assert preview.workload is not None
    (view,) = [v for v in preview.workload.deployments if v.deployment.deployment_id in chosen]
    return view, preview


def _set_enabled(ctx: ServiceContext, tx: Tx, ref: str, *, enabled: bool) -> Deployment:
    current = _get(tx.conn, ref)
    scoped.need(tx, [current.cluster_id])
    if current.enabled != enabled:
        deployments.save(
            tx.conn,
            replace(
                current,
                enabled=enabled,
                update_time=tx.now,
                pending_since=tx.now if enabled else current.pending_since,
            ),
        )
        tx.touched.add(current.cluster_id)
        admit.run(ctx, tx, cluster_ids=[current.cluster_id])
    return current


def resolve(conn: Transaction, ref: str) -> Deployment:
    return _get(conn, ref)


def _get(conn: Transaction, ref: str) -> Deployment:
    found = deployments.get(conn, ref)
    if found is None:
        raise errors.NotFound("deployment", ref)
    return found


def phase_counts(ctx: ServiceContext) -> dict[str, int]:
    """Deployments per admission phase, every phase present (for /metrics)."""
    counts = dict.fromkeys((*PHASE_ORDER, PHASE_FAILED), 0)
    with snapshot(ctx) as conn:
        after = ""
        while True:
            page = deployments.list_page(conn, where=DeploymentFilter(), after=after, limit=1000)
            if not page:
                break
            for view in views.deployment_views(ctx, conn, page):
                counts[view.phase] += 1
            after = page[-1].deployment_id
    return counts
