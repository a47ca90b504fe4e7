"""Serving changes reaching deployments: all at once, or in waves; resume and abort.

A workload without a wave policy hands a serving change to every deployment at once (each
gets a new generation and digest, and rolls out: docs/rollouts.md). With
`rollout.max_clusters_in_flight` N > 0 the change starts a *rollout* kept on the workload:
the pure decision (hub/rollout.py) hands it to N clusters at a time, and the rest keep their
serving config (same digest, same generation: nothing restarts) until their wave comes. The
decision is taken again in the same transaction as every observation that ends a
deployment's rollout (hub/service/ingest.py) and by a periodic pass (`sweep`, for deadlines).
A wave not ready within the deadline pauses the rollout, and so does an operator (`pause`: the
clusters in flight go on rolling out, no further cluster gets the change); `resume` goes on,
`abort` restores the previous config on the clusters already changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from hub import errors, rollout, serving
from hub.model import (
    ROLLOUT_ABORTED,
    ROLLOUT_CONVERGED,
    ROLLOUT_PAUSED,
    ROLLOUT_ROLLING,
    Deployment,
    Serving,
    Workload,
    WorkloadRollout,
    evolve,
)
from hub.service import admit, dryrun, scoped, views
from hub.service.context import ServiceContext, Tx, snapshot
from hub.store import accounting, deployments, observations, workloads
from hub.store.deployments import RolloutRow
from hub.store.port import Transaction


def apply_change(
    ctx: ServiceContext, tx: Tx, before: Workload, workload: Workload, current: list[Deployment]
) -> None:
    """After an update of `before` into `workload` (stored): hand its serving config to its
    deployments, at once or wave by wave, and record the rollout."""
    target = serving.digest(workload.serving)
    record = workload.rollout
    if not workload.rollout_policy.waves:
        apply_serving(tx, workload.serving, current)
        if record.active:
            # Waves switched off mid-rollout: every cluster got the change just now.
            _record(tx, workload, _ended(record, ROLLOUT_CONVERGED, tx.now))
        return
    if target != record.target_digest or not record.active:
        if all(d.serving_digest == target for d in current):
            return
        # The config the waiting clusters run: the one before this change, or, when a
        # rollout was under way, the one before that rollout (what they still run).
        previous = record.previous if record.active and record.previous else before.serving
        record = WorkloadRollout(
            state=ROLLOUT_ROLLING,
            target_digest=target,
            previous=previous,
            previous_digest=serving.digest(previous),
            start_time=tx.now,
            update_time=tx.now,
        )
        if record.previous_digest == target:
            # Back to what the waiting clusters run: the ones changed go back at once.
            apply_serving(tx, workload.serving, current)
            record = _ended(record, ROLLOUT_CONVERGED, tx.now)
    _record(tx, workload, _step(ctx, tx, replace(workload, rollout=record)))


def evaluate(ctx: ServiceContext, tx: Tx, workload_ids: Iterable[str]) -> set[str]:
    """Decide the next wave of these workloads' rollouts (those rolling); the clusters handed
    a change are returned (admission should run for them: the change may want surge)."""
    advanced: set[str] = set()
    for workload_id in sorted(set(workload_ids)):
        workload = workloads.get(tx.conn, workload_id)
        if workload is None or workload.rollout.state != ROLLOUT_ROLLING:
            continue
        record = _step(ctx, tx, workload)
        if record != workload.rollout:
            advanced |= set(record.changed_at) - set(workload.rollout.changed_at)
            _record(tx, workload, record)
    return advanced


def sweep(ctx: ServiceContext) -> int:
    """The periodic pass: rollouts whose decision changes something (a deadline passed, room
    for a wave) get it; returns how many. Reads first, writes only when there is work."""
    with snapshot(ctx) as conn:
        due = [
            workload_id
            for workload_id in workloads.rolling_ids(conn)
            if _has_work(conn, workload_id, ctx.clock())
        ]
    if not due:
        return 0

    def body(tx: Tx) -> None:
        # Decided again inside: the clusters of the due workloads, read again once locked.
        _need(tx, due)
        advanced = evaluate(ctx, tx, due)
        if advanced:
            admit.run(ctx, tx, cluster_ids=advanced)

    scoped.write(ctx, _scope(ctx, due), body)
    return len(due)


def resume(ctx: ServiceContext, ref: str) -> views.WorkloadView:
    """Go on with a paused rollout. The clusters still in flight get a new deadline."""
    workload_id = scoped.write(ctx, _scope(ctx, [ref]), lambda tx: _resume(ctx, tx, ref))
    return _view(ctx, workload_id)


def preview_resume(ctx: ServiceContext, ref: str) -> dryrun.DryRun:
    """What `resume` would do (validate_only), writing nothing."""
    return dryrun.preview(ctx, lambda c, tx: _resume(c, tx, ref), workload_ref=ref)


def _resume(ctx: ServiceContext, tx: Tx, ref: str) -> str:
    workload = _get(tx.conn, ref)
    _need(tx, [workload.workload_id])
    record = workload.rollout
    if record.state != ROLLOUT_PAUSED:
        raise errors.FailedPrecondition(
            f"workload {workload.name} has no paused rollout (rollout: {_said(record)})",
            ["resume applies to a rollout in waves paused at a wave deadline or by hand"],
        )
    rows = deployments.rollout_rows(tx.conn, workload.workload_id)
    flying = {c.cluster_id for c in rollout.in_flight(rollout.waves_of(workload, rows))}
    record = replace(
        record,
        state=ROLLOUT_ROLLING,
        reason="",
        message="",
        changed_at={
            cluster_id: tx.now if cluster_id in flying else at
            for cluster_id, at in record.changed_at.items()
        },
        update_time=tx.now,
    )
    record = _step(ctx, tx, replace(workload, rollout=record))
    _record(tx, workload, record)
    admit.run(ctx, tx, cluster_ids=set(record.changed_at))
    return workload.workload_id


def pause(ctx: ServiceContext, ref: str) -> views.WorkloadView:
    """Pause a rolling rollout by hand: no further wave starts until `resume` (which gives
    the clusters still in flight a new deadline, so the pause does not count against them)."""
    workload_id = scoped.write(ctx, _scope(ctx, [ref]), lambda tx: _pause(tx, ref))
    return _view(ctx, workload_id)


def preview_pause(ctx: ServiceContext, ref: str) -> dryrun.DryRun:
    """What `pause` would do (validate_only), writing nothing."""
    return dryrun.preview(ctx, lambda c, tx: _pause(tx, ref), workload_ref=ref)


def _pause(tx: Tx, ref: str) -> str:
    workload = _get(tx.conn, ref)
    _need(tx, [workload.workload_id])
    record = workload.rollout
    if record.state != ROLLOUT_ROLLING:
        already = f" ({record.reason})" if record.state == ROLLOUT_PAUSED and record.reason else ""
        raise errors.FailedPrecondition(
            f"workload {workload.name} has no rolling rollout to pause"
            f" (rollout: {_said(record)}{already})",
            [
                "pause applies to a rollout in waves that is rolling",
                "a paused rollout goes on with resume, or rolls back with abort",
            ],
        )
    record = replace(
        record,
        state=ROLLOUT_PAUSED,
        reason=rollout.REASON_PAUSED_BY_HAND,
        message=(
            "paused by an operator: no further cluster gets the change (the ones in flight go"
            " on rolling out). Resume to go on (wingsmith rollout resume), or abort to roll back"
            " (wingsmith rollout abort)"
        ),
        update_time=tx.now,
    )
    _record(tx, workload, record)
    return workload.workload_id


def abort(ctx: ServiceContext, ref: str) -> views.WorkloadView:
    """Stop a rollout and put the previous serving config back on the clusters that got the
    change (they roll back: a new generation, the old digest); the others never left it."""
    workload_id = scoped.write(ctx, _scope(ctx, [ref]), lambda tx: _abort(ctx, tx, ref))
    return _view(ctx, workload_id)


def preview_abort(ctx: ServiceContext, ref: str) -> dryrun.DryRun:
    """What `abort` would do (validate_only), writing nothing."""
    return dryrun.preview(ctx, lambda c, tx: _abort(c, tx, ref), workload_ref=ref)


def _abort(ctx: ServiceContext, tx: Tx, ref: str) -> str:
    workload = _get(tx.conn, ref)
    _need(tx, [workload.workload_id])
    record = workload.rollout
    if not record.active or record.previous is None:
        raise errors.FailedPrecondition(
            f"workload {workload.name} has no rollout to abort (rollout: {_said(record)})",
            [
                "abort applies to a rollout in waves that is rolling or paused",
                "to go back after a rollout converged, update the serving config",
            ],
        )
    current = deployments.of_workload(tx.conn, workload.workload_id)
    changed = [d for d in current if d.serving_digest != record.previous_digest]
    workload = replace(workload, serving=record.previous, update_time=tx.now)
    workloads.update(tx.conn, workload)
    apply_serving(tx, record.previous, changed)
    names = ", ".join(d.cluster_id for d in changed) or "none"
    record = replace(
        _ended(record, ROLLOUT_ABORTED, tx.now),
        reason="aborted",
        message=f"rolled back to {record.previous_digest} on the clusters changed: {names}",
    )
    _record(tx, workload, record)
    admit.run(ctx, tx, cluster_ids={d.cluster_id for d in current})
    return workload.workload_id


def apply_serving(tx: Tx, target: Serving, current: Sequence[Deployment]) -> None:
    """A new serving digest is a new generation. A managed deployment with admitted replicas
    whose pod template changes starts rolling out: admission may grant it surge so old and new
    run side by side (an adopted one keeps its template unless engine_args change its flags)."""
    digest = serving.digest(target)
    requeue = _rejected_with_nothing_running(
        tx.conn, [d for d in current if d.serving_digest != digest]
    )
    for d in current:
        if d.serving_digest == digest:
            continue
        changed = evolve(
            d,
            serving=target,
            engine_args=target.engine_args,
            serving_digest=digest,
            generation=d.generation + 1,
            update_time=tx.now,
        )
        if d.deployment_id in requeue:
            # Its reservation was released when the agent rejected it and the room may be
            # gone: the new generation is new demand, admitted only if it fits.
            changed = evolve(changed, admitted_replicas=0, surge_replicas=0, pending_since=tx.now)
        rolling = d.authority == "managed" and d.admitted_replicas > 0
        saved = evolve(changed, rolling=rolling and views.rolls_out(tx.conn, changed))
        tx.touched.add(saved.cluster_id)
        deployments.save(tx.conn, saved)


# -- scope ------------------------------------------------------------------------------------


def _scope(ctx: ServiceContext, refs: Iterable[str]) -> set[str] | None:
    """The clusters a rollout decision for these workloads is expected to lock, read from a
    snapshot (None: the covering lock); checked again inside the write (`_need`)."""
    with snapshot(ctx) as conn:
        found = [w for w in (workloads.get(conn, ref) for ref in refs) if w is not None]
        if not found:
            return set()  # NotFound inside, before anything is written
        return _reads(conn, found)


def _reads(conn: Transaction, found: Sequence[Workload]) -> set[str] | None:
    """The clusters a rollout decision of these workloads reads and may write: their
    deployments' (the waves, the serving handed out or taken back, admission there) and the
    clusters their rollouts record as changed (admission runs there on resume). None when one
    has no deployment: nothing but the covering lock guards its own row then."""
    by_workload: dict[str, set[str]] = {w.workload_id: set() for w in found}
    for d in deployments.of_workloads(conn, sorted(by_workload)):
        by_workload[d.workload_id].add(d.cluster_id)
    if not all(by_workload.values()):
        return None
    result: set[str] = set()
    for w in found:
        result |= by_workload[w.workload_id] | set(w.rollout.changed_at)
    return result


def _need(tx: Tx, workload_ids: Iterable[str]) -> None:
    """Before anything is written: the transaction holds the locks of every cluster the
    rollout decisions of these workloads read (else it runs again with them: WiderScope), or
    the covering lock when one of them has no deployment (NeedsCovering)."""
    found = [w for w in (workloads.get(tx.conn, i) for i in workload_ids) if w is not None]
    if not found:
        return
    clusters = _reads(tx.conn, found)
    if clusters is None:
        scoped.need_covering(tx)
        return
    scoped.need(tx, clusters)


# -- steps ------------------------------------------------------------------------------------


def _step(ctx: ServiceContext, tx: Tx, workload: Workload) -> WorkloadRollout:
    """Take the decision for a rolling workload and apply it: the new record. The decision
    reads four columns of each deployment; whole ones are read only for the clusters a wave
    changes (a fleet-wide workload has thousands, and this runs in ingest transactions)."""
    record = workload.rollout
    view = _wave_view(workload, deployments.rollout_rows(tx.conn, workload.workload_id), tx.now)
    decision = rollout.decide(view)
    if decision.pause_reason:
        # The message says how far each late cluster got: its replicas ready on the target
        # (read only now: views of every deployment at every pass would cost a fleet-wide
        # workload dearly).
        late = {c.cluster_id for c in rollout.in_flight(view.clusters)}
        ready = _ready_on_target(
            ctx, tx.conn, deployments.of_workload_on(tx.conn, workload.workload_id, late)
        )
        counted = replace(
            view,
            clusters=tuple(replace(c, ready=ready.get(c.cluster_id, 0)) for c in view.clusters),
        )
        decision = rollout.decide(counted)
        return replace(
            record,
            state=ROLLOUT_PAUSED,
            reason=decision.pause_reason,
            message=decision.pause_message,
            update_time=tx.now,
        )
    if decision.converged:
        return _ended(record, ROLLOUT_CONVERGED, tx.now)
    if not decision.advance:
        return record
    apply_serving(
        tx,
        workload.serving,
        deployments.of_workload_on(tx.conn, workload.workload_id, decision.advance),
    )
    return replace(
        record,
        changed_at={**record.changed_at, **dict.fromkeys(decision.advance, tx.now)},
        update_time=tx.now,
    )


def _has_work(conn: Transaction, workload_id: str, now: float) -> bool:
    workload = workloads.get(conn, workload_id)
    if workload is None or workload.rollout.state != ROLLOUT_ROLLING:
        return False
    decision = rollout.decide(
        _wave_view(workload, deployments.rollout_rows(conn, workload_id), now)
    )
    return bool(decision.advance or decision.pause_reason or decision.converged)


def _wave_view(workload: Workload, current: Sequence[RolloutRow], now: float) -> rollout.WaveView:
    return rollout.WaveView(
        policy=workload.rollout_policy,
        state=workload.rollout.state,
        target_digest=workload.rollout.target_digest,
        clusters=rollout.waves_of(workload, current),
        now=now,
    )


def _ready_on_target(
    ctx: ServiceContext, conn: Transaction, current: Sequence[Deployment]
) -> dict[str, int]:
    return {
        view.deployment.cluster_id: view.rollout.ready_on_target if view.rollout else 0
        for view in views.deployment_views(ctx, conn, current)
    }


def _ended(record: WorkloadRollout, state: str, now: float) -> WorkloadRollout:
    return replace(record, state=state, reason="", message="", update_time=now)


def _record(tx: Tx, workload: Workload, record: WorkloadRollout) -> None:
    if record != workload.rollout:
        workloads.set_rollout(tx.conn, workload.workload_id, record)


def _said(record: WorkloadRollout) -> str:
    return record.state or "none"


def _rejected_with_nothing_running(conn: Transaction, candidates: Sequence[Deployment]) -> set[str]:
    """The deployments among these whose current generation the agent rejected and of which
    nothing is in the cluster (no DGD reported, no device held): taking their admission back
    deletes nothing."""
    ids = [d.deployment_id for d in candidates]
    if not ids:
        return set()
    rejections = observations.rejections(conn, ids)
    reports = observations.reports(conn, ids)
    held = accounting.held_by_deployment(conn, ids)
    result = set()
    for d in candidates:
        rejection = rejections.get(d.deployment_id)
        report = reports.get(d.deployment_id)
        if rejection is None or rejection.generation < d.generation:
            continue
        if (report is None or report.absent) and not held.get(d.deployment_id):
            result.add(d.deployment_id)
    return result


def _get(conn: Transaction, ref: str) -> Workload:
    workload = workloads.get(conn, ref)
    if workload is None:
        raise errors.NotFound("workload", ref)
    return workload


def _view(ctx: ServiceContext, workload_id: str) -> views.WorkloadView:
    with snapshot(ctx) as conn:
        workload = _get(conn, workload_id)
        found = deployments.of_workload(conn, workload_id)
        return views.workload_view(workload, views.deployment_views(ctx, conn, found))
