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
  stand-ins run (hub/admission/ledger.py charges a replica and its stand-in to the quota once).
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
from collections.abc import Iterable, Mapping, Sequence
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
    """Three steps, each a function of the tally the one before left: (1) follow up every
    failover in progress (end it, move on its drain, say what its failback waits for), (2) fail
    over the shares on clusters newly lost, (3) settle the desired replicas that changed and
    the deployments that only ever held stand-ins."""
    shares = {s.cluster_id: s for s in state.shares}
    active = {r.cluster_id: r for r in state.records if r.active}
    tally = _Tally.of(shares.values(), active.values())
    followed: list[_Step] = []
    for record in active.values():
        step, tally = _follow_up(record, state, shares, sites, tally, now)
        followed.append(step)
    opened, tally = _fail_over(state, sites, rooms, active, tally, now)
    removed = [d for step in followed for d in step.remove]
    desired, removed = _settle(state, tally, removed)
    return Plan(
        desired=desired,
        records=[r for step in followed for r in step.records] + opened,
        remove=removed,
    )


@dataclass(frozen=True)
class _Tally:
    """Desired replicas per cluster, and how many of them are stand-ins, as the steps of
    `decide` change them."""

    desired: Mapping[str, int]
    standing: Mapping[str, int]

    @classmethod
    def of(cls, shares: Iterable[Share], active: Iterable[FailoverRecord]) -> _Tally:
        standing = Counter[str]()
        for record in active:
            standing.update(record.stand_ins)
        return cls(desired={s.cluster_id: s.desired for s in shares}, standing=dict(standing))

    def stand_ins_on(self, cluster_id: str) -> int:
        return self.standing.get(cluster_id, 0)

    def dropping(self, stand_ins: Mapping[str, int]) -> _Tally:
        desired, standing = dict(self.desired), dict(self.standing)
        for cluster_id, count in stand_ins.items():
            desired[cluster_id] = max(0, desired.get(cluster_id, 0) - count)
            standing[cluster_id] = standing.get(cluster_id, 0) - count
        return _Tally(desired, standing)

    def adding(self, stand_ins: Mapping[str, int]) -> _Tally:
        desired, standing = dict(self.desired), dict(self.standing)
        for cluster_id, count in stand_ins.items():
            desired[cluster_id] = desired.get(cluster_id, 0) + count
            standing[cluster_id] = standing.get(cluster_id, 0) + count
        return _Tally(desired, standing)


@dataclass(frozen=True)
class _Step:
    """What following up one failover decided: records to save, deployments to remove."""

    records: tuple[FailoverRecord, ...] = ()
    remove: tuple[str, ...] = ()


def _follow_up(
    record: FailoverRecord,
    state: WorkloadState,
    shares: Mapping[str, Share],
    sites: Mapping[str, Site],
    tally: _Tally,
    now: float,
) -> tuple[_Step, _Tally]:
    """Step 1, for one failover in progress."""
    policy = state.policy
    share = shares.get(record.cluster_id)
    cause = lost_cause(sites.get(record.cluster_id), policy)
    if record.cause == CAUSE_PLACEMENT:
        cause = CAUSE_PLACEMENT if record.cluster_id not in state.eligible else None
    if share is None or share.deployment_id != record.deployment_id:
        gone = _ended(record, now, "failed_back", "its deployment there is gone: stand-ins removed")
        return _Step(records=(gone,)), tally.dropping(record.stand_ins)
    if record.cause in MOVES:
        return _drain_step(record, cause, shares, tally, now)
    if cause is not None:
        if record.recovered_since is not None or record.cause != cause:
            lost = replace(
                record,
                cause=cause,
                state=lost_state(record.stand_ins),
                recovered_since=None,
                message=_lost_message(record.cluster_id, cause, record.stand_ins),
            )
            return _Step(records=(lost,)), tally
        return _Step(), tally
    site = sites.get(record.cluster_id, Site(record.cluster_id))
    base = share.desired - tally.stand_ins_on(record.cluster_id)
    waits_for = _failback_waits_for(record, site, share, base)
    if waits_for:
        if record.recovered_since is not None or (
            not site.stale and not site.closed and record.message != waits_for
        ):
            # Back, but not ready yet: not `recovering`, and the message says what for.
            waiting = replace(
                record,
                state=lost_state(record.stand_ins),
                recovered_since=None,
                message=waits_for,
            )
            return _Step(records=(waiting,)), tally
        return _Step(), tally
    since = record.recovered_since if record.recovered_since is not None else now
    window = policy.stabilization_s if policy else 0
    if now - since >= window:
        back = _ended(
            record,
            now,
            "failed_back",
            f"cluster {record.cluster_id} was back with its replicas ready for {window}s: "
            + ("stand-ins removed" if record.stand_ins else "the failover ended"),
        )
        return _Step(records=(back,)), tally.dropping(record.stand_ins)
    if record.recovered_since is None:
        recovering = replace(
            record,
            state="recovering",
            recovered_since=since,
            message=f"cluster {record.cluster_id} is back and its replicas ready:"
            + (" stand-ins go" if record.stand_ins else " the failover ends")
            + f" after {window}s unless it is lost again",
        )
        return _Step(records=(recovering,)), tally
    return _Step(), tally


def _fail_over(
    state: WorkloadState,
    sites: Mapping[str, Site],
    rooms: Mapping[str, placement.ClusterRoom],
    active: Mapping[str, FailoverRecord],
    tally: _Tally,
    now: float,
) -> tuple[list[FailoverRecord], _Tally]:
    """Step 2: a new failover, stand-ins placed, for each movable share on a cluster lost and
    not failed over yet, by cluster id."""
    policy = state.policy
    opened: list[FailoverRecord] = []
    for share in sorted(state.shares, key=lambda s: s.cluster_id):
        if share.cluster_id in active or not share.movable:
            continue
        base = share.desired - tally.stand_ins_on(share.cluster_id)
        cause = lost_cause(sites.get(share.cluster_id), policy)
        if base <= 0 or cause is None:
            continue
        candidates = [
            rooms[c]
            for c in state.eligible
            if c != share.cluster_id and c in rooms and _open(sites.get(c), policy)
        ]
        existing = {room.cluster_id: tally.desired.get(room.cluster_id, 0) for room in candidates}
        placed = placement.place(
            replicas=base,
            devices_per_replica=state.devices_per_replica,
            rooms=candidates,
            existing=existing,
            steps=state.steps,
        )
        stand_ins = {c: n - existing[c] for c, n in placed.items() if n > existing[c]}
        tally = tally.adding(stand_ins)
        opened.append(
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
    return opened, tally


def _settle(
    state: WorkloadState, tally: _Tally, removed: Sequence[str]
) -> tuple[dict[str, int], list[str]]:
    """Step 3: the desired replicas that changed, and the deployments to remove (those the
    steps before removed, and one that only ever held stand-ins, now none)."""
    shares = {s.cluster_id: s for s in state.shares}
    desired = {c: n for c, n in tally.desired.items() if c not in shares or shares[c].desired != n}
    remove = list(removed)
    for cluster_id, count in list(desired.items()):
        share = shares.get(cluster_id)
        if (
            count == 0
            and share is not None
            and share.deployment_id not in remove
            and share.desired > 0
            and _only_stand_ins(cluster_id, share, state.records)
        ):
            remove.append(share.deployment_id)
            del desired[cluster_id]
    return desired, remove


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
    tally: _Tally,
    now: float,
) -> tuple[_Step, _Tally]:
    """Step 1 for a make-before-break move (a drain, a placement change)."""
    moving = record.cause == CAUSE_PLACEMENT
    if cause != record.cause:
        what = "move off" if moving else "drain of"
        stopped = _ended(
            record,
            now,
            "failed_back",
            f"the {what} cluster {record.cluster_id} was stopped"
            + (": stand-ins removed" if record.stand_ins else ""),
        )
        return _Step(records=(stopped,)), tally.dropping(record.stand_ins)
    if not record.stand_ins:
        return _Step(), tally  # nowhere to go: the deployment stays, its record says why
    hosts = [shares.get(c) for c in record.stand_ins]
    if not all(h is not None and h.ready >= tally.desired.get(h.cluster_id, 0) for h in hosts):
        return _Step(), tally
    done = (
        f"cluster {record.cluster_id} left the placement"
        if moving
        else f"cluster {record.cluster_id} drained"
    )
    moved = _ended(
        record,
        now,
        "moved" if moving else "drained",
        f"{done}: its replicas run on {_where(record.stand_ins)}; its deployment there was removed",
    )
    return _Step(records=(moved,), remove=(record.deployment_id,)), tally


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
