"""`apply -f` and `delete -f`: declared files against what the hub holds, kubectl-shaped.

Over the same REST client and output as cli/commands.py (see there for `Context`). A file's
object is created when the hub has none, PATCHed with the fields that differ (only those the
API's update masks may change: `MUTABLE`), and left alone when nothing differs; what the API
cannot do as kubectl's does is said in each docstring and docs/cli.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cli import kinds, manifests, output
from cli.client import JsonObject
from cli.commands import VALIDATE_ONLY, Context, agent_token_notice, resource_path
from cli.errors import ApiError, CliError, ManifestError

# What PATCH may change per kind (the UpdateX masks); anything else in a file that differs
# from the hub is refused: the object must be deleted and created again.
MUTABLE = {
    "project": ("quotas", "preemptible_by_other_projects", "labels"),
    "workload": ("replicas", "serving", "placement", "rollout", "priority", "labels"),
    # UpdateCluster: an operator's labels (region=eu); nothing else of a cluster is declared.
    "cluster": ("labels",),
}
# Map fields are replaced whole by a PATCH (their mask path is the map), so they compare
# whole; a message compares field by field (a file names only the fields it sets).
MAP_FIELDS = frozenset({"quotas", "labels", "cluster_selector", "weights"})
# Read-only in a file: the hub fills them, and apply never compares them.
_SERVER_FIELDS = frozenset(
    {
        "workload_id",
        "create_time",
        "update_time",
        "phase",
        "usage",
        "deployments",
        "token",
        "rollout_status",
    }
)


# -- apply ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    document: manifests.Document
    action: str  # created | configured | unchanged
    changed: tuple[str, ...]
    answer: JsonObject


def apply(ctx: Context, *, documents: Sequence[manifests.Document], dry_run: bool) -> None:
    """Create what does not exist, PATCH what differs, leave the rest: running it twice
    changes nothing the second time. Projects, then clusters, then workloads.

    `dry_run` writes nothing. A workload is sent with validate_only: the hub checks and
    decides it as for real and says what it would do (placement, admission, restarts,
    preemptions: docs/cli.md). Projects and clusters have no dry run on the hub: they are
    compared by reading (GET), and a workload whose project or cluster the same dry run would
    create cannot be checked by the hub yet (said so)."""
    results: list[Applied] = []
    suffix = " (dry run)" if dry_run else ""
    unchecked = False  # an earlier document would be created: the hub cannot see it yet
    for doc in manifests.in_creation_order(documents):
        with manifests.naming(doc):
            result = _apply_one(ctx, doc, dry_run=dry_run, hub_checks=not unchecked)
        results.append(result)
        unchecked = unchecked or (dry_run and result.action == "created")
        if ctx.human:
            fields = f" ({', '.join(result.changed)})" if result.changed else ""
            print(f"{doc.kind.name}/{doc.name} {result.action}{fields}{suffix}", file=ctx.out)
            if doc.kind is kinds.CLUSTER and "token" in result.answer:
                print(agent_token_notice(doc.name, str(result.answer["token"])), file=ctx.out)
            if dry_run:
                _print_dry_run(ctx, result)
    if not ctx.human:
        if ctx.output == "name":
            lines = [f"{r.document.kind.name}/{r.document.name}" for r in results]
            print("\n".join(lines), file=ctx.out)
        else:
            print(output.serialize([r.answer for r in results], fmt=ctx.output), file=ctx.out)


def _print_dry_run(ctx: Context, result: Applied) -> None:
    """Under the line of a workload applied with --dry-run: what the hub would do."""
    dry = result.answer.get("dry_run")
    if isinstance(dry, dict):
        print(f"  {dry.get('summary') or 'no change'}", file=ctx.out)
        changes = dry.get("changes") or []
        if changes:
            print(output.table("change", changes, headers=ctx.headers), file=ctx.out)
    elif result.action != "unchanged" and result.document.kind is kinds.WORKLOAD:
        print("  not checked by the hub: its project or cluster is created first", file=ctx.out)


def _apply_one(
    ctx: Context, doc: manifests.Document, *, dry_run: bool, hub_checks: bool = True
) -> Applied:
    if doc.name == "?":
        problem = f"no {doc.kind.name_field!r}: apply finds objects by it"
        raise ManifestError(doc.source, doc.index, problem)
    path = resource_path(doc.kind, doc.name)
    current = _get_or_none(ctx, path)
    # Workloads have a dry run on the hub (validate_only); other kinds only the comparison.
    validate = dry_run and hub_checks and doc.kind is kinds.WORKLOAD
    if current is None:
        if validate:
            answer = ctx.client.post(doc.kind.path, doc.body, params=VALIDATE_ONLY)
        else:
            answer = doc.body if dry_run else ctx.client.post(doc.kind.path, doc.body)
        return Applied(doc, "created", (), answer)
    mutable = MUTABLE[doc.kind.name]
    for key, wanted in doc.body.items():
        if key in mutable or key in _SERVER_FIELDS or key == doc.kind.name_field:
            continue
        if _differs(key, wanted, current.get(key)):
            raise CliError(
                f"{doc.kind.name}/{doc.name}: {key} cannot be changed (the hub has "
                f"{json.dumps(current.get(key))}, the file {json.dumps(wanted)}); delete it "
                "and apply again to recreate it"
            )
    patch = {
        key: doc.body[key]
        for key in mutable
        if key in doc.body and _differs(key, doc.body[key], current.get(key))
    }
    if not patch:
        return Applied(doc, "unchanged", (), current)
    if validate:
        answer = ctx.client.patch(path, patch, params=VALIDATE_ONLY)
    else:
        answer = current if dry_run else ctx.client.patch(path, patch)
    return Applied(doc, "configured", tuple(patch), answer)


def _get_or_none(ctx: Context, path: str) -> JsonObject | None:
    try:
        return ctx.client.get(path)
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def _differs(key: str, wanted: Any, current: Any) -> bool:
    """Does the file's value differ from the hub's? Null in the file means "leave it"."""
    if wanted is None:
        return False
    if isinstance(wanted, dict) and key not in MAP_FIELDS:
        if not isinstance(current, dict):
            return True
        return any(_differs(k, v, current.get(k)) for k, v in wanted.items())
    if isinstance(wanted, dict):
        return wanted != (current or {})
    if isinstance(wanted, list) and any(isinstance(item, dict) for item in wanted):
        # A list of messages (placement.preferences): each item as a message, so the
        # defaults the hub shows and the file leaves out are no difference.
        if not isinstance(current, list) or len(current) != len(wanted):
            return True
        return any(_differs(key, w, c) for w, c in zip(wanted, current, strict=True))
    return bool(wanted != current)


# -- delete -f --------------------------------------------------------------------------------


def delete_files(
    ctx: Context, *, documents: Sequence[manifests.Document], ignore_not_found: bool
) -> None:
    """Delete what the file names: workloads first, then clusters, then projects (the reverse
    of creation, so nothing is refused for being in use by what comes next)."""
    deleted: list[JsonObject] = []
    for doc in reversed(manifests.in_creation_order(documents)):
        try:
            with manifests.naming(doc):
                ctx.client.delete(resource_path(doc.kind, doc.name))
        except ApiError as e:
            if e.status == 404 and ignore_not_found:
                continue
            raise
        deleted.append({"kind": doc.kind.name, "ref": doc.name, "deleted": True})
        if ctx.human:
            print(f"{doc.kind.name}/{doc.name} deleted", file=ctx.out)
    if ctx.output == "name":
        print("\n".join(f"{d['kind']}/{d['ref']}" for d in deleted), file=ctx.out)
    elif not ctx.human:
        print(output.serialize(deleted, fmt=ctx.output), file=ctx.out)
