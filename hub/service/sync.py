"""The use cases behind an agent's stream: desired-state deltas, acks and rejects, observation
ingest, liveness.

Called by hub/sync/session.py, which owns the protocol; this module owns the rules:
- a delta holds every deployment whose spec changed after the agent's revision, and a tombstone
  for every deletion: a removal (deleted while managed: the agent deletes its DGD) or a release
  (deleted while observed: the agent only lets go of its DGD); a snapshot carries every release
  still kept, and replaces everything the agent holds; it is sent when the agent
  is new (no epoch), holds a revision of another store epoch (the database was replaced),
  claims a revision the hub never issued, or is behind the tombstone floor;
- an agent may only touch its own cluster's deployments (PermissionDenied otherwise);
- observations are written in one transaction per drained group of batches, and a change of
  devices or allocations re-runs admission for that cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hub import errors
from hub.model import (
    AgentSession,
    AuditRecord,
    Deployment,
    DeploymentObservation,
    ObservationBatch,
    Rejection,
    evolve,
)
from hub.service import admit, rollouts
from hub.service.context import (
    SUPERSEDE_CHANNEL,
    TERM_CHANNEL,
    ServiceContext,
    Tx,
    payloads,
    snapshot,
    transaction,
)
from hub.store import (
    accounting,
    audit,
    clusters,
    deployments,
    discovered,
    faults,
    observations,
    port,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DesiredDelta:
    revision: int
    from_revision: int
    snapshot: bool
    upserts: tuple[Deployment, ...]
    removals: tuple[str, ...]
    releases: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.snapshot or self.upserts or self.removals or self.releases)


def desired_since(
    ctx: ServiceContext, cluster_id: str, *, epoch: str, applied_revision: int
) -> DesiredDelta:
    with snapshot(ctx) as conn:
        revision, floor = clusters.sync_positions(conn, cluster_id)
        # A new agent has no epoch, so it always gets a snapshot (even an empty one: it learns
        # the epoch). A delta from revision 0 of this epoch is simply everything there is.
        full = epoch != ctx.db.epoch or applied_revision > revision or applied_revision < floor
        if full:
            upserts = deployments.changed_since(conn, cluster_id, 0)
            releases = deployments.released_since(conn, cluster_id, 0)
            return DesiredDelta(revision, 0, True, tuple(upserts), (), tuple(releases))
        if applied_revision == revision:
            return DesiredDelta(revision, applied_revision, False, (), ())
        return DesiredDelta(
            revision=revision,
            from_revision=applied_revision,
            snapshot=False,
            upserts=tuple(deployments.changed_since(conn, cluster_id, applied_revision)),
            removals=tuple(deployments.removed_since(conn, cluster_id, applied_revision)),
            releases=tuple(deployments.released_since(conn, cluster_id, applied_revision)),
        )


def desired_deltas(
    ctx: ServiceContext, holding: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], DesiredDelta]:
    """`desired_since` for many agents of this store epoch at once, (cluster id, revision held)
    -> delta, read in one snapshot a few hundred clusters per statement: a change touching
    every cluster is read once for the fleet, not once per stream. The rules are
    desired_since's; clusters deleted meanwhile are left out."""
    wanted = list(dict.fromkeys(holding))
    result: dict[tuple[str, int], DesiredDelta] = {}
    with snapshot(ctx) as conn:
        positions = clusters.sync_positions_of(conn, [cluster_id for cluster_id, _ in wanted])
        incremental: list[tuple[str, int]] = []
        full: list[tuple[str, int]] = []
        for cluster_id, held in wanted:
            if cluster_id not in positions:
                continue
            revision, floor = positions[cluster_id]
            if held == revision:
                result[(cluster_id, held)] = DesiredDelta(revision, held, False, (), ())
            elif held > revision or held < floor:
                full.append((cluster_id, held))
            else:
                incremental.append((cluster_id, held))
        from_zero = [(cluster_id, 0) for cluster_id, _ in full]
        upserts = deployments.changed_since_each(conn, incremental + from_zero)
        tombstones = deployments.tombstones_since_each(conn, incremental + from_zero)
    for cluster_id, held in incremental:
        removals, releases = tombstones[(cluster_id, held)]
        result[(cluster_id, held)] = DesiredDelta(
            revision=positions[cluster_id][0],
            from_revision=held,
            snapshot=False,
            upserts=tuple(upserts[(cluster_id, held)]),
            removals=tuple(removals),
            releases=tuple(releases),
        )
    for cluster_id, held in full:
        # A snapshot replaces everything: deletions need no tombstones, releases still do
        # (the agent must forget those DGDs, not delete them).
        _, releases = tombstones[(cluster_id, 0)]
        result[(cluster_id, held)] = DesiredDelta(
            positions[cluster_id][0], 0, True, tuple(upserts[(cluster_id, 0)]), (), tuple(releases)
        )
    return result


def held_observations(
    ctx: ServiceContext, cluster_id: str, *, node_name: str
) -> tuple[dict[str, int], dict[str, int]]:
    """What the hub holds of a stream's observations, for its Welcome: (deployment id ->
    observe time, node id -> observe time). A node agent (`node_name`) reports its own node;
    the deployments are told to every stream (one may come to lead)."""
    with snapshot(ctx) as conn:
        return observations.observed_versions(conn, cluster_id, node_id=node_name or None)


def open_session(
    ctx: ServiceContext,
    *,
    cluster_id: str,
    session: AgentSession,
    read_only: bool,
    token_hash: str,
    slot: str = "",
) -> int:
    """Record an open stream held by this hub, and audit it; returns the cluster's newest
    leader term. Unauthenticated if the token it was opened with is no longer the cluster's
    (rotated, or the cluster deleted since the token was checked). A stream of the same slot
    held by another hub is superseded: that hub is told to close it. A session recorded as
    the leader (a whole-cluster agent's) is marked the only one, in the same transaction."""
    with transaction(ctx, [cluster_id]) as tx:
        if clusters.token_hashes(tx.conn, [cluster_id]).get(cluster_id) != token_hash:
            raise errors.Unauthenticated(
                f"the token of cluster {cluster_id} was rotated or the cluster deleted"
            )
        first_heard = accounting.unheard_clusters(tx.conn, [cluster_id])
        before = clusters.get(tx.conn, cluster_id)
        superseded = clusters.open_session(
            tx.conn,
            session,
            cluster_id=cluster_id,
            read_only=read_only,
            hub_id=ctx.hub_id,
            slot=slot,
        )
        if session.leader:
            clusters.set_leader(tx.conn, cluster_id=cluster_id, session_id=session.session_id)
        if superseded and ctx.db.shared:
            for payload in payloads(session_id for session_id, _ in superseded):
                tx.conn.notify(SUPERSEDE_CHANNEL, payload)
        if before is not None and before.read_only != read_only:
            # Its agent now creates replicas, or no longer does: every deployment there is
            # decided again (docs/admission.md "Replicas no agent creates").
            admit.run(ctx, tx, cluster_ids=[cluster_id], every_on=[cluster_id])
        elif first_heard:
            admit.run(ctx, tx, cluster_ids=first_heard)
        audit.append(
            tx.conn,
            agent_event(
                cluster_id,
                "agent.connect",
                now=tx.now,
                message=f"session {session.session_id}"
                + (f" node {session.node_name}" if session.node_name else "")
                + f" agent {session.agent_version or '?'}"
                + (" read-only" if read_only else ""),
            ),
        )
        return clusters.raise_leader_term(tx.conn, cluster_id=cluster_id, term=0)


def agent_event(
    cluster_id: str, action: str, *, now: float, outcome: str = "OK", message: str = ""
) -> AuditRecord:
    """The audit record of an agent's connection event (docs/security.md)."""
    return AuditRecord(
        time=now,
        actor=f"cluster/{cluster_id}",
        role="agent",
        edge="stream",
        action=action,
        target=f"cluster/{cluster_id}",
        outcome=outcome,
        message=message[:1024],
    )


def close_session(ctx: ServiceContext, *, session_id: str) -> None:
    # Only the fleet lock: the row of a closed stream decides nothing (a supersede or a
    # leader mark racing with its deletion finds it or not, both right).
    with transaction(ctx, ()) as tx:
        clusters.close_session(tx.conn, session_id)


def raise_leader_term(ctx: ServiceContext, *, cluster_id: str, term: int) -> int:
    """Persist a claimed term (terms never go back); returns the newest. Other hubs hear of a
    newer term, and fence a leader of an older one they hold."""
    with transaction(ctx, [cluster_id]) as tx:
        before = clusters.raise_leader_term(tx.conn, cluster_id=cluster_id, term=0)
        newest = clusters.raise_leader_term(tx.conn, cluster_id=cluster_id, term=term)
        if newest > before and ctx.db.shared:
            tx.conn.notify(TERM_CHANNEL, f"{cluster_id} {newest}")
        return newest


def next_leader_term(ctx: ServiceContext, *, cluster_id: str) -> int:
    """Grant a term one past the newest, read and raised in one transaction under the
    cluster's lock: two hubs granting at once hand out two terms, never the same one twice."""
    with transaction(ctx, [cluster_id]) as tx:
        newest = clusters.next_leader_term(tx.conn, cluster_id=cluster_id)
        if ctx.db.shared:
            tx.conn.notify(TERM_CHANNEL, f"{cluster_id} {newest}")
        return newest


def set_dgd_version(ctx: ServiceContext, *, cluster_id: str, dgd_version: str) -> None:
    """What the cluster's reconciling agent reported it writes (ClusterInfo)."""
    with transaction(ctx, [cluster_id]) as tx:
        clusters.set_dgd_version(tx.conn, cluster_id=cluster_id, dgd_version=dgd_version)


def set_leader(ctx: ServiceContext, *, cluster_id: str, session_id: str | None) -> None:
    with transaction(ctx, [cluster_id]) as tx:
        clusters.set_leader(tx.conn, cluster_id=cluster_id, session_id=session_id)


def record_liveness(
    ctx: ServiceContext, *, last_seen: Mapping[str, float], applied: Mapping[str, int]
) -> None:
    """Record when clusters were last heard from and what they applied. A cluster heard from
    for the first time re-runs admission: what waits there said no agent ever connected."""
    if not last_seen and not applied:
        return
    with transaction(ctx, {*last_seen, *applied}) as tx:
        first_heard = accounting.unheard_clusters(tx.conn, list(last_seen))
        clusters.record_liveness(tx.conn, last_seen=last_seen, applied=applied)
        if first_heard:
            admit.run(ctx, tx, cluster_ids=first_heard)


def record_rejection(
    ctx: ServiceContext,
    *,
    cluster_id: str,
    deployment_id: str,
    rejection: Rejection,
    token_hash: str,
) -> None:
    with transaction(ctx, [cluster_id]) as tx:
        if clusters.token_hashes(tx.conn, [cluster_id]).get(cluster_id) != token_hash:
            return  # its stream's token was rotated away: that stream is being closed
        deployment = deployments.get(tx.conn, deployment_id)
        if deployment is None:
            return  # deleted meanwhile: nothing left to mark
        if deployment.cluster_id != cluster_id:
            raise errors.PermissionDenied(
                f"deployment {deployment_id} does not belong to cluster {cluster_id}"
            )
        if rejection.generation > deployment.generation:
            raise errors.InvalidArgument(
                "reject.generation",
                f"{rejection.generation} is newer than the deployment's generation"
                f" ({deployment.generation})",
            )
        observations.write_rejection(
            tx.conn, deployment_id=deployment_id, rejection=rejection, now=tx.now
        )
        # What it reserved is released (hub/store/accounting.py): room for what waits.
        admit.run(ctx, tx, cluster_ids=[cluster_id])
        record = agent_event(
            cluster_id,
            "agent.reject",
            now=tx.now,
            outcome="REJECTED",
            message=f"generation {rejection.generation}: {rejection.error}",
        )
        audit.append(tx.conn, replace(record, target=f"deployment/{deployment_id}"))


def authorize(
    ctx: ServiceContext, cluster_id: str, batch: ObservationBatch, *, known: set[str]
) -> None:
    """PermissionDenied if the batch touches a deployment of another cluster. `known` holds the
    ids already seen to be this cluster's (a deployment never changes cluster and ids are never
    reused, so a stream remembers them and asks the store only about new ones)."""
    ids = [d.deployment_id for d in batch.deployments if d.deployment_id not in known]
    if not ids:
        return
    with snapshot(ctx) as conn:
        owners = deployments.owners(conn, ids)
    known.update(i for i, owner in owners.items() if owner == cluster_id)
    foreign = sorted(i for i, owner in owners.items() if owner != cluster_id)
    if foreign:
        raise errors.PermissionDenied(
            f"cluster {cluster_id} may not report deployments of other clusters: "
            + ", ".join(foreign[:5])
        )


def rollout_done(deployment: Deployment, observation: DeploymentObservation) -> bool:
    """Every replica runs the current digest and as many are ready as are admitted.

    The pods of an adopted DGD carry our digest label only once Wingsmith changed their
    template (and then every worker's: reconcile.adopted). While its declaration keeps the
    template as it is (no engine_args, or the ones its engine runs), every pod runs the target,
    whatever label an earlier change left on it.
    """
    status = observation.status
    if status is None or observation.absent:
        return False
    kept = deployment.adopted and (
        not deployment.engine_args or tuple(deployment.engine_args) == observation.live_args
    )
    on_target = kept or all(
        r.serving_digest == deployment.serving_digest for r in observation.replicas
    )
    return on_target and status.ready_replicas >= deployment.admitted_replicas


@dataclass(frozen=True)
class IngestResult:
    deployments_written: int
    nodes_written: int
    records: int
    capacity_changed: frozenset[str]
    # Devices and allocations contradicting what the hub knows, not stored.
    device_refusals: tuple[observations.DeviceRefusal, ...] = ()


def ingest(ctx: ServiceContext, items: Sequence[tuple[str, ObservationBatch]]) -> IngestResult:
    """Write batches of (possibly) many clusters in one transaction, then re-run admission for
    the clusters whose capacity changed. Deployments deleted meanwhile are skipped."""

    def attempt(scope: frozenset[str] | None) -> IngestResult:
        written.clear()
        with transaction(ctx, scope) as tx:
            return _write_batches(ctx, tx, items, written)

    written: dict[tuple[str, str], tuple[int, int]] = {}
    result = port.retry_wider(attempt, [cluster_id for cluster_id, _ in items])
    ctx.node_hashes.update(written)  # committed: now they describe the database
    return result


@dataclass(frozen=True)
class Report:
    """An observation batch as a stream brought it: its cluster, and the hash of the token the
    stream was opened with (its identity: a batch of a token rotated away or of a deleted
    cluster is never written, even into a cluster registered again under the same id)."""

    cluster_id: str
    token_hash: str
    batch: ObservationBatch


@dataclass
class IngestOutcome:
    """What became of a group of reports, by their index in it. `refused`: the report's own
    fault (a value the store cannot hold): its stream is told, nothing else is affected.
    `unwritten`: the hub's own fault (the disk is full, the database unavailable): its stream
    is asked to resend its full state, so nothing stays silently lost. `revoked`: its stream's
    token is no longer its cluster's: dropped."""

    records: int = 0
    refused: dict[int, str] = field(default_factory=dict)
    unwritten: dict[int, str] = field(default_factory=dict)
    revoked: set[int] = field(default_factory=set)
    capacity_changed: set[str] = field(default_factory=set)
    # Devices and allocations refused field by field (the rest of their batch was written):
    # counted in metrics, and told to the report's stream through `refused`.
    device_refusals: list[observations.DeviceRefusal] = field(default_factory=list)


def ingest_reports(ctx: ServiceContext, reports: Sequence[Report]) -> IngestOutcome:
    """Write the reports of many streams in one transaction. Should that fail, each report is
    written alone, and a report that fails alone record by record: one cluster's poisoned
    record never costs another cluster (or the same cluster's healthy records) anything."""
    outcome = IngestOutcome()
    indexed = list(enumerate(reports))
    try:
        _write_reports(ctx, indexed, outcome)
        return outcome
    except Exception as e:
        if len(indexed) == 1:
            _write_records(ctx, indexed[0], e, outcome)
            return outcome
    for item in indexed:
        try:
            _write_reports(ctx, [item], outcome)
        except Exception as e:
            _write_records(ctx, item, e, outcome)
    return outcome


def _write_reports(
    ctx: ServiceContext, items: Sequence[tuple[int, Report]], outcome: IngestOutcome
) -> None:
    written: dict[tuple[str, str], tuple[int, int]] = {}

    def attempt(scope: frozenset[str] | None) -> tuple[dict[str, str], list[Any], IngestResult]:
        written.clear()
        with transaction(ctx, scope) as tx:
            current = clusters.token_hashes(tx.conn, {r.cluster_id for _, r in items})
            valid = [(i, r) for i, r in items if current.get(r.cluster_id) == r.token_hash]
            batches = [(r.cluster_id, r.batch) for _, r in valid]
            return current, valid, _write_batches(ctx, tx, batches, written)

    current, valid, result = port.retry_wider(attempt, [r.cluster_id for _, r in items])
    ctx.node_hashes.update(written)
    outcome.revoked.update(i for i, r in items if current.get(r.cluster_id) != r.token_hash)
    outcome.records += result.records
    outcome.capacity_changed |= result.capacity_changed
    if result.device_refusals:
        _tell_device_refusals(valid, result.device_refusals, outcome)


def _tell_device_refusals(
    reports: Sequence[tuple[int, Report]],
    refusals: Sequence[observations.DeviceRefusal],
    outcome: IngestOutcome,
) -> None:
    """Each refusal to the report that carried its node (its stream gets a Problem naming
    the fields), and into the outcome's count."""
    outcome.device_refusals.extend(refusals)
    carriers = {
        (report.cluster_id, node.node_id): index
        for index, report in reports
        for node in report.batch.nodes
    }
    by_index: dict[int, list[str]] = {}
    for refusal in refusals:
        index = carriers.get((refusal.cluster_id, refusal.node_id))
        if index is not None:
            by_index.setdefault(index, []).append(f"observations.{refusal.field}: {refusal.reason}")
    for index, problems in by_index.items():
        outcome.refused[index] = (
            f"{len(problems)} record(s) contradict what the hub knows and were not stored"
            " (the others were written): " + "; ".join(problems[:5])
        )[:2048]


def _write_records(
    ctx: ServiceContext, item: tuple[int, Report], failure: Exception, outcome: IngestOutcome
) -> None:
    """A report that could not be written alone. The hub's own fault: asked for again.
    Else it holds something the store refuses: write its records one by one and refuse the
    report, naming the records that could not be stored."""
    index, report = item
    if faults.is_storage_fault(failure):
        outcome.unwritten[index] = f"the hub could not store this batch: {failure}"
        return
    batch = report.batch
    singles = [
        *(
            (f"deployments[{i}]", ObservationBatch(batch.seq, deployments=(d,)))
            for i, d in enumerate(batch.deployments)
        ),
        *(
            (f"nodes[{i}]", ObservationBatch(batch.seq, nodes=(n,)))
            for i, n in enumerate(batch.nodes)
        ),
        *(
            (f"discovered[{i}]", ObservationBatch(batch.seq, discovered=(d,)))
            for i, d in enumerate(batch.discovered)
        ),
    ]
    bad: list[str] = []
    for path, single in singles:
        try:
            _write_reports(
                ctx, [(index, Report(report.cluster_id, report.token_hash, single))], outcome
            )
        except Exception as e:
            if faults.is_storage_fault(e):
                outcome.unwritten[index] = f"the hub could not store this batch: {e}"
                return
            bad.append(f"observations.{path}: {e}"[:200])
    outcome.refused[index] = (
        f"{len(bad)} record(s) could not be stored and were dropped (the others were written): "
        + "; ".join(bad[:5])
    )


def _write_batches(
    ctx: ServiceContext,
    tx: Tx,
    items: Sequence[tuple[str, ObservationBatch]],
    written: dict[tuple[str, str], tuple[int, int]],
) -> IngestResult:
    """The writes of `ingest`, in the caller's transaction; `written` collects the node
    hashes to remember once it commits."""
    ids = [d.deployment_id for _, batch in items for d in batch.deployments]
    owners = deployments.owners(tx.conn, ids)
    rolling = {d.deployment_id: d for d in deployments.rolling(tx.conn, list(owners))}
    # Deployments deleted meanwhile, or not the reporting cluster's, are skipped.
    own = [
        (cluster_id, obs)
        for cluster_id, batch in items
        for obs in batch.deployments
        if owners.get(obs.deployment_id) == cluster_id
    ]
    accepted = _rejections_cleared(tx, own)
    fresh = observations.write_deployments(tx.conn, own)
    _requeue(tx, accepted)
    # Pods joining or leaving move devices between reserved and held.
    changed = {cluster_id for cluster_id, _ in fresh}
    records = sum(1 + len(obs.replicas) for _, obs in fresh)
    settled: set[str] = set()
    for _, obs in fresh:
        current = rolling.get(obs.deployment_id)
        if current is not None and rollout_done(current, obs):
            deployments.set_rolling(tx.conn, deployment_id=current.deployment_id, rolling=False)
            settled.add(current.workload_id)
    # A deployment ready on its new digest may let the next wave of its workload's rollout go:
    # that decides over the workload's every cluster, so it needs all their locks.
    if settled:
        port.lock_clusters(
            tx.conn, {d.cluster_id for d in deployments.of_workloads(tx.conn, sorted(settled))}
        )
    advanced = rollouts.evaluate(ctx, tx, settled) if settled else set()
    nodes = [(cluster_id, node) for cluster_id, batch in items for node in batch.nodes]
    if nodes:
        # A verified GPU is bound to the first node that reported it, fleet-wide: deciding
        # that reads every cluster's devices (docs/architecture.md "Write locks").
        tx.conn.serialize(port.DEVICES)
    refusals: list[observations.DeviceRefusal] = []
    node_changes, nodes_written, node_records = observations.write_nodes(
        tx.conn, nodes, known=ctx.node_hashes, written=written, refusals=refusals
    )
    changed |= node_changes
    records += node_records
    for cluster_id, batch in items:
        for sighting in batch.discovered:
            if discovered.write(tx.conn, cluster_id=cluster_id, observation=sighting, now=tx.now):
                records += 1
        if batch.discovered_complete_ns:
            records += discovered.mark_missing_gone(
                tx.conn,
                cluster_id=cluster_id,
                present=[(d.namespace, d.name) for d in batch.discovered if not d.absent],
                observe_ns=batch.discovered_complete_ns,
                now=tx.now,
            )
    for cluster_id in sorted(changed):
        accounting.refresh_held(tx.conn, cluster_id)
    if changed or advanced:
        admit.run(ctx, tx, cluster_ids=changed | advanced)
    return IngestResult(len(fresh), nodes_written, records, frozenset(changed), tuple(refusals))


def _rejections_cleared(
    tx: Tx, own: Sequence[tuple[str, DeploymentObservation]]
) -> list[Deployment]:
    """Deployments whose agent rejected their current generation and now reports it applied
    (the cause went away in the cluster): their report is about to clear the rejection."""
    applied = {
        obs.deployment_id: obs.status.applied_generation
        for _, obs in own
        if obs.status is not None and obs.status.applied_generation
    }
    if not applied:
        return []
    rejected = observations.rejections(tx.conn, list(applied))
    if not rejected:
        return []
    held = accounting.held_by_deployment(tx.conn, list(rejected))
    result = []
    for deployment_id, rejection in rejected.items():
        current = deployments.get(tx.conn, deployment_id)
        if (
            current is not None
            and current.enabled
            and rejection.generation >= current.generation
            and rejection.generation <= applied[deployment_id]
            and current.admitted_replicas
            and not held.get(deployment_id)
        ):
            result.append(current)
    return result


def _requeue(tx: Tx, accepted: Sequence[Deployment]) -> None:
    """A rejected deployment reserved nothing, and its room may have gone to another: now
    that its agent applied it, its admission is taken back, and the pass that follows in this
    transaction grants it again only if it still fits (docs/admission.md). If it does not,
    the agent deletes what it just applied and the deployment waits like any other demand."""
    for d in accepted:
        deployments.save(
            tx.conn,
            evolve(
                d, admitted_replicas=0, surge_replicas=0, pending_since=tx.now, update_time=tx.now
            ),
        )
        tx.touched.add(d.cluster_id)


def unreported_nodes(ctx: ServiceContext) -> set[tuple[str, str]]:
    """(cluster id, node id) of the nodes no open stream reports in a cluster that still
    reports (hub/store/observations.py says which): candidates for `drop_nodes`."""
    with snapshot(ctx) as conn:
        return set(observations.unreported_nodes(conn))


def drop_nodes(ctx: ServiceContext, nodes: Sequence[tuple[str, str]]) -> frozenset[str]:
    """These nodes' reporters have been gone for the grace period (hub/sync/liveness.py): the
    node left with them, as far as anyone can tell. Their devices stop counting as capacity,
    and their allocations and replicas go, as if the cluster had reported the node absent;
    admission runs again for their clusters. A node whose agent came back meanwhile is kept.
    Returns the clusters whose capacity changed."""
    written: dict[tuple[str, str], tuple[int, int]] = {}
    with transaction(ctx, {cluster_id for cluster_id, _ in nodes}) as tx:
        still = sorted(set(nodes) & set(observations.unreported_nodes(tx.conn)))
        changed = observations.drop_nodes(tx.conn, still, known=ctx.node_hashes, written=written)
        for cluster_id in sorted(changed):
            accounting.refresh_held(tx.conn, cluster_id)
        if changed:
            admit.run(ctx, tx, cluster_ids=changed)
    ctx.node_hashes.update(written)
    return frozenset(changed)


def start_hub(ctx: ServiceContext) -> None:
    """At hub start: register this hub. On a store of its own (SQLite) no stream is open yet:
    clear what a previous process left. On a shared one, only the streams of dead hubs go."""
    with transaction(ctx) as tx:
        if not ctx.db.shared:
            clusters.clear_sessions(tx.conn)
        clusters.register_hub(tx.conn, hub_id=ctx.hub_id, now=tx.now)
        clusters.sweep_dead_hubs(tx.conn, beat_before=tx.now - ctx.settings.hub_dead_after_s)


def reset_sessions(ctx: ServiceContext) -> None:
    """At hub start (kept for callers of one hub): see start_hub."""
    start_hub(ctx)


def hub_heartbeat(ctx: ServiceContext) -> bool:
    """Beat this hub's heartbeat, and (one hub at a time) forget dead hubs' streams. False
    when this hub had been declared dead (a long pause): it registered again, and its open
    streams must be closed so their agents reconnect and their rows are written anew.
    Only the fleet lock (and the sweep's try-lock): it writes hub rows and deletes the stream
    rows of dead hubs, which no cluster's decision needs to see either way."""
    with transaction(ctx, ()) as tx:
        alive = clusters.beat(tx.conn, hub_id=ctx.hub_id, now=tx.now)
        if not alive:
            clusters.register_hub(tx.conn, hub_id=ctx.hub_id, now=tx.now)
        if ctx.db.shared and tx.conn.try_serialize("sweep-dead-hubs"):
            dead = clusters.sweep_dead_hubs(
                tx.conn, beat_before=tx.now - ctx.settings.hub_dead_after_s
            )
            if dead:
                log.warning("hubs %s stopped beating: their streams are forgotten", dead)
        return alive


def stop_hub(ctx: ServiceContext) -> None:
    with transaction(ctx) as tx:
        clusters.remove_hub(tx.conn, ctx.hub_id)


def prune_tombstones(ctx: ServiceContext) -> int:
    with transaction(ctx) as tx:
        if not tx.conn.try_serialize("prune-tombstones"):
            return 0  # another hub is at it
        return clusters.prune_tombstones(
            tx.conn, older_than=tx.now - ctx.settings.tombstone_retention_s
        )


def clusters_behind(ctx: ServiceContext) -> int:
    with snapshot(ctx) as conn:
        return clusters.count_behind(conn)
