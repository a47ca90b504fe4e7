"""The hub's invariants, as small named checks over one consistent snapshot of its store.

Each check takes a `Snapshot` (read in one read transaction of the store, so an agent's
report or a user's call landing meanwhile cannot make the numbers disagree with each other)
and returns the violations it found, as sentences that name the project, cluster or
deployment and the numbers; an empty list means the promise holds. `check_all` runs them
all; `assert_holds` fails a test with every violation at once.

The promises (docs/admission.md "Invariants"; issue 20):
1. quota: a project's charge (used + reserved, a replica and its failover stand-in counted
   once) per device class never exceeds its quota, except by what a quota *lowering* left
   running (the caller passes that `allowance`) and by devices pods hold that the hub did not
   admit (an observed deployment's pods, which run whatever it decides; a managed one's pods
   beyond its admitted replicas, going after a scale-down, a preemption or a failover's end);
   and while a project is over, its charge does not grow.
2. capacity: per cluster and class, allocated + reserved <= verified healthy devices; no
   device in two live allocations; every allocation on the node its device is on, a node the
   hub holds and that is not gone, and of the class of its deployment.
3. reservations: devices are reserved only for replicas some agent will create: a managed,
   enabled deployment on a cluster that is not read-only, with a node that can hold a replica
   (an observed deployment, or one on a read-only cluster, only for replicas that exist
   without our agent: its pods, and those its DGD asks for, which Dynamo keeps).
4. admission: admitted <= desired (surge only while rolling, at most the admitted); a
   deployment with fewer replicas admitted than desired says why (reason and message); one
   with none waiting says nothing.
5. state words: the words' own checks (tests/words.py, issue 20 section 3), run by
   `state_words` over what a user reads from a hub.
6. acknowledged writes: `readable` compares what a call acknowledged with what any hub then
   reads back.

Used by tests/integration/test_invariants_model.py (the model-based test), by the soak mode
(tests/soak.py) and by example tests that want the same promise checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hub.model import REASON_DISABLED, Deployment
from hub.service import credit
from hub.store import accounting, deployments, observations, projects
from hub.store.port import Store
from tests import words

QuotaKey = tuple[str, str]
CapacityKey = tuple[str, str]


@dataclass(frozen=True)
class Snapshot:
    """What the invariants read, all from one read transaction."""

    quota_limits: Mapping[QuotaKey, int]
    # (project, class) -> used + reserved - failover credit: the charge admission counts.
    charged: Mapping[QuotaKey, int]
    used: Mapping[QuotaKey, int]
    reserved: Mapping[QuotaKey, int]
    # (cluster, class) -> (verified healthy total, allocated, reserved)
    capacity: Mapping[CapacityKey, tuple[int, int, int]]
    deployments: Sequence[Deployment]
    held: Mapping[str, int]
    # deployment id -> devices reserved for it (reserved(d), docs/admission.md)
    reserved_by_deployment: Mapping[str, int]
    read_only_clusters: frozenset[str]
    # deployment id -> the replicas its DGD asks for as the cluster last reported them
    reported: Mapping[str, int]
    # (cluster, class) -> the most verified healthy devices of the class on one node
    largest_node: Mapping[CapacityKey, int]
    # Devices (cluster, uuid) in more than one live allocation -> the pods holding them
    shared_devices: Mapping[tuple[str, str], tuple[str, ...]]
    # Allocations whose node is not their device's, or is gone or unknown, or whose device's
    # class is not their deployment's: (cluster, pod, device, why)
    misplaced: Sequence[tuple[str, str, str, str]]
    # Devices the hub did not admit that pods hold, per (project, class): an observed
    # deployment's pods (they ran before any admission and run whatever it decides), and a
    # managed deployment's beyond its admitted replicas (going after a scale-down, a
    # preemption or a failover's end): charged while they run, but nothing admitted them.
    releasing: Mapping[QuotaKey, int] = field(default_factory=dict)


def read(store: Store) -> Snapshot:
    """Everything the checks need, in one read transaction of `store`."""
    with store.read() as conn:
        cluster_ids = [r["cluster_id"] for r in conn.execute("SELECT cluster_id FROM clusters")]
        found = deployments.on_clusters(conn, sorted(cluster_ids))
        ids = [d.deployment_id for d in found]
        held = accounting.held_by_deployment(conn, ids)
        charges = accounting.charges_by_deployment(conn, ids)
        quota = accounting.quota_charges(conn)
        names = sorted({p for p, _ in quota})
        credits = credit.read(conn, names) if names else credit.Credits()
        capacity = {
            key: (c.total, c.allocated, c.reserved)
            for key, c in accounting.capacities(conn).items()
        }
        read_only = frozenset(
            r["cluster_id"]
            for r in conn.execute("SELECT cluster_id FROM clusters WHERE read_only = 1")
        )
        largest: dict[CapacityKey, int] = {}
        for r in conn.execute(
            "SELECT dv.cluster_id AS cluster_id, dv.device_class AS device_class, dv.node_id AS"
            " node_id, COUNT(*) AS n FROM devices dv JOIN nodes n ON n.cluster_id ="
            " dv.cluster_id AND n.node_id = dv.node_id WHERE dv.verified = 1 AND dv.healthy = 1"
            " AND n.absent = 0 GROUP BY dv.cluster_id, dv.device_class, dv.node_id"
        ):
            key = (r["cluster_id"], r["device_class"])
            largest[key] = max(largest.get(key, 0), r["n"])
        shared: dict[tuple[str, str], set[str]] = {}
        for r in conn.execute(
            "SELECT a.cluster_id AS cluster_id, a.device_id AS device_id, a.namespace AS ns,"
            " a.pod_name AS pod FROM allocations a WHERE EXISTS (SELECT 1 FROM allocations b"
            " WHERE b.cluster_id = a.cluster_id AND b.device_id = a.device_id AND"
            " (b.namespace <> a.namespace OR b.pod_name <> a.pod_name))"
        ):
            shared.setdefault((r["cluster_id"], r["device_id"]), set()).add(f"{r['ns']}/{r['pod']}")
        misplaced: list[tuple[str, str, str, str]] = []
        for r in conn.execute(
            "SELECT a.cluster_id AS cluster_id, a.pod_name AS pod, a.device_id AS device_id,"
            " a.node_id AS node_id, dv.node_id AS device_node, dv.device_class AS device_class,"
            " d.device_class AS wanted FROM allocations a"
            " JOIN devices dv ON dv.cluster_id = a.cluster_id AND dv.uuid = a.device_id"
            " LEFT JOIN replicas r ON r.cluster_id = a.cluster_id AND r.namespace = a.namespace"
            "  AND r.name = a.pod_name"
            " LEFT JOIN deployments d ON d.deployment_id = r.deployment_id"
        ):
            if r["node_id"] != r["device_node"]:
                why = f"allocated on node {r['node_id']}, device is on {r['device_node']}"
                misplaced.append((r["cluster_id"], r["pod"], r["device_id"], why))
            elif r["wanted"] is not None and r["wanted"] != r["device_class"]:
                why = f"device is {r['device_class']}, its deployment wants {r['wanted']}"
                misplaced.append((r["cluster_id"], r["pod"], r["device_id"], why))
        # No key holds an allocation to its node (migration 0024): a node gone (absent) or
        # deleted (with its cluster) must have taken its allocations with it.
        for r in conn.execute(
            "SELECT a.cluster_id AS cluster_id, a.pod_name AS pod, a.device_id AS device_id,"
            " a.node_id AS node_id, n.node_id AS known FROM allocations a LEFT JOIN nodes n"
            " ON n.cluster_id = a.cluster_id AND n.node_id = a.node_id"
            " WHERE n.node_id IS NULL OR n.absent = 1"
        ):
            gone = "absent" if r["known"] is not None else "not held by the hub"
            why = f"allocated on node {r['node_id']}, which is {gone}"
            misplaced.append((r["cluster_id"], r["pod"], r["device_id"], why))
        limits = projects.quota_limits(conn)
        reported = {
            key: report.applied_replicas
            for key, report in observations.reports(conn, ids).items()
            if report is not None and not report.absent
        }
    releasing: dict[QuotaKey, int] = {}
    for d in found:
        # An observed deployment's pods run whatever the hub says (docs/adoption.md: a
        # promoted workload is charged for what runs); a managed one's beyond its admission
        # are going.
        beyond = held.get(d.deployment_id, 0) - (
            _admitted_devices(d) if d.authority == "managed" else 0
        )
        if beyond > 0:
            key = (d.project, d.device_class)
            releasing[key] = releasing.get(key, 0) + beyond
    return Snapshot(
        quota_limits=limits,
        charged={
            key: used + reserved - credits.credit.get(key, 0)
            for key, (used, reserved) in quota.items()
        },
        used={key: used for key, (used, _) in quota.items()},
        reserved={key: reserved for key, (_, reserved) in quota.items()},
        capacity=capacity,
        deployments=found,
        held=held,
        reserved_by_deployment={
            d.deployment_id: max(0, charges.get(d.deployment_id, 0) - held.get(d.deployment_id, 0))
            for d in found
        },
        read_only_clusters=read_only,
        reported=reported,
        largest_node=largest,
        shared_devices={k: tuple(sorted(v)) for k, v in shared.items()},
        misplaced=misplaced,
        releasing=releasing,
    )


def _admitted_devices(d: Deployment) -> int:
    return (d.admitted_replicas + d.surge_replicas) * d.devices_per_replica


# -- 1. quota -------------------------------------------------------------------------------


def quota_within_limits(
    snap: Snapshot, allowance: Mapping[QuotaKey, int] | None = None
) -> list[str]:
    """A project's charge per class fits its quota, plus what a quota lowering left running
    (`allowance`: the charge it had when its quota was lowered below it, as the caller keeps
    it) and what pods hold beyond their admitted replicas (adopted before any admission, or
    going: `Snapshot.releasing`)."""
    allowance = allowance or {}
    found = []
    for key, charged in sorted(snap.charged.items()):
        limit = snap.quota_limits.get(key, 0)
        bound = max(limit, allowance.get(key, 0)) + snap.releasing.get(key, 0)
        if charged > bound:
            project, device_class = key
            found.append(
                f"quota: project {project} is charged {charged} {device_class} (used"
                f" {snap.used.get(key, 0)}, reserved {snap.reserved.get(key, 0)}) over its"
                f" quota of {limit}"
                + (f" (a lowering left {allowance[key]} running)" if key in allowance else "")
            )
    return found


def nothing_admitted_while_over(before: Snapshot, after: Snapshot) -> list[str]:
    """A project over its quota (a lowering left it there) gets no more: its charge does not
    grow until it is back within."""
    found = []
    for key, was in sorted(before.charged.items()):
        limit = before.quota_limits.get(key, 0)
        now = after.charged.get(key, 0)
        if was > limit and now > was and now > after.quota_limits.get(key, 0):
            project, device_class = key
            found.append(
                f"quota: project {project} was over its {device_class} quota ({was} of"
                f" {limit}) and its charge grew to {now}"
            )
    return found


# -- 2. capacity ----------------------------------------------------------------------------


def capacity_within_devices(snap: Snapshot) -> list[str]:
    """Per cluster and class: allocated + reserved <= verified healthy devices."""
    found = []
    for (cluster, device_class), (total, allocated, reserved) in sorted(snap.capacity.items()):
        if allocated + reserved > total:
            holders = [
                f"{d.workload_name}.{d.cluster_id} reserves"
                f" {snap.reserved_by_deployment.get(d.deployment_id, 0)}"
                for d in snap.deployments
                if d.cluster_id == cluster
                and d.device_class == device_class
                and snap.reserved_by_deployment.get(d.deployment_id, 0)
            ]
            found.append(
                f"capacity: cluster {cluster} {device_class}: allocated {allocated} + reserved"
                f" {reserved} > {total} verified devices ({'; '.join(holders) or 'no reserver'})"
            )
    return found


def devices_allocated_once(snap: Snapshot) -> list[str]:
    return [
        f"capacity: device {device} of cluster {cluster} is in {len(pods)} live allocations"
        f" ({', '.join(pods)})"
        for (cluster, device), pods in sorted(snap.shared_devices.items())
    ]


def allocations_in_place(snap: Snapshot) -> list[str]:
    return [
        f"capacity: pod {pod} on cluster {cluster} holds device {device}: {why}"
        for cluster, pod, device, why in snap.misplaced
    ]


# -- 3. reservations ------------------------------------------------------------------------


def reserved_only_for_creatable(snap: Snapshot) -> list[str]:
    """Reserved devices only for replicas an agent will create."""
    found = []
    for d in snap.deployments:
        reserved = snap.reserved_by_deployment.get(d.deployment_id, 0)
        if not reserved:
            continue
        name = f"{d.workload_name}.{d.cluster_id}"
        why = ""
        # Replicas that exist without our agent creating them: its pods, and those its DGD
        # asks for as the cluster reports (Dynamo keeps them). Before its first report an
        # observed deployment is the DGD it was promoted from.
        running = snap.held.get(d.deployment_id, 0) // max(1, d.devices_per_replica)
        exists = max(running, snap.reported.get(d.deployment_id, 0))
        beyond = d.admitted_replicas + d.surge_replicas > exists
        if d.authority != "managed":
            if d.deployment_id in snap.reported and beyond:
                why = (
                    f"it is {d.authority}: the agent never creates its replicas"
                    f" ({d.admitted_replicas} admitted, {exists} exist)"
                )
        elif not d.enabled:
            why = "it is disabled"
        elif d.cluster_id in snap.read_only_clusters:
            # Only running pods: a report there may predate the agent turning read-only.
            if d.admitted_replicas + d.surge_replicas > running:
                why = (
                    f"cluster {d.cluster_id} is read-only: its agent creates nothing"
                    f" ({d.admitted_replicas} admitted, {running} running)"
                )
        else:
            largest = snap.largest_node.get((d.cluster_id, d.device_class))
            # A cluster that never reported devices is judged when it does.
            if largest is not None and largest < d.devices_per_replica:
                why = (
                    f"no node of cluster {d.cluster_id} has {d.devices_per_replica}"
                    f" {d.device_class} (the largest has {largest})"
                )
        if why:
            found.append(f"reservation: {name} reserves {reserved} {d.device_class} but {why}")
    return found


# -- 4. admission ---------------------------------------------------------------------------


def admitted_within_desired(snap: Snapshot) -> list[str]:
    """admitted <= desired; surge only while rolling, at most the admitted; fewer admitted
    than desired says why; none waiting says nothing."""
    found = []
    for d in snap.deployments:
        name = f"{d.workload_name}.{d.cluster_id}"
        if d.admitted_replicas > d.desired_replicas:
            found.append(
                f"admission: {name} has {d.admitted_replicas} admitted of"
                f" {d.desired_replicas} desired"
            )
        if d.surge_replicas and (not d.rolling or d.surge_replicas > d.admitted_replicas):
            found.append(
                f"admission: {name} has {d.surge_replicas} surge replicas"
                f" ({d.admitted_replicas} admitted, rolling={d.rolling})"
            )
        if not d.enabled:
            if d.admitted_replicas or d.admission_reason != REASON_DISABLED:
                found.append(
                    f"admission: disabled {name} has {d.admitted_replicas} admitted, reason"
                    f" {d.admission_reason!r}"
                )
            continue
        waiting = d.admitted_replicas < d.desired_replicas
        if waiting and not (d.admission_reason and d.admission_message):
            found.append(
                f"admission: {name} has {d.admitted_replicas} of {d.desired_replicas} admitted"
                f" and says no why (reason {d.admission_reason!r},"
                f" message {d.admission_message!r})"
            )
        if not waiting and (d.admission_reason or d.admission_message):
            found.append(
                f"admission: {name} waits for nothing ({d.admitted_replicas} of"
                f" {d.desired_replicas} admitted) but says {d.admission_reason!r}:"
                f" {d.admission_message!r}"
            )
    return found


# -- 5. state words -------------------------------------------------------------------------


def state_words(ctx: Any) -> list[str]:
    """State words agree with the facts they name (issue 20 section 3: draining reads
    cordoned, failed_over, preempted, converged, recovering): the words' own checks
    (tests/words.py), run over what a user reads from the hub whose service context `ctx` is
    (a ServiceContext: its settings say when a cluster is stale)."""
    found: list[str] = words.check(ctx)
    return found


# -- 6. acknowledged writes -----------------------------------------------------------------


def readable(
    acknowledged: Mapping[str, Any], read_back: Mapping[str, Any], *, what: str
) -> list[str]:
    """Every field a call acknowledged reads back the same (from any hub)."""
    return [
        f"write: {what}.{key} was acknowledged as {value!r} but reads {read_back.get(key)!r}"
        for key, value in sorted(acknowledged.items())
        if read_back.get(key) != value
    ]


CHECKS: tuple[Callable[[Snapshot], list[str]], ...] = (
    capacity_within_devices,
    devices_allocated_once,
    allocations_in_place,
    reserved_only_for_creatable,
    admitted_within_desired,
)


def check_all(
    snap: Snapshot,
    *,
    before: Snapshot | None = None,
    allowance: Mapping[QuotaKey, int] | None = None,
) -> list[str]:
    found = quota_within_limits(snap, allowance)
    if before is not None:
        found += nothing_admitted_while_over(before, snap)
    for check in CHECKS:
        found += check(snap)
    return found


def assert_holds(store: Store, **kwargs: Any) -> Snapshot:
    snap = read(store)
    found = check_all(snap, **kwargs)
    assert not found, "invariants broken:\n" + "\n".join(found)
    return snap
