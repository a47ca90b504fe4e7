"""Projects and quota: create, read, change quotas, delete."""

from __future__ import annotations

from collections.abc import Mapping

from hub import errors
from hub.model import Project
from hub.service import admit, selectors, validate, views
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import deployments, projects, workloads
from hub.store.port import Transaction


def create(
    ctx: ServiceContext,
    *,
    name: str,
    quotas: Mapping[str, int],
    preemptible_by_other_projects: bool = False,
    labels: Mapping[str, str] | None = None,
) -> views.ProjectView:
    validate.dns_label(name, "project.name")
    limits = validate.quotas(quotas, "project.quotas")
    valid_labels = validate.labels(labels or {}, "project.labels")
    with transaction(ctx) as tx:
        projects.insert(
            tx.conn,
            name=name,
            quotas=limits,
            now=tx.now,
            preemptible_by_other_projects=preemptible_by_other_projects,
            labels=valid_labels,
        )
        project = _get(tx.conn, name)
        return views.project_view(tx.conn, project)


def get(ctx: ServiceContext, name: str) -> views.ProjectView:
    with snapshot(ctx) as conn:
        return views.project_view(conn, _get(conn, name))


def list_page(
    ctx: ServiceContext, *, page_size: int, page_token: str, label_selector: str = ""
) -> tuple[list[views.ProjectView], str]:
    """A page of projects; only those `label_selector` matches, selected in the store's query
    before the page is cut (hub/service/selectors.py)."""
    limit, after = validate.page(page_size, page_token)
    selector = selectors.parse(label_selector)
    with snapshot(ctx) as conn:
        found = projects.list_page(conn, after=after, limit=limit, selector=selector)
        result = [views.project_view(conn, p) for p in found]
    return result, validate.next_token([p.name for p in found], limit)


def set_quotas(ctx: ServiceContext, *, name: str, quotas: Mapping[str, int]) -> views.ProjectView:
    """Replace the project's quotas; its waiting deployments are re-evaluated at once.

    Lowering a quota below what is in use evicts nothing: it only stops new admissions.
    """
    limits = validate.quotas(quotas, "project.quotas")
    with transaction(ctx) as tx:
        _get(tx.conn, name)
        projects.set_quotas(tx.conn, name=name, quotas=limits, now=tx.now)
        admit.run(ctx, tx, project_names=[name])
        return views.project_view(tx.conn, _get(tx.conn, name))


def set_preemption_policy(
    ctx: ServiceContext, *, name: str, preemptible_by_other_projects: bool
) -> views.ProjectView:
    """Whether other projects' higher-priority workloads may preempt this project's managed
    deployments (admin only, like quotas: docs/security.md). Allowing it preempts nothing by
    itself; the next admission pass on a cluster with a waiting preemptor may."""
    with transaction(ctx) as tx:
        _get(tx.conn, name)
        projects.set_preemption_policy(
            tx.conn,
            name=name,
            preemptible_by_other_projects=preemptible_by_other_projects,
            now=tx.now,
        )
        if preemptible_by_other_projects:
            # Its clusters' waiting preemptors may now take its devices: re-run there.
            admit.run(ctx, tx, cluster_ids=deployments.clusters_of_project(tx.conn, name))
        return views.project_view(tx.conn, _get(tx.conn, name))


def set_labels(ctx: ServiceContext, *, name: str, labels: Mapping[str, str]) -> views.ProjectView:
    """Replace the project's labels (they change nothing but what selects it)."""
    valid = validate.labels(labels, "project.labels")
    with transaction(ctx) as tx:
        _get(tx.conn, name)
        projects.set_labels(tx.conn, name=name, labels=valid, now=tx.now)
        return views.project_view(tx.conn, _get(tx.conn, name))


def delete(ctx: ServiceContext, name: str) -> None:
    with transaction(ctx) as tx:
        _get(tx.conn, name)
        in_use = workloads.count_in_project(tx.conn, name)
        if in_use:
            raise errors.FailedPrecondition(
                f"project {name} has {in_use} workload(s)", ["delete them first"]
            )
        projects.delete(tx.conn, name)


def _get(conn: Transaction, name: str) -> Project:
    project = projects.get(conn, name)
    if project is None:
        raise errors.NotFound("project", name)
    return project
