"""Authority: promoting a deployment to managed (the agent takes control) and demoting it to
observed (the agent lets go), with the review that comes first (docs/authority.md).

Promotion compares the declared config with the live one (the drift of hub/service/views.py).
Any difference means promoting would change the cluster, so it is refused with
FAILED_PRECONDITION listing them, unless the request accepts them; accepted differences that
change the pod template (serving digest, engine_args) roll out like any serving change, and
only those: the deployment is marked rolling (with surge) exactly when its pods will restart.
Nothing is compared with a stale cluster, so promotion waits until it reports again
(FAILED_PRECONDITION). Taking control of an adopted DGD whose config matches changes nothing
in its pod template. Demotion never deletes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hub import errors
from hub.model import Deployment
from hub.service import admit, dryrun, views
from hub.service.context import ServiceContext, Tx, snapshot, transaction
from hub.service.deployments import resolve
from hub.store import deployments
from hub.store.port import Transaction

TEMPLATE_FIELDS = frozenset({"serving_digest", "engine_args"})


@dataclass(frozen=True)
class Review:
    view: views.DeploymentView
    differences: tuple[views.Difference, ...]
    restarts_pods: bool
    summary: str


def review(ctx: ServiceContext, ref: str) -> Review:
    with snapshot(ctx) as conn:
        return _review(ctx, conn, resolve(conn, ref))


def set_authority(
    ctx: ServiceContext, ref: str, *, authority: str, accept_differences: bool = False
) -> views.DeploymentView:
    _check(authority)
    with transaction(ctx) as tx:
        changed = _set(ctx, tx, ref, authority=authority, accept_differences=accept_differences)
    with snapshot(ctx) as conn:
        return _view(ctx, conn, resolve(conn, changed.deployment_id))


def preview_set_authority(
    ctx: ServiceContext, ref: str, *, authority: str, accept_differences: bool = False
) -> tuple[views.DeploymentView, dryrun.DryRun]:
    """What `set_authority` would do (validate_only), writing nothing: the same refusals, the
    deployment as it would be, and what would change (a promotion whose accepted differences
    restart pods reads `restarted`)."""
    _check(authority)

    def call(c: ServiceContext, tx: Tx) -> views.DeploymentView:
        changed = _set(c, tx, ref, authority=authority, accept_differences=accept_differences)
        return _view(c, tx.conn, resolve(tx.conn, changed.deployment_id))

    return dryrun.rehearse(ctx, call)


def _check(authority: str) -> None:
    if authority not in ("managed", "observed"):
        raise errors.InvalidArgument("authority", "expected one of: managed, observed")


def _set(
    ctx: ServiceContext, tx: Tx, ref: str, *, authority: str, accept_differences: bool
) -> Deployment:
    current = resolve(tx.conn, ref)
    if current.authority == authority:
        return current
    if authority == "managed":
        changed = _promote(ctx, tx.conn, current, accept_differences=accept_differences)
    else:
        changed = replace(current, authority="observed", rolling=False)
    deployments.save(tx.conn, replace(changed, update_time=tx.now))
    tx.touched.add(current.cluster_id)
    # Whether the agent creates its replicas changed: decided again even when it waits
    # for nothing (docs/admission.md "Replicas no agent creates").
    admit.run(ctx, tx, cluster_ids=[current.cluster_id], every_on=[current.cluster_id])
    return current


def _promote(
    ctx: ServiceContext, conn: Transaction, current: Deployment, *, accept_differences: bool
) -> Deployment:
    if current.desired_replicas and not current.admitted_replicas:
        raise errors.FailedPrecondition(
            f"deployment {current.name} is not admitted ({current.admission_reason})",
            [current.admission_message or "raise the quota or free capacity first"],
        )
    the_review = _review(ctx, conn, current)
    if the_review.view.status is None:
        raise errors.FailedPrecondition(
            f"cluster {current.cluster_id} has not reported deployment {current.name} yet",
            ["there is nothing to compare the declaration with; wait for its first report"],
        )
    if the_review.view.stale:
        raise errors.FailedPrecondition(
            f"cluster {current.cluster_id} is stale: the declaration of {current.name} cannot be"
            " compared with what runs right now",
            ["wait until the cluster reports again, then review and promote"],
        )
    if the_review.differences and not accept_differences:
        raise errors.FailedPrecondition(
            "the declared config differs from the live one; promoting would change the cluster",
            [
                *(str(d) for d in the_review.differences),
                "change the declaration to match (PATCH the workload), or promote with"
                " accept_differences: true to apply it",
            ],
        )
    return replace(current, authority="managed", rolling=the_review.restarts_pods)


def _review(ctx: ServiceContext, conn: Transaction, current: Deployment) -> Review:
    view = views.deployment_views(ctx, conn, [current])[0]
    differences = view.drift
    restarts = any(d.field in TEMPLATE_FIELDS for d in differences)
    if view.status is None:
        summary = "the cluster has not reported this deployment yet: nothing to compare"
    elif view.stale:
        summary = (
            "the cluster is stale: its last report cannot be compared with the declaration"
            " right now, and promotion waits until it reports again"
        )
    elif current.authority == "managed":
        summary = "managed: the agent reconciles it"
    elif not differences:
        summary = "the declaration matches the cluster: taking control changes nothing"
    elif restarts:
        summary = "taking control with these differences accepted restarts pods (new template)"
    else:
        summary = "taking control with these differences accepted changes no pod template"
    return Review(view=view, differences=differences, restarts_pods=restarts, summary=summary)


def _view(ctx: ServiceContext, conn: Transaction, d: Deployment) -> views.DeploymentView:
    return views.deployment_views(ctx, conn, [d])[0]
