"""Rendering resources for people (tables) and for programs (JSON, YAML).

Tables have one row per resource and columns chosen per kind (`COLUMNS`, and `WIDE_COLUMNS`
after them for `-o wide`), or the user's (`-o custom-columns=NAME:.path,...`). JSON and
jsonpath show the hub's own JSON unchanged, so scripts see exactly what the REST API returns;
YAML shows a resource as the Kubernetes-style manifest `apply -f` reads back
(`apiVersion`, `kind`, `metadata.name`, `spec`: what is declared, `status`: what the hub
reports). A list, in every format, is kubectl's List (`{"apiVersion": "v1", "items": [...],
"kind": "List", "metadata": {"resourceVersion": ""}}`), every page already joined; `-o name`
prints `kind/name` lines and `-o jsonpath=...` kubectl's templates (cli/jsonpath.py).
Pure: strings in, string out.

Cells: a missing value (`null`, an empty string, a `status` the cluster has not reported yet)
is "-"; booleans are "true"/"false" as in the JSON.

A deployment review is not a table: cli/review.py draws it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from cli import jsonpath, kinds

# -o values; `jsonpath=TEMPLATE` and `custom-columns=SPEC` (kubectl's syntax) take an argument.
FORMATS = ("table", "wide", "json", "yaml", "name")
JSONPATH_PREFIX = "jsonpath="
COLUMNS_PREFIX = "custom-columns="
TABLE_FORMATS = ("table", "wide")
MISSING = "-"

JsonObject = dict[str, Any]
Cell = Callable[[JsonObject], str]

_FRACTION = re.compile(r"\.\d+(?=Z$|[+-]\d\d:\d\d$)")


def parse_format(text: str) -> str:
    """An -o value, checked (ValueError says what is accepted); a jsonpath template is
    compiled once here, so a bad one is a usage error before the hub is asked."""
    if text.startswith(JSONPATH_PREFIX):
        jsonpath.compile_template(text.removeprefix(JSONPATH_PREFIX))
        return text
    if text.startswith(COLUMNS_PREFIX):
        custom_columns(text)
        return text
    if text not in FORMATS:
        accepted = ", ".join((*FORMATS, "jsonpath=TEMPLATE", "custom-columns=NAME:.path,..."))
        hint = kinds.suggest(text, [*FORMATS, "jsonpath", "custom-columns"])
        raise ValueError(f"unknown output format {text!r}{hint} (expected one of: {accepted})")
    return text


def custom_columns(fmt: str) -> list[tuple[str, str]]:
    """`custom-columns=NAME:.path,READY:.status.ready` as (header, path) pairs; ValueError
    for a spec kubectl would refuse too."""
    spec = fmt.removeprefix(COLUMNS_PREFIX)
    columns = []
    for part in spec.split(","):
        header, sep, path = part.partition(":")
        if not sep or not header or not path:
            raise ValueError(
                f"custom-columns: {part!r} is not NAME:PATH (e.g. custom-columns=NAME:.name,"
                "PHASE:.phase)"
            )
        jsonpath.compile_template("{" + path + "}")
        columns.append((header, path))
    return columns


def sort_items(items: Sequence[JsonObject], path: str) -> list[JsonObject]:
    """`--sort-by=PATH` (a jsonpath, `{.x}` or `.x`): items by the value found there, numbers
    as numbers, null first. An item without the field is refused (jsonpath.MissingField),
    as kubectl refuses it."""
    expression = path.strip()
    if expression.startswith("{") and expression.endswith("}"):
        expression = expression[1:-1]
    values = [jsonpath.values(expression, item) for item in items]

    def key(found: list[Any]) -> tuple[int, Any]:
        value = found[0] if found else None
        if value is None:
            return (0, 0)
        if isinstance(value, bool | int | float):
            return (1, value)
        return (2, value if isinstance(value, str) else json.dumps(value, sort_keys=True))

    order = sorted(range(len(items)), key=lambda i: key(values[i]))
    return [items[i] for i in order]


def as_list(items: list[Any]) -> dict[str, Any]:
    """kubectl's List, as `kubectl get -o json` prints one."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def manifest(kind: kinds.Kind, item: JsonObject) -> JsonObject:
    """A resource as the Kubernetes-style object `apply -f` reads back: its name in metadata,
    its declared fields (`Kind.spec`) in spec, everything the hub reports in status."""
    spec = {key: value for key, value in item.items() if key in kind.spec}
    declared = {*kind.spec, *kind.metadata, kind.name_field}
    status = {key: value for key, value in item.items() if key not in declared}
    metadata: JsonObject = {"name": item.get(kind.name_field)}
    metadata.update({key: item[key] for key in kind.metadata if key in item})
    obj: JsonObject = {
        "apiVersion": kinds.API_VERSION,
        "kind": kind.title,
        "metadata": metadata,
    }
    if kind.spec:
        obj["spec"] = spec
    obj["status"] = status
    return obj


def is_table(fmt: str) -> bool:
    """A format for people: commands add their notes ("no workloads found", "... created")."""
    return fmt in TABLE_FORMATS


def render(
    data: Any, *, fmt: str, kind: str, name_field: str = "name", headers: bool = True
) -> str:
    """`data` is one resource or a list of them, of `kind` (a key of COLUMNS)."""
    items = data if isinstance(data, list) else [data]
    if fmt in TABLE_FORMATS:
        return table(kind, items, wide=fmt == "wide", headers=headers)
    if fmt == "name":
        return "\n".join(f"{kind}/{text(item.get(name_field))}" for item in items)
    if fmt == "yaml" and kind in kinds.words():
        shape = kinds.lookup(kind)
        objects = [manifest(shape, item) for item in items]
        return serialize(objects if isinstance(data, list) else objects[0], fmt=fmt)
    return serialize(data, fmt=fmt, headers=headers)


def serialize(data: Any, *, fmt: str, headers: bool = True) -> str:
    """JSON, YAML, custom columns or a jsonpath template's text of any JSON value, keys in
    the hub's order; a list as kubectl's List."""
    if fmt.startswith(COLUMNS_PREFIX):
        items = data if isinstance(data, list) else [data]
        columns = custom_columns(fmt)
        rows = [[h for h, _ in columns]] if headers else []
        rows += [[_column(path, item) for _, path in columns] for item in items]
        return format_rows(rows) if rows else ""
    subject = as_list(data) if isinstance(data, list) else data
    if fmt == "json":
        return json.dumps(subject, indent=2, ensure_ascii=False)
    if fmt == "yaml":
        return yaml.safe_dump(subject, sort_keys=False, allow_unicode=True).rstrip("\n")
    if fmt.startswith(JSONPATH_PREFIX):
        return jsonpath.render(fmt.removeprefix(JSONPATH_PREFIX), subject)
    if fmt in ("table", "wide", "name"):
        # Not a resource (a deletion's record, a review): its JSON is the honest table.
        return json.dumps(data, indent=2, ensure_ascii=False)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _column(path: str, item: JsonObject) -> str:
    # kubectl's custom columns: several values comma-joined, none "<none>".
    found = jsonpath.values(path, item)
    return ",".join(jsonpath.show(v) for v in found if v is not None) or "<none>"


def table(
    kind: str, items: Sequence[JsonObject], *, wide: bool = False, headers: bool = True
) -> str:
    rows = table_rows(kind, items, wide=wide, headers=headers)
    return format_rows(rows) if rows else ""


def table_rows(
    kind: str, items: Sequence[JsonObject], *, wide: bool = False, headers: bool = True
) -> list[list[str]]:
    columns = COLUMNS[kind] + (WIDE_COLUMNS.get(kind, ()) if wide else ())
    rows = [[header for header, _ in columns]] if headers else []
    rows += [[cell(item) for _, cell in columns] for item in items]
    return rows


def applied_object(answer: JsonObject) -> str:
    """An AppliedObject as the YAML manifest it is, led by comments (still valid YAML):
    which deployment, which object, its digest and since when the agent reports it."""
    lines = [
        f"# applied for deployment {text(answer.get('deployment_id'))}:"
        f" {text(answer.get('kind'))} {text(answer.get('namespace'))}/{text(answer.get('name'))}",
        f"# digest {text(answer.get('digest'))}, reported since"
        f" {timestamp(answer.get('observe_time'))}",
    ]
    body = answer.get("body") or ""
    if answer.get("truncated") or not body:
        lines.append("# body left out by the agent: larger than the stream carries (256 KiB)")
        return "\n".join(lines)
    document = json.loads(body)
    return "\n".join([*lines, serialize(document, fmt="yaml")])


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def format_rows(rows: Sequence[Sequence[str]], *, min_widths: Sequence[int] = ()) -> str:
    """Left-aligned columns two spaces apart, no trailing blanks (kubectl's look);
    `min_widths` keeps later rows in the columns of a table printed before (--watch)."""
    widths = column_widths(rows)
    widths = [max(w, m) for w, m in zip(widths, [*min_widths, *([0] * len(widths))], strict=False)]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


# -- cells ------------------------------------------------------------------------------------


def text(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def timestamp(value: Any) -> str:
    """RFC 3339 to the second: the hub's nanoseconds are noise in a table."""
    return _FRACTION.sub("", value) if isinstance(value, str) and value else MISSING


def field(*path: str) -> Cell:
    """The value at a dotted path; "-" when any step is null (an unreported `status`)."""

    def cell(item: JsonObject) -> str:
        value: Any = item
        for key in path:
            if not isinstance(value, dict):
                return MISSING
            value = value.get(key)
        return text(value)

    return cell


def _phase(key: str) -> Cell:
    def cell(item: JsonObject) -> str:
        phase = text(item.get(key))
        return f"{phase} (degraded)" if item.get("degraded") else phase

    return cell


def _workload_ready(item: JsonObject) -> str:
    return f"{text(item.get('ready_replicas'))}/{text(item.get('replicas'))}"


def _workload_deployments(item: JsonObject) -> str:
    clusters = [_deployment_summary(d) for d in item.get("deployments") or []]
    return ",".join(clusters) or MISSING


def _deployment_summary(summary: JsonObject) -> str:
    """The cluster, with a note only when the deployment is out of the ordinary: an observed
    one (the agent never writes it) or a rollout in progress ("west (observed, rolling)")."""
    notes = [
        note
        for key, note in (("authority", "observed"), ("rollout_state", "rolling"))
        if summary.get(key) == note
    ]
    cluster = text(summary.get("cluster_id"))
    return f"{cluster} ({', '.join(notes)})" if notes else cluster


def _deployment_ready(item: JsonObject) -> str:
    # Ready is the cluster's word: unknown ("-") until it reports, never a guessed 0.
    return f"{field('status', 'ready_replicas')(item)}/{text(item.get('desired_replicas'))}"


def _deployment_rollout(item: JsonObject) -> str:
    """`converged`, or `rolling 1/2 (+1 surge)`: ready replicas on the target digest out of the
    desired ones, and the extra replicas admitted so that old and new run side by side."""
    rollout = item.get("rollout")
    if not isinstance(rollout, dict) or rollout.get("state") is None:
        return MISSING
    if rollout["state"] != "rolling":
        return text(rollout["state"])
    progress = (
        f"rolling {text(rollout.get('ready_on_target'))}/{text(item.get('desired_replicas'))}"
    )
    surge = rollout.get("surge_replicas") or 0
    return f"{progress} (+{surge} surge)" if surge else progress


def _deployment_drift(item: JsonObject) -> str:
    # How many ways the cluster differs from the declaration; `get -o json` or `authority
    # review` says which. The hub lists drift only once the cluster reported: none reads "-".
    drift = item.get("drift") or []
    return str(len(drift)) if drift else MISSING


def _discovered_ready(item: JsonObject) -> str:
    # Both are the DGD's own counts, read off the cluster: no "-" for an unknown here.
    return f"{text(item.get('ready_replicas'))}/{text(item.get('replicas'))}"


def _cluster_connected(item: JsonObject) -> str:
    # A cluster no agent ever connected for is not merely disconnected: it never reported.
    return "never" if item.get("never_connected") else text(item.get("connected"))


def _cluster_stale(item: JsonObject) -> str:
    # Stale means it went quiet; one never heard from cannot have: unknown, not "false".
    return MISSING if item.get("never_connected") else text(item.get("stale"))


def _cluster_devices(item: JsonObject) -> str:
    if item.get("never_connected"):
        return MISSING  # nothing reported: not "0/0 free"
    devices = item.get("devices") or {}
    parts = [
        f"{name} {text(cap.get('free'))}/{text(cap.get('total'))} free"
        for name, cap in sorted(devices.items())
    ]
    return ", ".join(parts) or MISSING


def _cluster_mode(item: JsonObject) -> str:
    # What its agent said when it connected: a read-only agent applies nothing, so what is
    # admitted there does not run. Unknown until an agent ever connected.
    if not item.get("last_seen"):
        return MISSING
    return "read-only" if item.get("read_only") else "managing"


def _cluster_scheduling(item: JsonObject) -> str:
    # Like kubectl's SchedulingDisabled: whether new placements may land here, and if only in
    # part, what is cordoned (wingsmith cordon / uncordon / drain).
    if item.get("draining"):
        return "draining"
    if item.get("cordoned"):
        return "cordoned"
    parts = [*(item.get("cordoned_device_classes") or [])]
    parts += [f"node {n}" for n in item.get("cordoned_nodes") or []]
    return f"cordoned: {', '.join(parts)}" if parts else "open"


def _count(key: str) -> Cell:
    return lambda item: str(len(item.get(key) or []))


def _before_after(item: JsonObject, key: str) -> str:
    """Before -> after ("2->3") when the call changes it, else the value ("2"); a created
    deployment starts at 0 and a removed one ends there."""
    before, after = item.get(f"{key}_before") or 0, item.get(key) or 0
    return str(after) if before == after else f"{before}->{after}"


def _change_generation(item: JsonObject) -> str:
    """The generation it would run ("1->2" for a new serving config); a removed or created
    deployment has one side only."""
    before, after = item.get("generation_before") or 0, item.get("generation") or 0
    if before and after and before != after:
        return f"{before}->{after}"
    return str(after or before)


def _project_quotas(item: JsonObject) -> str:
    quotas = item.get("quotas") or {}
    usage = item.get("usage") or {}
    parts = []
    for name in sorted({*quotas, *usage}):
        used = usage.get(name) or {}
        limit = quotas.get(name, used.get("limit", 0))
        parts.append(f"{name} {used.get('used', 0)}+{used.get('reserved', 0)}/{limit}")
    return ", ".join(parts) or MISSING


def _priority(item: JsonObject) -> str:
    # A hub from before priorities sends none: every workload there is what is now "normal".
    return text(item.get("priority") or "normal")


def _replica_ready(item: JsonObject) -> str:
    # A quiet cluster's replica is not known ready or not: the hub counts it not ready
    # (`ready: false`), but "false" here would claim the cluster said so (docs/cli.md).
    if item.get("stale"):
        return "unknown (stale)"
    return text(item.get("ready"))


def _device_ids(item: JsonObject) -> str:
    return ",".join(item.get("device_ids") or []) or MISSING


COLUMNS: dict[str, tuple[tuple[str, Cell], ...]] = {
    "workload": (
        ("NAME", field("name")),
        ("PROJECT", field("project")),
        ("PHASE", _phase("phase")),
        ("READY/DESIRED", _workload_ready),
        ("DEVICE-CLASS", field("device_class")),
        ("DEPLOYMENTS", _workload_deployments),
        ("PRIORITY", _priority),
    ),
    "deployment": (
        ("NAME", field("name")),
        ("CLUSTER", field("cluster_id")),
        ("PHASE", _phase("admission_phase")),
        ("REASON", field("admission_reason")),
        ("READY/DESIRED", _deployment_ready),
        # What admission granted of the desired replicas (below desired while a scale-up waits).
        ("ADMITTED", field("admitted_replicas")),
        ("ROLLOUT", _deployment_rollout),
        ("GENERATION", field("generation")),
        ("DIGEST", field("serving_digest")),
        ("AUTHORITY", field("authority")),
        ("DRIFT", _deployment_drift),
        ("ENABLED", field("enabled")),
        ("STALE", field("status", "stale")),
    ),
    "cluster": (
        ("CLUSTER", field("cluster_id")),
        ("MODE", _cluster_mode),
        ("CONNECTED", _cluster_connected),
        ("STALE", _cluster_stale),
        ("LAST-SEEN", lambda item: timestamp(item.get("last_seen"))),
        ("NODES", _count("nodes")),
        ("DEVICES", _cluster_devices),
        ("DGD", field("dgd_version")),
        ("SCHEDULING", _cluster_scheduling),
    ),
    "project": (
        ("NAME", field("name")),
        ("QUOTA (USED+RESERVED/LIMIT)", _project_quotas),
    ),
    "replica": (
        ("NAME", field("name")),
        ("DEPLOYMENT", field("deployment_id")),
        ("NODE", field("node_id")),
        ("READY", _replica_ready),
        ("DEVICES", _count("device_ids")),
        ("DIGEST", field("serving_digest")),
    ),
    "allocation": (
        ("REPLICA", field("replica_id")),
        ("POD", field("pod_name")),
        ("NODE", field("node_id")),
        ("DEVICES", _device_ids),
        ("PROJECT", field("project")),
    ),
    "discovered": (
        # name is the ref "<cluster>.<namespace>.<name>", usable in every discovered command.
        ("NAME", field("name")),
        ("STATE", field("state")),
        ("GONE", field("gone")),
        ("ENGINE", field("backend_framework")),
        ("VERSION", field("engine_version")),
        ("READY/DESIRED", _discovered_ready),
        ("DEVICE-CLASS", field("device_class")),
        ("WORKLOAD", field("workload_id")),
    ),
    "token": (
        ("NAME", field("name")),
        ("ROLE", field("role")),
        ("PROJECTS", lambda item: ",".join(item.get("projects") or []) or MISSING),
        ("CREATED", lambda item: timestamp(item.get("create_time"))),
        ("BY", field("created_by")),
        ("REVOKED", lambda item: timestamp(item.get("revoke_time"))),
    ),
    # One deployment a dry run (validate_only) would change: before -> after.
    "change": (
        ("DEPLOYMENT", field("name")),
        ("CLUSTER", field("cluster_id")),
        ("EFFECTS", lambda item: ",".join(item.get("effects") or ()) or MISSING),
        ("REPLICAS", lambda item: _before_after(item, "desired_replicas")),
        ("ADMITTED", lambda item: _before_after(item, "admitted_replicas")),
        ("READY", field("ready_replicas")),
        ("PHASE", _phase("admission_phase")),
        ("REASON", field("admission_reason")),
        ("GENERATION", _change_generation),
    ),
    "audit": (
        ("TIME", lambda item: timestamp(item.get("time"))),
        ("ACTOR", field("actor")),
        ("EDGE", field("edge")),
        ("ACTION", field("action")),
        ("TARGET", field("target")),
        ("OUTCOME", field("outcome")),
        ("MESSAGE", field("message")),
    ),
}


def _labels(item: JsonObject) -> str:
    labels = item.get("labels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or MISSING


def _leader(item: JsonObject) -> str:
    leaders = [a for a in item.get("agents") or [] if a.get("leader")]
    return text(leaders[0].get("node_name") or leaders[0].get("instance")) if leaders else MISSING


def _sync(item: JsonObject) -> str:
    sync = item.get("sync")
    if not isinstance(sync, dict):
        return MISSING
    if sync.get("rejected_error"):
        return f"rejected (generation {text(sync.get('rejected_generation'))})"
    return "applied" if sync.get("applied") else "pending"


# `-o wide`: these columns follow COLUMNS' (kubectl's wide adds, never reorders).
WIDE_COLUMNS: dict[str, tuple[tuple[str, Cell], ...]] = {
    "workload": (
        ("ID", field("workload_id")),
        ("ENGINE", field("serving", "engine")),
        ("VERSION", field("serving", "engine_version")),
        ("MODEL", field("serving", "model")),
        ("LABELS", _labels),
    ),
    "deployment": (
        ("ID", field("deployment_id")),
        ("DEVICES/REPLICA", field("devices_per_replica")),
        ("SYNC", _sync),
        ("MESSAGE", field("admission_message")),
    ),
    "cluster": (
        ("LEADER", _leader),
        ("AGENT", field("agent_version")),
        ("LABELS", _labels),
    ),
    "project": (
        ("CREATED", lambda item: timestamp(item.get("create_time"))),
        ("LABELS", _labels),
    ),
    "replica": (
        ("ID", field("replica_id")),
        ("CLUSTER", field("cluster_id")),
        ("VERSION", field("engine_version")),
        ("DEVICE-IDS", _device_ids),
    ),
    "allocation": (
        ("DEPLOYMENT", field("deployment_id")),
        ("CLUSTER", field("cluster_id")),
    ),
    "discovered": (
        ("ID", field("discovered_id")),
        ("FIRST-SEEN", lambda item: timestamp(item.get("first_seen"))),
        ("LAST-SEEN", lambda item: timestamp(item.get("last_seen"))),
    ),
}
