"""The client commands on resources: get, create, scale, set-*, enable/disable, delete, over
the hub's REST API, and what every command shares (`Context`, `resource_path`, `suggesting`,
the dry run's answer). The operator's other commands are in cli/operations.py; apply -f,
describe, get --watch and label in their own modules.

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

from cli import kinds, manifests, output
from cli.client import HubClient, JsonObject
from cli.errors import ApiError, CliError, UsageError

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
