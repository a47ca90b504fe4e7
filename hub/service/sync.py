"""The use cases behind an agent's stream: desired-state deltas, acks and rejects, sessions and
leadership, liveness; the hub's own registration. An observation batch's way into the store is
hub/service/ingest.py's.

Called by hub/sync/session.py, which owns the protocol; this module owns the rules:
- a delta holds every deployment whose spec changed after the agent's revision, and a tombstone
  for every deletion: a removal (deleted while managed: the agent deletes its DGD) or a release
  (deleted while observed: the agent only lets go of its DGD); a snapshot carries every release
  still kept, and replaces everything the agent holds; it is sent when the agent
  is new (no epoch), holds a revision of another store epoch (the database was replaced),
  claims a revision the hub never issued, or is behind the tombstone floor;
- an agent may only reject its own cluster's deployments (PermissionDenied otherwise);
- a node whose reporters are gone for good is dropped as if reported absent, and a change of
  devices or allocations re-runs admission for that cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hub import errors
from hub.model import AgentSession, AuditRecord, Deployment, Rejection
from hub.service import admit
from hub.service.context import (
    SUPERSEDE_CHANNEL,
    TERM_CHANNEL,
    ServiceContext,
    payloads,
    snapshot,
    transaction,
)
from hub.store import accounting, audit, clusters, deployments, observations
from hub.store import nodes as node_store

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


def unreported_nodes(ctx: ServiceContext) -> set[tuple[str, str]]:
    """(cluster id, node id) of the nodes no open stream reports in a cluster that still
    reports (hub/store/nodes.py says which): candidates for `drop_nodes`."""
    with snapshot(ctx) as conn:
        return set(node_store.unreported_nodes(conn))


def drop_nodes(ctx: ServiceContext, nodes: Sequence[tuple[str, str]]) -> frozenset[str]:
    """These nodes' reporters have been gone for the grace period (hub/sync/liveness.py): the
    node left with them, as far as anyone can tell. Their devices stop counting as capacity,
    and their allocations and replicas go, as if the cluster had reported the node absent;
    admission runs again for their clusters. A node whose agent came back meanwhile is kept.
    Returns the clusters whose capacity changed."""
    written: dict[tuple[str, str], tuple[int, int]] = {}
    with transaction(ctx, {cluster_id for cluster_id, _ in nodes}) as tx:
        still = sorted(set(nodes) & set(node_store.unreported_nodes(tx.conn)))
        changed = node_store.drop_nodes(tx.conn, still, known=ctx.node_hashes, written=written)
        accounting.refresh_held_of(tx.conn, changed)
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
