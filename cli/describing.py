"""`describe KIND REF`: one object drawn for people, kubectl-shaped.

Its fields as indented `Key: value` lines (maps' keys as they are), then its conditions, then
the objects related to it (a workload's deployments, a deployment's replicas, ...: `RELATED`),
each listed through the hub's own filters. Over the same REST client and output as
cli/commands.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cli import cells, kinds, output
from cli.commands import Context, resource_path, suggesting


@dataclass(frozen=True)
class Related:
    title: str
    kind: kinds.Kind
    # The list filter (query parameter -> the described object's field holding its value).
    params: Mapping[str, str]


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
                cells.text(r.get("cluster_id")),
                cells.text(r.get("cause")),
                cells.text(r.get("state")),
                cells.timestamp(r.get("start_time")),
                stand_ins or cells.MISSING,
                cells.timestamp(r.get("failback_time")),
                cells.timestamp(r.get("end_time")),
                cells.text(r.get("message")),
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
        return ", ".join(cells.text(v) for v in value)
    if key.endswith(("_time", "_seen")):
        return cells.timestamp(value)
    return cells.text(value)


def _conditions(item: Mapping[str, Any]) -> list[list[str]]:
    """kubectl-like conditions of a deployment, from the fields that say them."""
    status = item.get("status") or {}
    sync = item.get("sync") or {}
    rollout = item.get("rollout") or {}
    phase = cells.text(item.get("admission_phase"))
    rows = [["TYPE", "STATUS", "REASON", "MESSAGE"]]
    rows.append(
        [
            "Admitted",
            _yes(phase in ("admitted", "placed", "running")),
            cells.text(item.get("admission_reason")),
            cells.text(item.get("admission_message")),
        ]
    )
    rows.append(
        [
            "Synced",
            "unknown" if not sync else _yes(bool(sync.get("applied"))),
            "rejected" if sync.get("rejected_error") else cells.MISSING,
            cells.text(sync.get("rejected_error")),
        ]
    )
    ready = status.get("ready_replicas")
    rows.append(
        [
            "Ready",
            "unknown" if not status else _yes(ready == item.get("desired_replicas")),
            cells.text(status.get("reason")),
            f"{cells.text(ready)}/{cells.text(item.get('desired_replicas'))} ready",
        ]
    )
    rows.append(
        [
            "RolledOut",
            "unknown" if not rollout else _yes(rollout.get("state") != "rolling"),
            cells.text(rollout.get("state")),
            cells.MISSING,
        ]
    )
    rows.append(["Degraded", _yes(bool(item.get("degraded"))), cells.MISSING, cells.MISSING])
    drift = item.get("drift") or []
    rows.append(["Drifted", _yes(bool(drift)), cells.MISSING, f"{len(drift)} difference(s)"])
    return rows


def _yes(value: bool) -> str:
    return "True" if value else "False"


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
