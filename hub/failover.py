"""Failover, failback and drain: where a lost cluster's replicas stand in, and when they go.
Pure.

hub/service/failover.py reads a `WorkloadState` per workload and the `Site`s of its clusters
inside one write transaction, calls `decide`, and applies the `Plan` there (deployments'
desired replicas, failover records, deployments removed), then runs admission as usual. The
rule (docs/placement.md "Failover and failback", "Cordon and drain"):

- A cluster is *lost* to a workload when it drains (every workload's managed deployments), or,
  for a workload with placement.failover, when it is cordoned for the workload's class or has
  been silent for longer than the toleration.
- A managed deployment on a lost cluster gets stand-ins: its replicas (not counting stand-ins
  it carries for others) are placed *additionally* on the workload's other eligible clusters
  that are open (not lost, not stale, not cordoned), by the placement rule on top of their
  shares (most preferred step first, when the workload has placement.preferences). Nothing
  is deleted on the lost cluster; admission decides as usual where the
  stand-ins run (hub/admission.py charges a replica and its stand-in to the quota once).
- Failback: once the cluster is no longer lost, reports (not stale), is not cordoned and its
  deployment has all its replicas ready, continuously for the stabilization window, the
  stand-ins are removed. Any interruption restarts the window (hysteresis: a cluster going up
  and down faster than the window never moves replicas back and forth). A new failover of the
  same cluster needs it lost again, which takes the toleration: no flapping either way.
- Drain (make-before-break): once every cluster holding stand-ins for a draining cluster's
  deployment runs all its desired replicas ready, that deployment is removed and its
  stand-ins become ordinary shares. A drain stopped (uncordon) removes the stand-ins at once:
  the deployment never stopped running. A placement change that drops a cluster moves its
  deployment the same way (cause `placement`; hub/service/failover.py `leave` records the
  replacements the update placed as its stand-ins); putting the cluster back stops it.
- Words: a record reads `failed_over` only with stand-ins placed, else `stays` (nothing
  failed over: its replicas stay where they are); `recovering` only once the cluster reports
  its replicas ready, in a report made since the failover began when it was lost for silence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hub import placement
from hub.model import FailoverPolicy, FailoverRecord


@dataclass(frozen=True)
class Site:
    """One cluster as failover sees it, for one workload's device class."""

    cluster_id: str
    stale: bool = False
    # Seconds since its agent's last message (0 when it reports).
    silent_s: float = 0.0
    # Cordoned for the workload's class (or draining).
    closed: bool = False
    draining: bool = False


@dataclass(frozen=True)
class Share:
    """One deployment of the workload."""

    deployment_id: str
    cluster_id: str
    # Desired replicas, stand-ins included.
    desired: int
    # Ready replicas the cluster reports (0 while it is stale).
    ready: int
    # Managed, enabled and not adopted: only those are ever moved or removed.
    movable: bool = True
    # When the cluster observed `ready` (seconds, its agent's clock); None: no report yet.
    observed_s: float | None = None


@dataclass(frozen=True)
class WorkloadState:
    workload_id: str
    policy: FailoverPolicy | None
    devices_per_replica: int
    eligible: Sequence[str]
    shares: Sequence[Share]
    records: Sequence[FailoverRecord] = ()
    # The workload's placement preferences as steps (placement.resolve_steps): stand-ins go
    # to the most preferred open clusters first, as new replicas do. Empty: level over all.
    steps: Sequence[placement.Step] = ()


@dataclass
class Plan:
    """What to apply: new desired replicas per cluster (a cluster without a deployment gets
    one), records to save, deployments to remove."""

    desired: dict[str, int] = field(default_factory=dict)
    records: list[FailoverRecord] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.desired or self.records or self.remove)


# A cluster that left the workload's placement (a placement change): its deployment goes
# make-before-break, as in a drain.
CAUSE_PLACEMENT = "placement"
# Make-before-break moves: the lost deployment is removed once its stand-ins run.
MOVES = ("draining", CAUSE_PLACEMENT)


def lost_cause(site: Site | None, policy: FailoverPolicy | None) -> str | None:
    """Why this cluster is lost to a workload with this policy, or None."""
    if site is None:
        return None
    if site.draining:
        return "draining"
    if policy is None:
        return None
    if site.closed:
        return "cordoned"
    if site.stale and site.silent_s >= policy.toleration_s:
        return "stale"
    return None


def lost_state(stand_ins: Mapping[str, int]) -> str:
    """The word for a lost cluster's record: `failed_over` only when stand-ins were placed;
    `stays` when no other eligible cluster was open, so its replicas stay where they are (a
    drain of a pinned workload, say): nothing failed over."""
    return "failed_over" if any(stand_ins.values()) else "stays"


def decide(
    state: WorkloadState,
    sites: Mapping[str, Site],
    rooms: Mapping[str, placement.ClusterRoom],
    now: float,
) -> Plan:
    policy = state.policy
    shares = {s.cluster_id: s for s in state.shares}
    active = {r.cluster_id: r for r in state.records if r.active}
    standing = Counter[str]()
    for record in active.values():
        standing.update(record.stand_ins)
    desired = {c: s.desired for c, s in shares.items()}
    plan = Plan()

    def drop_stand_ins(record: FailoverRecord) -> None:
        for cluster_id, count in record.stand_ins.items():
            desired[cluster_id] = max(0, desired.get(cluster_id, 0) - count)
            standing[cluster_id] -= count

    for record in active.values():
        share = shares.get(record.cluster_id)
        cause = lost_cause(sites.get(record.cluster_id), policy)
        if record.cause == CAUSE_PLACEMENT:
            cause = CAUSE_PLACEMENT if record.cluster_id not in state.eligible else None
        if share is None or share.deployment_id != record.deployment_id:
            drop_stand_ins(record)
            plan.records.append(
                _ended(
                    record, now, "failed_back", "its deployment there is gone: stand-ins removed"
                )
            )
            continue
        if record.cause in MOVES:
            _drain_step(record, cause, shares, desired, now, plan, drop_stand_ins)
            continue
        if cause is not None:
            if record.recovered_since is not None or record.cause != cause:
                plan.records.append(
                    replace(
                        record,
                        cause=cause,
                        state=lost_state(record.stand_ins),
                        recovered_since=None,
                        message=_lost_message(record.cluster_id, cause, record.stand_ins),
                    )
                )
            continue
        site = sites.get(record.cluster_id, Site(record.cluster_id))
        base = share.desired - standing[record.cluster_id]
        waits_for = _failback_waits_for(record, site, share, base)
        if waits_for:
            if record.recovered_since is not None or (
                not site.stale and not site.closed and record.message != waits_for
            ):
                # Back, but not ready yet: not `recovering`, and the message says what for.
                plan.records.append(
                    replace(
                        record,
                        state=lost_state(record.stand_ins),
                        recovered_since=None,
                        message=waits_for,
                    )
                )
            continue
        since = record.recovered_since if record.recovered_since is not None else now
        window = policy.stabilization_s if policy else 0
        if now - since >= window:
            drop_stand_ins(record)
            plan.records.append(
                _ended(
                    record,
                    now,
                    "failed_back",
                    f"cluster {record.cluster_id} was back with its replicas ready for"
                    f" {window}s: "
                    + ("stand-ins removed" if record.stand_ins else "the failover ended"),
                )
            )
        elif record.recovered_since is None:
            plan.records.append(
                replace(
                    record,
                    state="recovering",
                    recovered_since=since,
                    message=f"cluster {record.cluster_id} is back and its replicas ready:"
                    + (" stand-ins go" if record.stand_ins else " the failover ends")
                    + f" after {window}s unless it is lost again",
                )
            )

    for share in sorted(state.shares, key=lambda s: s.cluster_id):
        if share.cluster_id in active or not share.movable:
            continue
        base = share.desired - standing[share.cluster_id]
        cause = lost_cause(sites.get(share.cluster_id), policy)
        if base <= 0 or cause is None:
            continue
        candidates = [
            rooms[c]
            for c in state.eligible
            if c != share.cluster_id and c in rooms and _open(sites.get(c), policy)
        ]
        existing = {room.cluster_id: desired.get(room.cluster_id, 0) for room in candidates}
        placed = placement.place(
            replicas=base,
            devices_per_replica=state.devices_per_replica,
            rooms=candidates,
            existing=existing,
            steps=state.steps,
        )
        stand_ins = {c: n - existing[c] for c, n in placed.items() if n > existing[c]}
        for cluster_id, count in stand_ins.items():
            desired[cluster_id] = desired.get(cluster_id, 0) + count
            standing[cluster_id] += count
        plan.records.append(
            FailoverRecord(
                workload_id=state.workload_id,
                cluster_id=share.cluster_id,
                deployment_id=share.deployment_id,
                cause=cause,
                start_time=now,
                replicas=base,
                stand_ins=stand_ins,
                state=lost_state(stand_ins),
                message=_lost_message(share.cluster_id, cause, stand_ins),
            )
        )

    plan.desired = {c: n for c, n in desired.items() if c not in shares or shares[c].desired != n}
    # A deployment that only ever held stand-ins goes with them.
    for cluster_id, count in list(plan.desired.items()):
        share = shares.get(cluster_id)
        if (
            count == 0
            and share is not None
            and share.deployment_id not in plan.remove
            and share.desired > 0
            and _only_stand_ins(cluster_id, share, state.records)
        ):
            plan.remove.append(share.deployment_id)
            del plan.desired[cluster_id]
    return plan


def _failback_waits_for(record: FailoverRecord, site: Site, share: Share, base: int) -> str:
    """What the failback of a cluster no longer lost still waits for, in words ("" once its
    replicas are ready there). Readiness counts only from a report the cluster made after the
    failover began when it was lost for silence: the report it left behind when it went quiet
    says nothing about the pods it runs now (its agent's clock is taken to be within the
    toleration of the hub's)."""
    where = f"cluster {record.cluster_id}"
    if site.stale:
        return f"{where} is still silent: stand-ins stay"
    if site.closed:
        return f"{where} is cordoned: stand-ins stay"
    if record.cause == "stale" and (
        share.observed_s is None or share.observed_s <= record.start_time
    ):
        return (
            f"{where} is back; waiting for its first report of the deployment since it returned"
            " (are its replicas running?): stand-ins stay"
        )
    if share.ready < base:
        return (
            f"{where} is back; {share.ready} of {base} replicas ready there: stand-ins stay"
            " until all are, then for the stabilization window"
        )
    return ""


def _drain_step(
    record: FailoverRecord,
    cause: str | None,
    shares: Mapping[str, Share],
    desired: dict[str, int],
    now: float,
    plan: Plan,
    drop_stand_ins: Callable[[FailoverRecord], None],
) -> None:
    moving = record.cause == CAUSE_PLACEMENT
    if cause != record.cause:
        drop_stand_ins(record)
        what = "move off" if moving else "drain of"
        plan.records.append(
            _ended(
                record,
                now,
                "failed_back",
                f"the {what} cluster {record.cluster_id} was stopped"
                + (": stand-ins removed" if record.stand_ins else ""),
            )
        )
        return
    if not record.stand_ins:
        return  # nowhere to go: the deployment stays, its record says why
    hosts = [shares.get(c) for c in record.stand_ins]
    if all(h is not None and h.ready >= desired.get(h.cluster_id, 0) for h in hosts):
        plan.remove.append(record.deployment_id)
        done = (
            f"cluster {record.cluster_id} left the placement"
            if moving
            else f"cluster {record.cluster_id} drained"
        )
        plan.records.append(
            _ended(
                record,
                now,
                "moved" if moving else "drained",
                f"{done}: its replicas run on {_where(record.stand_ins)}; its deployment"
                " there was removed",
            )
        )


def _open(site: Site | None, policy: FailoverPolicy | None) -> bool:
    """May take stand-ins: not lost, reporting, not cordoned."""
    if site is None:
        return True
    return lost_cause(site, policy) is None and not site.stale and not site.closed


def _only_stand_ins(cluster_id: str, share: Share, records: Sequence[FailoverRecord]) -> bool:
    held = sum(r.stand_ins.get(cluster_id, 0) for r in records if r.active)
    return held >= share.desired


def _ended(record: FailoverRecord, now: float, state: str, message: str) -> FailoverRecord:
    return replace(record, state=state, end_time=now, recovered_since=None, message=message)


def _where(stand_ins: Mapping[str, int]) -> str:
    return ", ".join(f"{c} ({n})" for c, n in sorted(stand_ins.items())) or "nowhere"


def leaving_message(cluster_id: str, stand_ins: Mapping[str, int]) -> str:
    return (
        f"cluster {cluster_id} left the workload's placement: its replicas are placed again on"
        f" {_where(stand_ins)} first, and its deployment there keeps running until they do"
        " (make-before-break)"
    )


def _lost_message(cluster_id: str, cause: str, stand_ins: Mapping[str, int]) -> str:
    why = {
        "stale": f"cluster {cluster_id} was silent for longer than the failover toleration",
        "cordoned": f"cluster {cluster_id} is cordoned",
        "draining": f"cluster {cluster_id} is draining",
    }[cause]
    if not stand_ins:
        if cause == "draining":
            return (
                f"{why}, but the workload has no other eligible cluster that is open (pinned"
                f" by placement.clusters, or every other one cordoned or stale): its deployment"
                f" stays on {cluster_id} and keeps running; widen the placement or uncordon"
                " another eligible cluster to move it, or uncordon"
                f" {cluster_id} to stop the drain"
            )
        return (
            f"{why}; no other eligible cluster is open: its replicas stay there and no stand-in"
            " runs (nothing was deleted there)"
        )
    return (
        f"{why}: its replicas stand in on {_where(stand_ins)} (nothing was deleted on {cluster_id})"
    )
