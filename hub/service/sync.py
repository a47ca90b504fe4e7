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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub import errors
from hub.model import (
    AgentSession,
    Deployment,
    DeploymentObservation,
    ObservationBatch,
    Rejection,
)
from hub.service import admit
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import accounting, clusters, deployments, discovered, observations


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
    ctx: ServiceContext, *, cluster_id: str, session: AgentSession, read_only: bool
) -> int:
    """Record an open stream; returns the cluster's newest leader term."""
    with transaction(ctx) as tx:
        clusters.open_session(tx.conn, session, cluster_id=cluster_id, read_only=read_only)
        return clusters.raise_leader_term(tx.conn, cluster_id=cluster_id, term=0)


def close_session(ctx: ServiceContext, *, session_id: str) -> None:
    with transaction(ctx) as tx:
        clusters.close_session(tx.conn, session_id)


def raise_leader_term(ctx: ServiceContext, *, cluster_id: str, term: int) -> int:
    """Persist a claimed term (terms never go back); returns the newest."""
    with transaction(ctx) as tx:
        return clusters.raise_leader_term(tx.conn, cluster_id=cluster_id, term=term)


def set_leader(ctx: ServiceContext, *, cluster_id: str, session_id: str | None) -> None:
    with transaction(ctx) as tx:
        clusters.set_leader(tx.conn, cluster_id=cluster_id, session_id=session_id)


def record_liveness(
    ctx: ServiceContext, *, last_seen: Mapping[str, float], applied: Mapping[str, int]
) -> None:
    if not last_seen and not applied:
        return
    with transaction(ctx) as tx:
        clusters.record_liveness(tx.conn, last_seen=last_seen, applied=applied)


def record_rejection(
    ctx: ServiceContext, *, cluster_id: str, deployment_id: str, rejection: Rejection
) -> None:
    with transaction(ctx) as tx:
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


def ingest(ctx: ServiceContext, items: Sequence[tuple[str, ObservationBatch]]) -> IngestResult:
    """Write batches of (possibly) many clusters in one transaction, then re-run admission for
    the clusters whose capacity changed. Deployments deleted meanwhile are skipped."""
    written: dict[tuple[str, str], tuple[int, int]] = {}
    with transaction(ctx) as tx:
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
        fresh = observations.write_deployments(tx.conn, own)
        # Pods joining or leaving move devices between reserved and held.
        changed = {cluster_id for cluster_id, _ in fresh}
        records = sum(1 + len(obs.replicas) for _, obs in fresh)
        for _, obs in fresh:
            current = rolling.get(obs.deployment_id)
            if current is not None and rollout_done(current, obs):
                deployments.set_rolling(tx.conn, deployment_id=current.deployment_id, rolling=False)
        nodes = [(cluster_id, node) for cluster_id, batch in items for node in batch.nodes]
        node_changes, nodes_written, node_records = observations.write_nodes(
            tx.conn, nodes, known=ctx.node_hashes, written=written
        )
        changed |= node_changes
        records += node_records
        for cluster_id, batch in items:
            for sighting in batch.discovered:
                if discovered.write(
                    tx.conn, cluster_id=cluster_id, observation=sighting, now=tx.now
                ):
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
        if changed:
            admit.run(ctx, tx, cluster_ids=changed)
    ctx.node_hashes.update(written)  # committed: now they describe the database
    return IngestResult(len(fresh), nodes_written, records, frozenset(changed))


def reset_sessions(ctx: ServiceContext) -> None:
    """At hub start no stream is open yet: clear what a previous process left marked."""
    with transaction(ctx) as tx:
        clusters.clear_sessions(tx.conn)


def prune_tombstones(ctx: ServiceContext) -> int:
    with transaction(ctx) as tx:
        return clusters.prune_tombstones(
            tx.conn, older_than=tx.now - ctx.settings.tombstone_retention_s
        )


def clusters_behind(ctx: ServiceContext) -> int:
    with snapshot(ctx) as conn:
        return clusters.count_behind(conn)
