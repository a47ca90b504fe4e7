"""The table columns of each kind: `COLUMNS` (`get`), then `WIDE_COLUMNS` after them
(`-o wide`, which adds and never reorders, as kubectl's), and the cells that compute them
from the hub's JSON. Pure; cli/output.py draws the tables.
"""

from __future__ import annotations

from cli.cells import MISSING, Cell, JsonObject, field, text, timestamp


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
