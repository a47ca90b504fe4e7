"""Read views: stored plane and cluster state joined, with the derived fields computed.

Phases, staleness, degraded and live digests are computed here on every read from what the
store holds (hub/phases.py), never stored, so they cannot drift from their inputs. A cluster
silent past the grace period is stale: its reports are kept and shown, marked stale, and
nothing of it counts as ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hub import phases
from hub.model import (
    Capacity,
    Cluster,
    Deployment,
    Node,
    Project,
    QuotaUsage,
    Rejection,
    Replica,
    StatusReport,
    Workload,
)
from hub.service.context import ServiceContext
from hub.store import accounting, observations
from hub.store import clusters as cluster_store
from hub.store.db import Connection


@dataclass(frozen=True)
class StatusView:
    report: StatusReport
    stale: bool
    ready_replicas: int


@dataclass(frozen=True)
class DeploymentView:
    deployment: Deployment
    phase: str
    status: StatusView | None
    ready_replicas: int
    live_digests: dict[str, int]
    degraded: bool
    stale: bool
    applied: bool
    rejection: Rejection | None


@dataclass(frozen=True)
class WorkloadView:
    workload: Workload
    deployments: tuple[DeploymentView, ...]
    phase: str
    ready_replicas: int
    degraded: bool


@dataclass(frozen=True)
class ClusterView:
    cluster: Cluster
    stale: bool
    nodes: tuple[Node, ...]
    capacity: dict[str, Capacity]


@dataclass(frozen=True)
class ProjectView:
    project: Project
    usage: dict[str, QuotaUsage]


@dataclass(frozen=True)
class ReplicaView:
    replica: Replica
    stale: bool


def is_stale(ctx: ServiceContext, cluster: Cluster, now: float) -> bool:
    """Silent for longer than the grace period. A cluster never heard from is not stale."""
    if cluster.last_seen is None:
        return False
    return now - cluster.last_seen > ctx.settings.stale_after_s


def stale_clusters(ctx: ServiceContext, conn: Connection, cluster_ids: Sequence[str]) -> set[str]:
    now = ctx.clock()
    result = set()
    for cluster_id in set(cluster_ids):
        cluster = cluster_store.get(conn, cluster_id)
        if cluster is not None and is_stale(ctx, cluster, now):
            result.add(cluster_id)
    return result


def deployment_views(
    ctx: ServiceContext, conn: Connection, deployments: Sequence[Deployment]
) -> list[DeploymentView]:
    ids = [d.deployment_id for d in deployments]
    reports = observations.reports(conn, ids)
    rejections = observations.rejections(conn, ids)
    counts = observations.pod_counts(conn, ids)
    digests = observations.live_digests(conn, ids)
    held = accounting.held_by_deployment(conn, ids)
    applied = {
        c.cluster_id: c.applied_revision
        for c in (cluster_store.get(conn, cid) for cid in {d.cluster_id for d in deployments})
        if c is not None
    }
    stale = stale_clusters(ctx, conn, [d.cluster_id for d in deployments])
    views = []
    for d in deployments:
        is_stale_cluster = d.cluster_id in stale
        pods = counts.get(d.deployment_id, observations.PodCounts(0, 0))
        ready = 0 if is_stale_cluster else pods.ready
        report = reports.get(d.deployment_id)
        rejection = rejections.get(d.deployment_id)
        phase = phases.deployment_phase(
            phases.PhaseInputs(
                enabled=d.enabled,
                desired_replicas=d.desired_replicas,
                admitted_replicas=d.admitted_replicas,
                generation=d.generation,
                status_phase=report.phase if report else None,
                rejected_generation=rejection.generation if rejection else 0,
                pods=pods.pods,
                allocated_devices=held.get(d.deployment_id, 0),
                ready_replicas=ready,
            )
        )
        status = (
            StatusView(report=report, stale=is_stale_cluster, ready_replicas=ready)
            if report is not None
            else None
        )
        views.append(
            DeploymentView(
                deployment=d,
                phase=phase,
                status=status,
                ready_replicas=ready,
                live_digests={} if is_stale_cluster else digests.get(d.deployment_id, {}),
                degraded=status is not None and ready < d.desired_replicas,
                stale=is_stale_cluster,
                applied=applied.get(d.cluster_id, 0) >= d.revision,
                rejection=rejection if rejection and rejection.generation >= d.generation else None,
            )
        )
    return views


def workload_view(workload: Workload, deployments: Sequence[DeploymentView]) -> WorkloadView:
    ready = sum(d.ready_replicas for d in deployments)
    return WorkloadView(
        workload=workload,
        deployments=tuple(deployments),
        phase=phases.workload_phase(d.phase for d in deployments),
        ready_replicas=ready,
        degraded=any(d.status is not None for d in deployments) and ready < workload.replicas,
    )


def cluster_view(ctx: ServiceContext, conn: Connection, cluster: Cluster) -> ClusterView:
    capacity = {
        device_class: cap
        for (_, device_class), cap in accounting.capacities(conn, [cluster.cluster_id]).items()
    }
    return ClusterView(
        cluster=cluster,
        stale=is_stale(ctx, cluster, ctx.clock()),
        nodes=tuple(observations.nodes_of(conn, cluster.cluster_id)),
        capacity=dict(sorted(capacity.items())),
    )


def project_view(conn: Connection, project: Project) -> ProjectView:
    charges = accounting.quota_charges(conn, [project.name])
    classes = set(project.quotas) | {device_class for (_, device_class) in charges}
    usage = {}
    for device_class in sorted(classes):
        used, reserved = charges.get((project.name, device_class), (0, 0))
        usage[device_class] = QuotaUsage(
            used=used, reserved=reserved, limit=project.quotas.get(device_class, 0)
        )
    return ProjectView(project=project, usage=usage)


def replica_views(
    ctx: ServiceContext, conn: Connection, replicas: Sequence[Replica]
) -> list[ReplicaView]:
    stale = stale_clusters(ctx, conn, [r.cluster_id for r in replicas])
    return [ReplicaView(replica=r, stale=r.cluster_id in stale) for r in replicas]
