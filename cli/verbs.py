"""The kubectl-shaped verbs: `describe`, `apply -f`, `delete -f` and `get --watch`.

Over the same REST client and output as cli/commands.py (see there for `Context`). What each
does when the API cannot do what kubectl's does is said in its docstring and docs/cli.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cli import kinds, manifests, output
from cli.client import JsonObject
from cli.commands import VALIDATE_ONLY, Context, agent_token_notice, resource_path, suggesting
from cli.errors import ApiError, CliError, HubUnreachable, ManifestError

# What PATCH may change per kind (the UpdateX masks); anything else in a file that differs
# from the hub is refused: the object must be deleted and created again.
MUTABLE = {
    "project": ("quotas", "preemptible_by_other_projects", "labels"),
    "workload": ("replicas", "serving", "placement", "rollout", "priority", "labels"),
    "cluster": (),
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


# -- get --watch ------------------------------------------------------------------------------

# Liveness stamps move on every heartbeat: a change of these alone is not news.
_WATCH_NOISE = frozenset({"last_seen", "observe_time"})


def watch(
    ctx: Context,
    *,
    fetch: Callable[[], list[JsonObject]],
    kind: kinds.Kind,
    interval_s: float,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Print the list, then each object again whenever it changes (tables: its row alone, as
    kubectl's --watch), polling every `interval_s`; until `timeout_s` (0: until Ctrl-C).

    The hub has no watch API, so this polls the same GET a `get` makes."""
    deadline = clock() + timeout_s if timeout_s else None
    seen: dict[str, str] = {}
    widths: list[int] = []
    first = True
    while True:
        items = fetch()
        changed = []
        now_keys: dict[str, str] = {}
        for item in items:
            key = str(item.get(kind.name_field))
            now_keys[key] = json.dumps(_without_noise(item), sort_keys=True)
            if seen.get(key) != now_keys[key]:
                changed.append(item)
        for gone in seen.keys() - now_keys.keys():
            ctx.note(f"{kind.name}/{gone} deleted")
        if first or changed:
            widths = _show_watched(
                ctx, changed, kind=kind, headers=first and ctx.headers, widths=widths
            )
        first = False
        seen = now_keys
        ctx.out.flush()
        if deadline is not None and clock() + interval_s > deadline:
            return
        sleep(interval_s)


# Kinds the hub's watch stream carries (GET /v1/watch); `get -w` of others polls.
STREAMED = frozenset({"workload", "deployment", "cluster"})
# Errors after which a watch resumes (from its last revision): the hub went away, or cut the
# stream off because this client read too slowly.
_RESUMABLE = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED"})
# With no deadline: how long the stream may stay quiet (the hub sends a bookmark every 15 s).
_QUIET_S = 60.0


def stream_watch(
    ctx: Context,
    *,
    kind: kinds.Kind,
    matches: Callable[[JsonObject], bool],
    project: str,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """`get -w` from the hub's watch stream (docs/cli.md): the current objects (those
    `matches` keeps), then each change as it happens; until `timeout_s` (0: until Ctrl-C).
    A lost connection resumes from the last revision seen, so nothing is missed or shown
    twice; a revision the hub no longer keeps starts over with the current list."""
    deadline = clock() + timeout_s if timeout_s else None
    revision, started = 0, False
    initial: list[JsonObject] = []
    widths: list[int] = []
    while deadline is None or clock() < deadline:
        query: dict[str, str] = {"kinds": kind.plural}
        if project:
            query["project"] = project
        if revision:
            query["since_revision"] = str(revision)
        quiet_s = _QUIET_S if deadline is None else max(0.05, min(_QUIET_S, deadline - clock()))
        try:
            for event in ctx.client.events("/v1/watch", query, read_timeout_s=quiet_s):
                revision = max(revision, int(event.get("revision") or 0))
                obj = event.get(kind.name)
                if event.get("type") == "bookmark" and not started:
                    widths = _show_watched(
                        ctx, initial, kind=kind, headers=ctx.headers, widths=widths
                    )
                    started, initial = True, []
                elif isinstance(obj, dict) and matches(obj):
                    if not started:
                        initial.append(obj)
                    elif event.get("type") == "deleted":
                        ctx.note(f"{kind.name}/{obj.get(kind.name_field)} deleted")
                    else:
                        widths = _show_watched(ctx, [obj], kind=kind, headers=False, widths=widths)
                ctx.out.flush()
                if deadline is not None and clock() >= deadline:
                    return
        except HubUnreachable:
            sleep(1.0)  # reconnect (through the balancer, maybe to another hub) and resume
        except ApiError as e:
            if e.code == "OUT_OF_RANGE" and revision:
                revision, started, initial = 0, False, []  # too far behind: list again
            elif e.code not in _RESUMABLE:
                raise
            else:
                sleep(1.0)


def _without_noise(item: Mapping[str, Any]) -> Any:
    return {
        k: _without_noise(v) if isinstance(v, dict) else v
        for k, v in item.items()
        if k not in _WATCH_NOISE
    }


def _show_watched(
    ctx: Context, items: list[JsonObject], *, kind: kinds.Kind, headers: bool, widths: list[int]
) -> list[int]:
    """Print what changed; a table keeps the column widths it had (returned, grown)."""
    if ctx.human:
        rows = output.table_rows(kind.name, items, wide=ctx.output == "wide", headers=headers)
        if rows:
            print(output.format_rows(rows, min_widths=widths), file=ctx.out)
            grown = output.column_widths(rows)
            widths = [max(w, widths[i] if i < len(widths) else 0) for i, w in enumerate(grown)]
        return widths
    for item in items:
        text = output.render(item, fmt=ctx.output, kind=kind.name, name_field=kind.name_field)
        print(text, file=ctx.out)
        if ctx.output == "yaml":
            print("---", file=ctx.out)
    return widths


# -- describe ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Related:
    title: str
    kind: kinds.Kind
    # The list filter (query parameter -> the described object's field holding its value).
    params: Mapping[str, str]


RELATED: dict[str, tuple[Related, ...]] = {
    "workload": (Related("Deployments", kinds.DEPLOYMENT, {"workload_id": "workload_id"}),),
    "deployment": (
        Related("Replicas", kinds.REPLICA, {"deployment_id": "deployment_id"}),
        Related("Allocations", kinds.ALLOCATION, {"deployment_id": "deployment_id"}),
    ),
    "cluster": (
        Related("Deployments", kinds.DEPLOYMENT, {"cluster_id": "cluster_id"}),
        Related("Discovered", kinds.DISCOVERED, {"cluster_id": "cluster_id"}),
    ),
    "project": (
        Related("Workloads", kinds.WORKLOAD, {"project": "name"}),
        Related("Allocations", kinds.ALLOCATION, {"project": "name"}),
    ),
    "replica": (Related("Allocations", kinds.ALLOCATION, {"replica_id": "replica_id"}),),
    "discovered": (),
}

# Fields whose objects the related tables show in full.
_SHOWN_AS_RELATED = {"workload": ("deployments", "failovers")}

NO_HISTORY = "<none> (the hub keeps each object's current state, not a history of changes)"


def describe(ctx: Context, *, kind: kinds.Kind, ref: str) -> None:
    """A page for people: the object's fields (nested ones indented), its conditions for a
    deployment, then the objects related to it as tables, then Events (none: the hub keeps
    no history)."""
    with suggesting(ctx, kind=kind, ref=ref):
        item = ctx.client.get(resource_path(kind, ref))
    shown = {k: v for k, v in item.items() if k not in _SHOWN_AS_RELATED.get(kind.name, ())}
    lines = list(_fields(shown, indent=0))
    if kind is kinds.DEPLOYMENT:
        lines += ["Conditions:", *_indented(output.format_rows(_conditions(item)))]
    if kind is kinds.WORKLOAD:
        failovers = _failovers(item)
        lines += ["Failovers:", *(_indented(output.format_rows(failovers)) if failovers else [])]
        if not failovers:
            lines[-1] += " <none>"
    for related in RELATED[kind.name]:
        params = {query: str(item.get(key) or "") for query, key in related.params.items()}
        found = ctx.client.list_all(related.kind.path, related.kind.plural, params)
        lines.append(f"{related.title}:")
        lines += _indented(output.table(related.kind.name, found)) if found else ["  <none>"]
    if kind is kinds.DISCOVERED and item.get("workload_id"):
        workload = ctx.client.get(resource_path(kinds.WORKLOAD, str(item["workload_id"])))
        lines += ["Workload:", *_indented(output.table("workload", [workload]))]
    lines.append(f"Events: {NO_HISTORY}")
    print("\n".join(lines), file=ctx.out)


def _failovers(item: Mapping[str, Any]) -> list[list[str]]:
    """A workload's failovers, running and recent (docs/placement.md): what happened, why."""
    records = item.get("failovers") or []
    if not records:
        return []
    rows = [["CLUSTER", "CAUSE", "STATE", "STARTED", "STAND-INS", "FAILBACK", "ENDED", "MESSAGE"]]
    for r in records:
        stand_ins = ", ".join(f"{c} {n}" for c, n in sorted((r.get("stand_ins") or {}).items()))
        rows.append(
            [
                output.text(r.get("cluster_id")),
                output.text(r.get("cause")),
                output.text(r.get("state")),
                output.timestamp(r.get("start_time")),
                stand_ins or output.MISSING,
                output.timestamp(r.get("failback_time")),
                output.timestamp(r.get("end_time")),
                output.text(r.get("message")),
            ]
        )
    return rows


def _indented(text: str) -> list[str]:
    return ["  " + line for line in text.splitlines()]


def _label(key: str) -> str:
    words = [
        w.upper() if w in ("id", "ids", "gpu", "dgd", "uuid", "pci") else w.capitalize()
        for w in key.split("_")
    ]
    return " ".join(words)


# Maps: their keys are data (a device class, a digest, a label), printed as they are.
_MAP_KEYS = frozenset(
    {"live_digests", "quotas", "usage", "labels", "devices", "cluster_selector", "weights"}
)


def _fields(item: Mapping[str, Any], *, indent: int, raw_keys: bool = False) -> Iterator[str]:
    pad = " " * indent
    labels = {key: str(key) if raw_keys else _label(str(key)) for key in item}
    width = max((len(label) for label in labels.values()), default=0) + 2
    for key, value in item.items():
        label = labels[key]
        if isinstance(value, dict) and value:
            yield f"{pad}{label}:"
            yield from _fields(value, indent=indent + 2, raw_keys=key in _MAP_KEYS)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            yield f"{pad}{label}:"
            for entry in value:
                entry_lines = list(_fields(entry, indent=indent + 4))
                yield f"{pad}  - {entry_lines[0][indent + 4 :]}"
                yield from entry_lines[1:]
        else:
            yield f"{pad}{(label + ':').ljust(width)}{_scalar(key, value)}".rstrip()


def _scalar(key: str, value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "<none>"
    if isinstance(value, list):
        return ", ".join(output.text(v) for v in value)
    if key.endswith(("_time", "_seen")):
        return output.timestamp(value)
    return output.text(value)


def _conditions(item: Mapping[str, Any]) -> list[list[str]]:
    """kubectl-like conditions of a deployment, from the fields that say them."""
    status = item.get("status") or {}
    sync = item.get("sync") or {}
    rollout = item.get("rollout") or {}
    phase = output.text(item.get("admission_phase"))
    rows = [["TYPE", "STATUS", "REASON", "MESSAGE"]]
    rows.append(
        [
            "Admitted",
            _yes(phase in ("admitted", "placed", "running")),
            output.text(item.get("admission_reason")),
            output.text(item.get("admission_message")),
        ]
    )
    rows.append(
        [
            "Synced",
            "unknown" if not sync else _yes(bool(sync.get("applied"))),
            "rejected" if sync.get("rejected_error") else output.MISSING,
            output.text(sync.get("rejected_error")),
        ]
    )
    ready = status.get("ready_replicas")
    rows.append(
        [
            "Ready",
            "unknown" if not status else _yes(ready == item.get("desired_replicas")),
            output.text(status.get("reason")),
            f"{output.text(ready)}/{output.text(item.get('desired_replicas'))} ready",
        ]
    )
    rows.append(
        [
            "RolledOut",
            "unknown" if not rollout else _yes(rollout.get("state") != "rolling"),
            output.text(rollout.get("state")),
            output.MISSING,
        ]
    )
    rows.append(["Degraded", _yes(bool(item.get("degraded"))), output.MISSING, output.MISSING])
    drift = item.get("drift") or []
    rows.append(["Drifted", _yes(bool(drift)), output.MISSING, f"{len(drift)} difference(s)"])
    return rows


def _yes(value: bool) -> str:
    return "True" if value else "False"
