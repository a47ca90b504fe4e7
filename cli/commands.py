"""The client commands: one function per `wingsmith` verb, over the hub's REST API.

Called by `cli.main` with arguments already parsed and checked; each function talks to the
hub through `HubClient`, writes its result to `Context.out` in the chosen format, and lets
`cli.errors` errors propagate for `cli.main` to report.
"""

from __future__ import annotations

import contextlib
import difflib
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from cli import kinds, manifests, output, review
from cli.client import HubClient, JsonObject
from cli.errors import ApiError, CliError, PromotionRefused, UsageError

AGENT_TOKEN_ENV = "WINGSMITH_AGENT_TOKEN"


@dataclass(frozen=True)
class Context:
    client: HubClient
    # One of output.FORMATS, or "jsonpath=TEMPLATE".
    output: str
    out: TextIO
    err: TextIO
    # --no-headers: tables without their header row.
    headers: bool = True
    # --sort-by: a jsonpath each listed item is ordered by ("" keeps the hub's order).
    sort_by: str = ""

    @property
    def human(self) -> bool:
        return output.is_table(self.output)

    def show(self, data: Any, *, kind: kinds.Kind) -> None:
        if isinstance(data, list) and self.sort_by:
            data = output.sort_items(data, self.sort_by)
        text = output.render(
            data,
            fmt=self.output,
            kind=kind.name,
            name_field=kind.name_field,
            headers=self.headers,
        )
        print(text, file=self.out)

    def note(self, message: str) -> None:
        print(message, file=self.err)


def resource_path(kind: kinds.Kind, ref: str) -> str:
    # Quote everything: a ref is data, and a ':' must not be read as a custom verb.
    return f"{kind.path}/{urllib.parse.quote(ref, safe='')}"


@contextlib.contextmanager
def suggesting(ctx: Context, *, kind: kinds.Kind, ref: str) -> Iterator[None]:
    """A 404 for `ref` gets a hint naming the closest existing name ("did you mean").

    Costs one list call, and only when the hub already said the name is unknown."""
    try:
        yield
    except ApiError as e:
        if e.status != 404 or not kind.gettable:
            raise
        try:
            names = [
                str(i.get(kind.name_field)) for i in ctx.client.list_all(kind.path, kind.plural, {})
            ]
        except CliError:
            raise e from None
        close = difflib.get_close_matches(ref, names, n=3)
        if close:
            e.hint = f"hint: did you mean {' or '.join(f'{kind.name}/{n}' for n in close)}?"
        raise


# -- get --------------------------------------------------------------------------------------


def get(
    ctx: Context,
    *,
    kind: kinds.Kind,
    ref: str | None,
    filters: Mapping[str, str],
    show_all: bool = False,
) -> None:
    """One resource when `ref` is given, else every resource of the kind (all pages).

    `show_all` (`get --all`) sets the kind's `all_param`, e.g. include_ignored=true.
    """
    if ref is not None:
        with suggesting(ctx, kind=kind, ref=ref):
            ctx.show(ctx.client.get(resource_path(kind, ref)), kind=kind)
        return
    items = fetch(ctx, kind=kind, ref=None, filters=filters, show_all=show_all)
    if not items and ctx.human:
        ctx.note(f"no {kind.plural} found")
        return
    ctx.show(items, kind=kind)


def fetch(
    ctx: Context,
    *,
    kind: kinds.Kind,
    ref: str | None,
    filters: Mapping[str, str],
    show_all: bool = False,
) -> list[JsonObject]:
    """What `get` shows, as a list: the one resource, or every one of the kind."""
    if ref is not None:
        return [ctx.client.get(resource_path(kind, ref))]
    params = {kinds.FILTER_PARAMS[name]: value for name, value in filters.items()}
    if show_all and kind.all_param:
        params[kind.all_param] = "true"
    if "workload" in filters:
        params["workload_id"] = _workload_id(ctx.client, filters["workload"])
    return ctx.client.list_all(kind.path, kind.plural, params)


def _workload_id(client: HubClient, ref: str) -> str:
    """ListDeployments filters by workload id only; a name is looked up first.

    Names are DNS labels (no '_'), so "wl_..." is always an id and costs no extra call.
    """
    if ref.startswith("wl_"):
        return ref
    return str(client.get(resource_path(kinds.WORKLOAD, ref))["workload_id"])


# -- create -----------------------------------------------------------------------------------


def create(ctx: Context, *, documents: Sequence[manifests.Document], dry_run: bool = False) -> None:
    """POST each document, projects first, then clusters, then workloads.

    `dry_run`: each workload is POSTed with validate_only and the hub's answer printed;
    projects and clusters have no dry run on the hub and are only named (as is a workload
    whose project or cluster the same file creates: the hub cannot check it yet).

    Stops at the first refusal; what was created before it stays (the API has no multi-object
    transaction), and the error says which document failed. What was created is printed even
    then: a cluster's agent token is shown once, and an error must not swallow it.
    """
    if dry_run:
        _create_dry_run(ctx, documents)
        return
    created: list[JsonObject] = []
    try:
        for doc in manifests.in_creation_order(documents):
            with manifests.naming(doc):
                answer = ctx.client.post(doc.kind.path, doc.body)
            created.append(answer)
            if ctx.human:
                _report_created(ctx, doc, answer)
    except CliError:
        if created:
            ctx.note(f"{len(created)} of {len(documents)} documents were created before the error")
        raise
    finally:
        if not ctx.human and created:
            _show_created(ctx, created)


def _create_dry_run(ctx: Context, documents: Sequence[manifests.Document]) -> None:
    answers: list[JsonObject] = []
    unchecked = False  # an earlier document would be created: the hub cannot see it yet
    for doc in manifests.in_creation_order(documents):
        what = f"{doc.kind.name}/{doc.name} created"
        if doc.kind is kinds.WORKLOAD and not unchecked:
            with manifests.naming(doc):
                answer = ctx.client.post(doc.kind.path, doc.body, params=VALIDATE_ONLY)
            answers.append(answer)
            if ctx.human:
                show_dry_run(ctx, what=what, answer=answer)
            continue
        unchecked = True
        answers.append(doc.body)
        if ctx.human:
            print(f"{what} (dry run): not checked by the hub", file=ctx.out)
    if not ctx.human:
        print(output.serialize(answers, fmt=ctx.output), file=ctx.out)


def _report_created(ctx: Context, doc: manifests.Document, answer: JsonObject) -> None:
    print(f"{doc.kind.name}/{doc.name} created", file=ctx.out)
    if doc.kind is kinds.CLUSTER:
        print(agent_token_notice(doc.name, str(answer.get("token", ""))), file=ctx.out)


def _show_created(ctx: Context, created: list[JsonObject]) -> None:
    print(output.serialize(created, fmt=ctx.output), file=ctx.out)
    for answer in created:
        if "token" in answer:
            cluster_id = (answer.get("cluster") or {}).get("cluster_id", "?")
            ctx.note(f"note: the agent token of cluster {cluster_id} is in the output: shown once")


def agent_token_notice(cluster_id: str, token: str) -> str:
    return "\n".join(
        [
            "",
            f"  Agent token for cluster {cluster_id} (shown once; the hub keeps only its hash):",
            "",
            f"      {token}",
            "",
            f"  The agent reads it from --token or ${AGENT_TOKEN_ENV}, for example:",
            f"      {AGENT_TOKEN_ENV}={token} \\",
            f"        wingsmith agent --cluster-id {cluster_id} --hub <hub gRPC HOST:PORT>",
            "",
        ]
    )


# -- changes ----------------------------------------------------------------------------------


def scale(ctx: Context, *, ref: str, replicas: int, dry_run: bool = False) -> None:
    kind = kinds.WORKLOAD
    path = resource_path(kind, ref)
    if dry_run:
        answer = ctx.client.patch(path, {"replicas": replicas}, params=VALIDATE_ONLY)
        show_dry_run(ctx, what=f"workload/{ref} scaled to {replicas}", answer=answer)
        return
    with suggesting(ctx, kind=kind, ref=ref):
        answer = ctx.client.patch(path, {"replicas": replicas})
    ctx.show(answer, kind=kind)


# The hub's dry run (AIP-163): the call is checked and decided as for real, nothing written.
VALIDATE_ONLY = {"validate_only": "true"}


def show_dry_run(ctx: Context, *, what: str, answer: JsonObject) -> None:
    """A validate_only answer: a line saying what the call would do, then a table of every
    deployment it would change (tables); or the whole answer (-o json|yaml)."""
    if not ctx.human:
        print(output.serialize(answer, fmt=ctx.output), file=ctx.out)
        return
    result = answer.get("dry_run") or {}
    print(f"{what} (dry run): {result.get('summary') or 'no change'}", file=ctx.out)
    changes = result.get("changes") or []
    if changes:
        print(output.table("change", changes, headers=ctx.headers), file=ctx.out)


def set_priority(ctx: Context, *, ref: str, priority: str) -> None:
    kind = kinds.WORKLOAD
    ctx.show(ctx.client.patch(resource_path(kind, ref), {"priority": priority}), kind=kind)


def set_quota(ctx: Context, *, project: str, quotas: Mapping[str, int], replace: bool) -> None:
    """Merge `quotas` into the project's (a 0 stays as a zero limit), or replace them all.

    The API replaces the whole map, so merging reads it first; two operators merging at the
    same moment can lose one change (the API has no precondition to detect that).
    """
    kind = kinds.PROJECT
    path = resource_path(kind, project)
    merged = dict(quotas)
    if not replace:
        merged = {**(ctx.client.get(path).get("quotas") or {}), **quotas}
    ctx.show(ctx.client.patch(path, {"quotas": merged}), kind=kind)


def set_enabled(ctx: Context, *, refs: Sequence[str], enabled: bool, dry_run: bool = False) -> None:
    kind = kinds.DEPLOYMENT
    if dry_run:
        word = "enabled" if enabled else "disabled"
        for ref in refs:
            path = resource_path(kind, ref)
            answer = ctx.client.patch(path, {"enabled": enabled}, params=VALIDATE_ONLY)
            show_dry_run(ctx, what=f"deployment/{ref} {word}", answer=answer)
        return
    updated = [ctx.client.patch(resource_path(kind, ref), {"enabled": enabled}) for ref in refs]
    ctx.show(updated if len(updated) > 1 else updated[0], kind=kind)


def delete(
    ctx: Context,
    *,
    kind: kinds.Kind,
    refs: Sequence[str],
    dry_run: bool = False,
    ignore_not_found: bool = False,
) -> None:
    """DELETE each ref in order, stopping at the first refusal. `ignore_not_found`: a ref
    already gone (404) is passed over, as kubectl's --ignore-not-found, and exits 0."""
    if not kind.deletable:
        raise UsageError(f"{kind.plural} cannot be deleted")
    if dry_run:
        if kind is not kinds.WORKLOAD:
            raise UsageError("--dry-run: only workloads have a dry run on the hub")
        for ref in refs:
            answer = ctx.client.delete(resource_path(kind, ref), params=VALIDATE_ONLY)
            show_dry_run(ctx, what=f"workload/{ref} deleted", answer=answer)
        return
    deleted = []
    for ref in refs:
        try:
            with suggesting(ctx, kind=kind, ref=ref):
                ctx.client.delete(resource_path(kind, ref))
        except ApiError as e:
            if e.status == 404 and ignore_not_found:
                continue
            raise
        deleted.append({"kind": kind.name, "ref": ref, "deleted": True})
        if ctx.human:
            print(f"{kind.name}/{ref} deleted", file=ctx.out)
    if not ctx.human:
        print(output.serialize(deleted, fmt=ctx.output), file=ctx.out)


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


# -- discovered workloads ---------------------------------------------------------------------


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
        [c["cluster_id"], c.get("state", ""), output.timestamp(c.get("change_time"))]
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


# -- authority --------------------------------------------------------------------------------


def applied_object(ctx: Context, *, ref: str) -> None:
    """The object the deployment's agent applied. A table is the object itself, as YAML one
    could apply, under comment lines saying where it comes from; JSON and YAML are the hub's
    AppliedObject unchanged (its `body` a JSON string)."""
    answer = ctx.client.get(f"{resource_path(kinds.DEPLOYMENT, ref)}/applied")
    if ctx.output == "table":
        print(output.applied_object(answer), file=ctx.out)
    else:
        print(output.serialize(answer, fmt=ctx.output), file=ctx.out)


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
