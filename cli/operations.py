"""The operator's commands beyond a resource's own fields, over the hub's REST API: a
cluster's agent token, cordon/uncordon/drain, discovered workloads (track, ignore, promote),
rollouts in waves, a deployment's authority (review, promote, demote) and applied object,
scoped API tokens and the audit log. Their arguments are in cli/args/operations.py."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence

from cli import cells, kinds, output, review
from cli.client import JsonObject
from cli.commands import (
    Context,
    agent_token_notice,
    resource_path,
    show_dry_run,
)
from cli.errors import ApiError, PromotionRefused


def rotate_token(ctx: Context, *, cluster_id: str, revoke_certificates: bool) -> None:
    """POST /v1/clusters/{id}:rotateToken; prints the new agent token (shown once)."""
    path = f"{resource_path(kinds.CLUSTER, cluster_id)}:rotateToken"
    answer = ctx.client.post(path, {"revoke_certificates": revoke_certificates})
    if ctx.output != "table":
        print(output.serialize(answer, fmt=ctx.output), file=ctx.out)
        ctx.note(f"note: the agent token of cluster {cluster_id} is in the output: shown once")
        return
    print(f"cluster/{cluster_id} token rotated: the old token no longer works", file=ctx.out)
    if revoke_certificates:
        print("  the client certificates its agents used are revoked too", file=ctx.out)
    print(agent_token_notice(cluster_id, str(answer.get("token", ""))), file=ctx.out)


def maintain(
    ctx: Context,
    *,
    verb: str,
    cluster_id: str,
    node: str,
    device_class: str,
    dry_run: bool = False,
) -> None:
    """POST /v1/clusters/{id}:cordon|uncordon|drain, scoped to a node or device class where
    given; prints the cluster (`dry_run`: what the hub would do, nothing changed)."""
    body: JsonObject = {}
    if node:
        body["node"] = node
    if device_class:
        body["device_class"] = device_class
    path = f"{resource_path(kinds.CLUSTER, cluster_id)}:{verb}"
    if dry_run:
        answer = ctx.client.post(path, {**body, "validate_only": True})
        show_dry_run(ctx, what=f"cluster/{cluster_id} {verb}", answer=answer)
        return
    ctx.show(ctx.client.post(path, body), kind=kinds.CLUSTER)


# -- discovered workloads and rollouts --------------------------------------------------------


def decide_discovered(ctx: Context, *, ref: str, decision: str) -> None:
    """`track` (keep it in the inventory, observed only) or `ignore` (hide it from the default
    list): POST /v1/discovered/{ref}/{decision}; prints the entry in its new state."""
    kind = kinds.DISCOVERED
    ctx.show(ctx.client.post(f"{resource_path(kind, ref)}/{decision}", {}), kind=kind)


def rollout_action(ctx: Context, *, ref: str, action: str, dry_run: bool = False) -> None:
    """`pause`, `resume` or `abort` a workload's rollout in waves:
    POST /v1/workloads/{ref}:{action}; prints the workload (`dry_run`: what the hub would
    do, nothing changed)."""
    kind = kinds.WORKLOAD
    if dry_run:
        answer = ctx.client.post(f"{resource_path(kind, ref)}:{action}", {"validate_only": True})
        show_dry_run(ctx, what=f"workload/{ref} rollout {action}", answer=answer)
        return
    ctx.show(ctx.client.post(f"{resource_path(kind, ref)}:{action}", {}), kind=kind)
    if ctx.human:
        rollout_status(ctx, ref=ref)


def rollout_status(ctx: Context, *, ref: str) -> None:
    """The workload's rollout in waves, for people (with -o json|yaml: the rollout_status
    object as the API gives it)."""
    workload = ctx.client.get(resource_path(kinds.WORKLOAD, ref))
    status = workload.get("rollout_status")
    if not ctx.human:
        print(output.serialize(status, fmt=ctx.output), file=ctx.out)
        return
    if not status:
        policy = workload.get("rollout") or {}
        limit = policy.get("max_clusters_in_flight") or 0
        how = f"waves of {limit} cluster(s)" if limit else "every cluster at once"
        print(f"workload {workload['name']}: no rollout in waves ({how})", file=ctx.out)
        return
    lines = [
        f"Rollout:   {status.get('state', '')}",
        f"Target:    {status.get('target_serving_digest', '')}",
        f"Previous:  {status.get('previous_serving_digest', '')}",
    ]
    if status.get("reason"):
        lines.append(f"Reason:    {status['reason']}")
    if status.get("message"):
        lines.append(f"Message:   {status['message']}")
    rows = [["CLUSTER", "WAVE", "CHANGED"]] if ctx.headers else []
    rows += [
        [c["cluster_id"], c.get("state", ""), cells.timestamp(c.get("change_time"))]
        for c in status.get("clusters", [])
    ]
    print("\n".join([*lines, output.format_rows(rows)]), file=ctx.out)


def promote_discovered(
    ctx: Context, *, ref: str, project: str, workload_name: str, device_class: str
) -> None:
    """Make a workload of it, pinned to its cluster, with one observed deployment; prints the
    workload. Empty optional fields are left out: the hub's defaults (the DGD's name, the
    class of the devices its pods run on) apply."""
    body: JsonObject = {"project": project}
    if workload_name:
        body["workload_name"] = workload_name
    if device_class:
        body["device_class"] = device_class
    path = f"{resource_path(kinds.DISCOVERED, ref)}/promote"
    ctx.show(ctx.client.post(path, body), kind=kinds.WORKLOAD)


def applied_object(ctx: Context, *, ref: str) -> None:
    """The object the deployment's agent applied. A table is the object itself, as YAML one
    could apply, under comment lines saying where it comes from; JSON and YAML are the hub's
    AppliedObject unchanged (its `body` a JSON string)."""
    answer = ctx.client.get(f"{resource_path(kinds.DEPLOYMENT, ref)}/applied")
    if ctx.output == "table":
        print(output.applied_object(answer), file=ctx.out)
    else:
        print(output.serialize(answer, fmt=ctx.output), file=ctx.out)


# -- authority --------------------------------------------------------------------------------


def review_deployment(ctx: Context, *, ref: str) -> None:
    """What promoting would change. A table is the readable review; JSON and YAML are the
    hub's DeploymentReview unchanged."""
    answer = ctx.client.get(f"{resource_path(kinds.DEPLOYMENT, ref)}/review")
    if ctx.human:
        print(review.render(answer), file=ctx.out)
    else:
        print(output.serialize(answer, fmt=ctx.output), file=ctx.out)


def set_authority(ctx: Context, *, ref: str, authority: str, accept_differences: bool) -> None:
    """Promote (`managed`: the agent takes control) or demote (`observed`: it lets go, deleting
    nothing); prints the deployment.

    A refused promotion becomes PromotionRefused, whose hint points at `authority review`.
    """
    kind = kinds.DEPLOYMENT
    body: JsonObject = {"authority": authority}
    if accept_differences:
        body["accept_differences"] = True
    try:
        answer = ctx.client.post(f"{resource_path(kind, ref)}/authority", body)
    except ApiError as e:
        if authority != "managed" or e.code != "FAILED_PRECONDITION":
            raise
        raise PromotionRefused(
            deployment=ref, status=e.status, code=e.code, message=e.api_message
        ) from e
    ctx.show(answer, kind=kind)


# -- scoped tokens and the audit log ----------------------------------------------------------


def create_token(ctx: Context, *, name: str, role: str, projects: Sequence[str]) -> None:
    """Create a scoped token; its secret goes to stdout last, alone on its line (shown once)."""
    body: JsonObject = {"name": name, "role": role}
    if projects:
        body["projects"] = list(projects)
    answer = ctx.client.post("/v1/tokens", body)
    if ctx.output != "table":
        print(output.serialize(answer, fmt=ctx.output), file=ctx.out)
        return
    print(output.table("token", [answer["token"]]), file=ctx.out)
    ctx.note("the secret below is shown once; the hub keeps only its hash:")
    print(answer["secret"], file=ctx.out)


def list_tokens(ctx: Context, *, include_revoked: bool) -> None:
    params = {"include_revoked": "true"} if include_revoked else {}
    items = ctx.client.list_all("/v1/tokens", "tokens", params)
    if not items and ctx.output == "table":
        ctx.note("no tokens found")
        return
    print(output.render(items, fmt=ctx.output, kind="token"), file=ctx.out)


def revoke_token(ctx: Context, *, name: str) -> None:
    answer = ctx.client.delete(f"/v1/tokens/{urllib.parse.quote(name, safe='')}")
    print(output.render(answer, fmt=ctx.output, kind="token"), file=ctx.out)


def audit(ctx: Context, *, filters: Mapping[str, str], limit: int) -> None:
    """The newest `limit` audit records matching `filters` (GET /v1/audit), newest first."""
    page = ctx.client.get("/v1/audit", {**filters, "page_size": str(limit)})
    items = page.get("records") or []
    if not items and ctx.output == "table":
        ctx.note("no audit records found")
        return
    print(output.render(items, fmt=ctx.output, kind="audit"), file=ctx.out)
