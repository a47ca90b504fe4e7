"""Clusters: registration (with the agent token, shown once), reads, deletion, agent
authentication, and what liveness changes for admission."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence

from hub import errors
from hub.model import Cluster, Maintenance, evolve
from hub.service import admit, dryrun, failover, scoped, selectors, validate, views
from hub.service import workloads as workloads_service
from hub.service.context import ServiceContext, Tx, snapshot, transaction
from hub.store import accounting, clusters, deployments
from hub.store import nodes as node_store
from hub.store.port import Transaction

TOKEN_PREFIX = "wsa_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create(
    ctx: ServiceContext, *, cluster_id: str, labels: Mapping[str, str]
) -> tuple[views.ClusterView, str]:
    """Register a cluster; returns its view and the agent token (stored only as a hash)."""
    validate.dns_label(cluster_id, "cluster.cluster_id")
    clean = validate.labels(labels, "cluster.labels")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction(ctx) as tx:
        clusters.insert(
            tx.conn, cluster_id=cluster_id, labels=clean, token_hash=token_hash(token), now=tx.now
        )
        return views.cluster_view(ctx, tx.conn, _get(tx.conn, cluster_id)), token


def set_labels(
    ctx: ServiceContext, *, cluster_id: str, labels: Mapping[str, str]
) -> views.ClusterView:
    """Replace the cluster's labels (an operator's: region=eu). Placements decided from now on
    select by them (a workload's placement.cluster_selector, its preferences); what is placed
    stays where it is, as a new cluster moves nothing either."""
    clean = validate.labels(labels, "cluster.labels")
    with transaction(ctx) as tx:
        _get(tx.conn, cluster_id)
        clusters.set_labels(tx.conn, cluster_id=cluster_id, labels=clean)
        return views.cluster_view(ctx, tx.conn, _get(tx.conn, cluster_id))


def get(ctx: ServiceContext, cluster_id: str) -> views.ClusterView:
    with snapshot(ctx) as conn:
        return views.cluster_view(ctx, conn, _get(conn, cluster_id))


def require(ctx: ServiceContext, cluster_id: str) -> None:
    """NotFound unless the cluster is registered (a list filter naming it, for one)."""
    with snapshot(ctx) as conn:
        _get(conn, cluster_id)


def list_page(
    ctx: ServiceContext, *, page_size: int, page_token: str, label_selector: str = ""
) -> tuple[list[views.ClusterView], str]:
    """A page of clusters; only those whose labels `label_selector` matches."""
    limit, after = validate.page(page_size, page_token)
    selector = selectors.parse(label_selector)
    with snapshot(ctx) as conn:
        found = clusters.list_page(conn, after=after, limit=limit, selector=selector)
        result = [views.cluster_view(ctx, conn, c) for c in found]
    return result, validate.next_token([c.cluster_id for c in found], limit)


def delete(ctx: ServiceContext, cluster_id: str) -> None:
    with transaction(ctx) as tx:
        _get(tx.conn, cluster_id)
        placed = deployments.count_on_cluster(tx.conn, cluster_id)
        if placed:
            raise errors.FailedPrecondition(
                f"cluster {cluster_id} has {placed} deployment(s)",
                ["change the workloads' placement or delete them first"],
            )
        clusters.delete(tx.conn, cluster_id)
        # Its identity dies with it: the certificates its agents used are refused from now on,
        # even for a cluster registered again under the same id.
        clusters.revoke_certificates(tx.conn, cluster_id, now=tx.now)
    # Committed: its open streams close (UNAUTHENTICATED); the token's hash is gone from the
    # store, so no new stream or queued batch of it is accepted either.
    ctx.publisher.identity_changed(cluster_id, None)


def rotate_token(
    ctx: ServiceContext, cluster_id: str, *, revoke_certificates: bool
) -> tuple[views.ClusterView, str]:
    """Give the cluster a new agent token (returned, shown once); the old one stops working at
    once and the streams opened with it are closed. With `revoke_certificates`, the client
    certificates seen on its streams are refused from now on too (mutual TLS)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    new_hash = token_hash(token)
    with transaction(ctx) as tx:
        clusters.set_token_hash(tx.conn, cluster_id, new_hash)
        if revoke_certificates:
            clusters.revoke_certificates(tx.conn, cluster_id, now=tx.now)
        view = views.cluster_view(ctx, tx.conn, _get(tx.conn, cluster_id))
    ctx.publisher.identity_changed(cluster_id, new_hash)
    return view, token


def cordon(
    ctx: ServiceContext, cluster_id: str, *, node: str = "", device_class: str = ""
) -> views.ClusterView:
    """No new placements or admissions on the cluster, or only on one of its nodes or device
    classes; nothing running moves (docs/placement.md, "Cordon and drain"). Idempotent."""
    _scope(node, device_class)
    return scoped.write(
        ctx,
        _maintenance_scope(ctx, cluster_id),
        lambda tx: _cordon(ctx, tx, cluster_id, node=node, device_class=device_class),
    )


def drain(ctx: ServiceContext, cluster_id: str) -> views.ClusterView:
    """Cordon the cluster and re-place its managed deployments elsewhere first; each is
    removed here once its stand-ins run (make-before-break, hub/failover.py). Observed and
    adopted deployments stay. Idempotent; `uncordon` stops it."""
    return scoped.write(
        ctx, _maintenance_scope(ctx, cluster_id), lambda tx: _drain(ctx, tx, cluster_id)
    )


def uncordon(
    ctx: ServiceContext, cluster_id: str, *, node: str = "", device_class: str = ""
) -> views.ClusterView:
    """Undo a cordon: of one node or device class, or (neither given) every cordon of the
    cluster. What waits there is admitted if it fits. Idempotent."""
    _scope(node, device_class)
    return scoped.write(
        ctx,
        _maintenance_scope(ctx, cluster_id),
        lambda tx: _uncordon(ctx, tx, cluster_id, node=node, device_class=device_class),
    )


def preview_cordon(
    ctx: ServiceContext, cluster_id: str, *, node: str = "", device_class: str = ""
) -> tuple[views.ClusterView, dryrun.DryRun]:
    """What `cordon` would do (validate_only), writing nothing: the cluster as it would be and
    every deployment that would change (stand-ins of workloads with placement.failover)."""
    _scope(node, device_class)
    return dryrun.rehearse(
        ctx,
        lambda c, tx: _cordon(c, tx, cluster_id, node=node, device_class=device_class),
        cluster_ids=[cluster_id],
    )


def preview_drain(ctx: ServiceContext, cluster_id: str) -> tuple[views.ClusterView, dryrun.DryRun]:
    """What `drain` would do (validate_only): the stand-ins it places, and where they wait."""
    return dryrun.rehearse(ctx, lambda c, tx: _drain(c, tx, cluster_id), cluster_ids=[cluster_id])


def preview_uncordon(
    ctx: ServiceContext, cluster_id: str, *, node: str = "", device_class: str = ""
) -> tuple[views.ClusterView, dryrun.DryRun]:
    """What `uncordon` would do (validate_only): what waits there and would be admitted, the
    stand-ins of a stopped drain that would go."""
    _scope(node, device_class)
    return dryrun.rehearse(
        ctx,
        lambda c, tx: _uncordon(c, tx, cluster_id, node=node, device_class=device_class),
        cluster_ids=[cluster_id],
    )


def _cordon(
    ctx: ServiceContext, tx: Tx, cluster_id: str, *, node: str, device_class: str
) -> views.ClusterView:
    cluster = _get(tx.conn, cluster_id)
    _need_maintenance_scope(tx, cluster_id)
    marks = cluster.maintenance
    if node:
        reported = {n.node_id for n in node_store.nodes_of(tx.conn, cluster_id)}
        if node not in reported and node not in marks.nodes:
            # NOT_FOUND: a well-formed name of nothing is no bad argument (docs/rest.md
            # "The contract").
            raise errors.NotFound(f"cluster {cluster_id}: node", node)
        marks = evolve(marks, nodes=tuple(sorted({*marks.nodes, node})))
    elif device_class:
        marks = evolve(marks, device_classes=tuple(sorted({*marks.device_classes, device_class})))
    else:
        marks = evolve(marks, cordoned=True)
    clusters.set_maintenance(tx.conn, cluster_id, marks)
    # What waits there learns it is cordoned; nothing admitted is taken back. Workloads
    # with placement.failover get stand-ins elsewhere.
    admit.run(ctx, tx, cluster_ids=[cluster_id])
    failover.reconcile(ctx, tx, deployments.workloads_on(tx.conn, [cluster_id]))
    return views.cluster_view(ctx, tx.conn, _get(tx.conn, cluster_id))


def _drain(ctx: ServiceContext, tx: Tx, cluster_id: str) -> views.ClusterView:
    marks = _get(tx.conn, cluster_id).maintenance
    _need_maintenance_scope(tx, cluster_id)
    # A drain cordons (docs/placement.md): the cluster reads cordoned while it drains, and
    # stays cordoned once drained until it is uncordoned.
    clusters.set_maintenance(tx.conn, cluster_id, evolve(marks, cordoned=True, draining=True))
    admit.run(ctx, tx, cluster_ids=[cluster_id])
    failover.reconcile(ctx, tx, deployments.workloads_on(tx.conn, [cluster_id]))
    return views.cluster_view(ctx, tx.conn, _get(tx.conn, cluster_id))


def _uncordon(
    ctx: ServiceContext, tx: Tx, cluster_id: str, *, node: str, device_class: str
) -> views.ClusterView:
    marks = _get(tx.conn, cluster_id).maintenance
    _need_maintenance_scope(tx, cluster_id)
    if node:
        marks = evolve(marks, nodes=tuple(n for n in marks.nodes if n != node))
    elif device_class:
        marks = evolve(
            marks, device_classes=tuple(c for c in marks.device_classes if c != device_class)
        )
    else:
        marks = Maintenance()
    clusters.set_maintenance(tx.conn, cluster_id, marks)
    admit.run(ctx, tx, cluster_ids=[cluster_id])
    # A stopped drain takes its stand-ins back at once; a failover's wait for failback.
    failover.reconcile(ctx, tx, deployments.workloads_on(tx.conn, [cluster_id]))
    return views.cluster_view(ctx, tx.conn, _get(tx.conn, cluster_id))


def _maintenance_scope(ctx: ServiceContext, cluster_id: str) -> set[str]:
    """The clusters a cordon, drain or uncordon of `cluster_id` locks, from a snapshot
    (checked again inside the write: `_need_maintenance_scope`)."""
    with snapshot(ctx) as conn:
        return _maintenance_reads(conn, cluster_id)


def _maintenance_reads(conn: Transaction, cluster_id: str) -> set[str]:
    """The cluster, and what reconciling the workloads on it reads and may write: their
    deployments' clusters and every cluster their placement may choose (stand-ins of a
    failover or a drain go there; a stopped drain's come back from there)."""
    on_it = deployments.workloads_on(conn, [cluster_id])
    return {cluster_id} | workloads_service.clusters_read_by(conn, on_it)


def _need_maintenance_scope(tx: Tx, cluster_id: str) -> None:
    """Before anything is written: the transaction holds those clusters' locks (else it runs
    again with them: WiderScope)."""
    scoped.need(tx, _maintenance_reads(tx.conn, cluster_id))


def _scope(node: str, device_class: str) -> None:
    if node and device_class:
        raise errors.InvalidArgument("node", "give a node or a device_class, not both")
    if node:
        validate.node_name(node, "node")
    if device_class:
        validate.device_class(device_class, "device_class")


def check_certificate(ctx: ServiceContext, *, cluster_id: str, fingerprint: str) -> None:
    """Unauthenticated if this client certificate was revoked (its cluster was deleted, or
    re-keyed with its certificates revoked); else remember it as one of the cluster's."""
    # The fleet lock shared, no cluster's: a certificate is revoked only by covering writes (a
    # cluster deleted, a token rotated), which cannot run while this holds the fleet lock, so
    # what it read stays true until it commits. Two streams binding one certificate at once:
    # the second insert waits for the first and then does nothing. Every mutual-TLS stream
    # open runs this in the hub's writer thread: under the covering lock it held up that
    # thread, and every writer of the fleet, for as long as any scoped write was in flight.
    with transaction(ctx, ()) as tx:
        if clusters.certificate_revoked(tx.conn, fingerprint):
            raise errors.Unauthenticated(
                "this client certificate was revoked (its cluster was deleted, or its token"
                f" rotated with --revoke-certificates): issue a new one for cluster {cluster_id}"
            )
        clusters.bind_certificate(
            tx.conn, fingerprint=fingerprint, cluster_id=cluster_id, now=tx.now
        )


def stale_ids(ctx: ServiceContext) -> set[str]:
    """The clusters silent for longer than the grace period, now."""
    with snapshot(ctx) as conn:
        return accounting.silent_clusters(
            conn, seen_before=ctx.clock() - ctx.settings.stale_after_s
        )


def liveness_changed(ctx: ServiceContext, cluster_ids: Sequence[str]) -> None:
    """These clusters went stale or came back: re-run admission for their waiting deployments.

    A stale cluster offers no free capacity to new demand, so what waits there learns why; one
    that reports again offers its free devices, so what waits is admitted if it fits. Nothing
    admitted is taken back when a cluster goes quiet (docs/admission.md).
    """
    if not cluster_ids:
        return
    # Those clusters' locks (over 256: covering), as an ingest's pass on them: the pass reads
    # and writes their deployments and takes the admission locks itself.
    with transaction(ctx, cluster_ids) as tx:
        admit.run(ctx, tx, cluster_ids=cluster_ids)


def current_token(ctx: ServiceContext, cluster_id: str, token_hash: str) -> bool:
    """The cluster still exists and this is still its token (a stream's identity is the token
    it opened with, not only the cluster id)."""
    with snapshot(ctx) as conn:
        return clusters.token_hashes(conn, [cluster_id]).get(cluster_id) == token_hash


def authenticate(ctx: ServiceContext, token: str) -> str:
    """The cluster a token belongs to; Unauthenticated for any other token.

    Looking the hash up by index leaks nothing useful about the token: an attacker would need a
    SHA-256 preimage of a 256-bit random value.
    """
    if not token.startswith(TOKEN_PREFIX):
        raise errors.Unauthenticated("invalid cluster token")
    with snapshot(ctx) as conn:
        cluster_id = clusters.by_token_hash(conn, token_hash(token))
    if cluster_id is None:
        raise errors.Unauthenticated("invalid cluster token")
    return cluster_id


def _get(conn: Transaction, cluster_id: str) -> Cluster:
    cluster = clusters.get(conn, cluster_id)
    if cluster is None:
        raise errors.NotFound("cluster", cluster_id)
    return cluster
