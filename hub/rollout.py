"""Rollout waves: which clusters get a workload's serving change next. Pure.

A workload whose `rollout.max_clusters_in_flight` is N > 0 rolls a serving change out cluster
by cluster (docs/rollouts.md "Waves"). Every cluster of the workload is, at any moment, one of:

- **waiting**: its deployment still carries an older digest and is settled (not rolling): it
  serves the old config as it did, and keeps doing so until its wave comes;
- **done**: it carries the target digest and is settled (every replica runs it, as many ready
  as admitted; or nothing admitted to run);
- **in flight**: anything else: changed and not yet ready on the target, or still rolling to
  an older digest.

`decide` hands the change to as many waiting clusters (in cluster id order) as leave at most N
in flight, and pauses the rollout instead when a cluster has been in flight past the wave
deadline. While paused (or with no rollout) it hands out nothing. The service layer
(hub/service/rollouts.py) builds the view from the store, applies the decision, and asks again
on every observation that ends a deployment's rollout and on a periodic pass (deadlines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from hub import serving
from hub.model import DEFAULT_WAVE_DEADLINE_S, ROLLOUT_ROLLING, RolloutPolicy, Workload

# A cluster's place in a rollout, in the words of the API's RolloutState.
WAITING = "waiting"
IN_FLIGHT = "rolling"
DONE = "converged"
DRIFTED = "drifted"

REASON_WAVE_DEADLINE = "wave_deadline_exceeded"
# Paused by an operator (PauseWorkloadRollout): nothing was late.
REASON_PAUSED_BY_HAND = "paused_by_operator"


@dataclass(frozen=True)
class ClusterWave:
    """One cluster's deployment of the workload, as the decision sees it."""

    cluster_id: str
    # Its deployment carries the rollout's target digest.
    on_target: bool
    # Not rolling: its replicas run its digest and as many are ready as are admitted.
    settled: bool
    # When the change reached it (its wave started); None while it waits.
    changed_at: float | None = None
    # For the pause message: ready replicas on its digest, and the ones it should have.
    ready: int = 0
    admitted: int = 0
    # Views only: nothing rolls there, yet its replicas run another config (an observed
    # deployment given the change: Wingsmith does not write it). Not done, whatever its
    # declaration says; the decision never waits for it (it cannot change it).
    drifted: bool = False

    @property
    def state(self) -> str:
        if not self.settled:
            return IN_FLIGHT
        if self.drifted:
            return DRIFTED
        return DONE if self.on_target else WAITING


@dataclass(frozen=True)
class WaveView:
    policy: RolloutPolicy
    # "" (none) | rolling | paused | converged | aborted.
    state: str
    target_digest: str
    clusters: tuple[ClusterWave, ...]
    now: float


@dataclass(frozen=True)
class WaveDecision:
    # Clusters to hand the change to now, in wave order.
    advance: tuple[str, ...] = ()
    # Set when the rollout pauses now: why, in words an operator acts on.
    pause_reason: str = ""
    pause_message: str = ""
    # Every cluster is done: the rollout converged.
    converged: bool = False


def deadline_s(policy: RolloutPolicy) -> float:
    return float(policy.wave_deadline_seconds or DEFAULT_WAVE_DEADLINE_S)


def in_flight(clusters: Sequence[ClusterWave]) -> list[ClusterWave]:
    return [c for c in clusters if c.state == IN_FLIGHT]


def decide(view: WaveView) -> WaveDecision:
    """What to do now for one workload's rollout (see the module docstring)."""
    if view.state != ROLLOUT_ROLLING:
        return WaveDecision()
    flying = in_flight(view.clusters)
    waiting = sorted((c for c in view.clusters if c.state == WAITING), key=lambda c: c.cluster_id)
    if not flying and not waiting:
        return WaveDecision(converged=True)
    late = [
        c
        for c in flying
        if c.on_target
        and c.changed_at is not None
        and view.now - c.changed_at >= deadline_s(view.policy)
    ]
    if late:
        return WaveDecision(
            pause_reason=REASON_WAVE_DEADLINE, pause_message=_late_message(view, late)
        )
    limit = view.policy.max_clusters_in_flight
    room = len(waiting) if limit <= 0 else max(0, limit - len(flying))
    return WaveDecision(advance=tuple(c.cluster_id for c in waiting[:room]))


def _late_message(view: WaveView, late: Sequence[ClusterWave]) -> str:
    shown = ", ".join(
        f"{c.cluster_id} ({c.ready}/{c.admitted} ready)"
        for c in sorted(late, key=lambda c: c.cluster_id)
    )
    return (
        f"not ready on {view.target_digest} within the wave deadline of"
        f" {deadline_s(view.policy):g}s: {shown}; no further cluster gets the change."
        " Fix the cause and resume (wingsmith rollout resume), or abort to roll back"
        " (wingsmith rollout abort)"
    )


class _DeploymentLike(Protocol):
    """What `waves_of` reads of a deployment (a Deployment, or the store's narrow row)."""

    @property
    def cluster_id(self) -> str: ...
    @property
    def serving_digest(self) -> str: ...
    @property
    def rolling(self) -> bool: ...
    @property
    def admitted_replicas(self) -> int: ...


def waves_of(workload: Workload, current: Sequence[_DeploymentLike]) -> tuple[ClusterWave, ...]:
    """Each deployment's place in the workload's rollout (for the decision and the views)."""
    record = workload.rollout
    target = record.target_digest or serving.digest(workload.serving)
    return tuple(
        ClusterWave(
            cluster_id=d.cluster_id,
            on_target=d.serving_digest == target,
            settled=not d.rolling,
            changed_at=record.changed_at.get(d.cluster_id),
            admitted=d.admitted_replicas,
        )
        for d in current
    )
