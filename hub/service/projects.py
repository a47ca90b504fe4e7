"""Projects and quota: create, read, change quotas, delete."""

from __future__ import annotations

from collections.abc import Mapping

from hub import errors
from hub.model import Project
from hub.service import admit, scoped, selectors, validate, views
from hub.service.context import ServiceContext, Tx, snapshot, transaction
from hub.store import deployments, projects, workloads
from hub.store.port import Transaction, project_lock


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
    # A new project's row, which no write's decision reads until a workload of it exists (a
    # workload create takes this project's lock): no cluster's lock. Its name is unique by
    # the table's key, whatever hub inserts it.
    with transaction(ctx, ()) as tx:
        tx.conn.serialize(project_lock(name))
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

    def body(tx: Tx) -> views.ProjectView:
        _get(tx.conn, name)
        _need_clusters(tx, name)
        projects.set_quotas(tx.conn, name=name, quotas=limits, now=tx.now)
        # Takes the admission locks itself: the project's, and with preemption those of the
        # other projects waiting on its clusters, in name order.
        admit.run(ctx, tx, project_names=[name])
        return views.project_view(tx.conn, _get(tx.conn, name))

    return scoped.write(ctx, _clusters_of(ctx, name), body)


def set_preemption_policy(
    ctx: ServiceContext, *, name: str, preemptible_by_other_projects: bool
) -> views.ProjectView:
    """Whether other projects' higher-priority workloads may preempt this project's managed
    deployments (admin only, like quotas: docs/security.md). Allowing it preempts nothing by
    itself; the next admission pass on a cluster with a waiting preemptor may."""

    def body(tx: Tx) -> views.ProjectView:
        _get(tx.conn, name)
        # Its deployments (the only victims the flag lets in) are on these clusters: a pass
        # elsewhere finds none of them to preempt, whatever it reads of the flag.
        _need_clusters(tx, name)
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

    return scoped.write(ctx, _clusters_of(ctx, name), body)


def set_labels(ctx: ServiceContext, *, name: str, labels: Mapping[str, str]) -> views.ProjectView:
    """Replace the project's labels (they change nothing but what selects it)."""
    valid = validate.labels(labels, "project.labels")
    # Only the project's row, which no decision reads: no cluster's lock (a concurrent
    # change of its labels replaces them whole, the last one wins; delete is covering).
    with transaction(ctx, ()) as tx:
        _get(tx.conn, name)
        projects.set_labels(tx.conn, name=name, labels=valid, now=tx.now)
        return views.project_view(tx.conn, _get(tx.conn, name))


def delete(ctx: ServiceContext, name: str) -> None:
    # The fleet lock shared and the project's lock, no cluster's: it decides on "no workload
    # left", and a workload of the project is only added by a create (holding this lock) or an
    # adoption (covering); a project with no workload has no deployment, so no admission pass
    # reads its quota.
    with transaction(ctx, ()) as tx:
        tx.conn.serialize(project_lock(name))
        _get(tx.conn, name)
        in_use = workloads.count_in_project(tx.conn, name)
        if in_use:
            raise errors.FailedPrecondition(
                f"project {name} has {in_use} workload(s)", ["delete them first"]
            )
        projects.delete(tx.conn, name)


def _clusters_of(ctx: ServiceContext, name: str) -> list[str]:
    """The clusters where the project has deployments, from a snapshot: a quota or policy
    change of the project locks them (checked again inside the write: `_need_clusters`)."""
    with snapshot(ctx) as conn:
        return deployments.clusters_of_project(conn, name)


def _need_clusters(tx: Tx, name: str) -> None:
    """Before anything is written: the transaction holds the locks of every cluster where the
    project has a deployment (else it runs again with them). Every deployment the admission
    pass for the project may change is there (a waiting one of the project, and with
    preemption the other projects' waiting and admitted ones on those clusters), and a
    deployment of the project only appears on a new cluster by a write holding the lock of
    one of its existing ones (a workload's update, failover, drain) or the project's lock (a
    workload created holds only the clusters it may choose), taken here before the set is
    read: a create that committed first is seen (WiderScope), one that has not waits for this
    write and then admits under what it wrote."""
    tx.conn.serialize(project_lock(name))
    scoped.need(tx, deployments.clusters_of_project(tx.conn, name))


def _get(conn: Transaction, name: str) -> Project:
    project = projects.get(conn, name)
    if project is None:
        raise errors.NotFound("project", name)
    return project
