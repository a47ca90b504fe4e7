"""The ingest use case: an agent's observation batches into the store.

Called by hub/sync/ingest.py (a queue of reports drained in groups) and, for the check that a
batch is its cluster's, by hub/sync/session.py; this module owns the rules:
- an agent may only report its own cluster's deployments (PermissionDenied otherwise);
- observations are written in one transaction per drained group of batches, and a change of
  devices or allocations re-runs admission for that cluster; a report the store refuses is
  written alone, then record by record, and a storage fault asks its stream to resend;
- a deployment ready on its new digest may advance its workload's rollout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hub import errors
from hub.model import Deployment, DeploymentObservation, ObservationBatch, evolve
from hub.service import admit, rollouts
from hub.service.context import ServiceContext, Tx, snapshot, transaction
from hub.store import accounting, clusters, deployments, discovered, faults, observations, port
from hub.store import nodes as node_store


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
    template (and then every worker's: manifests.adopted). While its declaration keeps the
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
    device_refusals: tuple[node_store.DeviceRefusal, ...] = ()


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
    device_refusals: list[node_store.DeviceRefusal] = field(default_factory=list)


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
    refusals: Sequence[node_store.DeviceRefusal],
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
    refusals: list[node_store.DeviceRefusal] = []
    node_writes = node_store.write_nodes(
        tx.conn, nodes, known=ctx.node_hashes, written=written, refusals=refusals
    )
    held = changed | node_writes.held_changed
    changed |= node_writes.capacity_changed
    records += node_writes.records
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
    accounting.refresh_held_of(tx.conn, held)
    if changed or advanced:
        admit.run(ctx, tx, cluster_ids=changed | advanced)
    return IngestResult(len(fresh), node_writes.nodes, records, frozenset(changed), tuple(refusals))


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
