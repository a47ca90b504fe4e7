"""Read views: stored plane and cluster state joined, with the derived fields computed.

Phases, staleness, degraded and live digests are computed here on every read from what the
store holds (hub/phases.py), never stored, so they cannot drift from their inputs. A cluster
silent past the grace period is stale: its reports are kept and shown, marked stale, and
nothing of it counts as ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub import phases, topology
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
class RolloutView:
    rolling: bool
    generation: int
    serving_digest: str
    ready_on_target: int
    replicas_on_older: int
    surge_replicas: int


@dataclass(frozen=True)
class Difference:
    field: str
    declared: str
    observed: str

    def __str__(self) -> str:
        return f"{self.field}: declared {self.declared or '(none)'}, observed {self.observed}"


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
    rollout: RolloutView | None = None
    drift: tuple[Difference, ...] = ()
    live_args: tuple[str, ...] = ()
    engine_versions: tuple[str, ...] = ()
    topology_violations: tuple[topology.Violation, ...] = ()


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
    digests = observations.digest_counts(conn, ids)
    versions = observations.engine_versions(conn, ids)
    required = [d.deployment_id for d in deployments if d.topology]
    held_devices = observations.held_devices(conn, required) if required else {}
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
        by_digest = digests.get(d.deployment_id, {})
        live = {} if is_stale_cluster else _live_digests(by_digest)
        engine_versions = tuple(sorted(versions.get(d.deployment_id, set())))
        views.append(
            DeploymentView(
                deployment=d,
                phase=phase,
                status=status,
                ready_replicas=ready,
                live_digests=live,
                degraded=status is not None and ready < d.desired_replicas,
                stale=is_stale_cluster,
                applied=applied.get(d.cluster_id, 0) >= d.revision,
                rejection=rejection if rejection and rejection.generation >= d.generation else None,
                rollout=_rollout(d, by_digest) if report is not None else None,
                drift=(
                    drift(d, report, live, engine_versions)
                    if report is not None and not is_stale_cluster
                    else ()
                ),
                live_args=report.live_args if report is not None else (),
                engine_versions=engine_versions,
                topology_violations=tuple(
                    topology.violations(d.topology, held_devices.get(d.deployment_id, {}))
                ),
            )
        )
    return views


UNLABELED = "unlabeled"


def _live_digests(counts: Mapping[str, observations.DigestCount]) -> dict[str, int]:
    """Replicas up (scheduled on a node) per serving digest: during a rollout the old ones
    still serving and the new ones starting. Pods Wingsmith did not render show as
    "unlabeled"."""
    return {(digest or UNLABELED): c.running for digest, c in sorted(counts.items()) if c.running}


def _on_target(d: Deployment, digest: str) -> bool:
    # Pods of an adopted DGD carry no digest until Wingsmith changes their template: they run
    # what was adopted, which is the target unless a change is rolling out.
    return digest == d.serving_digest or (digest == "" and d.adopted and not d.rolling)


def _rollout(d: Deployment, counts: Mapping[str, observations.DigestCount]) -> RolloutView:
    return RolloutView(
        rolling=d.rolling,
        generation=d.generation,
        serving_digest=d.serving_digest,
        ready_on_target=sum(c.ready for g, c in counts.items() if _on_target(d, g)),
        replicas_on_older=sum(c.pods for g, c in counts.items() if not _on_target(d, g)),
        surge_replicas=d.surge_replicas,
    )


def drift(
    d: Deployment,
    report: StatusReport,
    live_digests: Mapping[str, int],
    engine_versions: Sequence[str],
) -> tuple[Difference, ...]:
    """How the cluster differs from the declaration. For a managed deployment the declared
    replicas are the admitted ones (what the agent was told to run)."""
    found = []
    declared_replicas = d.admitted_replicas if d.authority == "managed" else d.desired_replicas
    if report.desired_replicas != declared_replicas:
        found.append(Difference("replicas", str(declared_replicas), str(report.desired_replicas)))
    other = sorted(g for g in live_digests if g not in (d.serving_digest, UNLABELED))
    if other and not d.rolling:
        found.append(Difference("serving_digest", d.serving_digest, ", ".join(other)))
    versions = [v for v in engine_versions if v != d.serving.engine_version]
    if versions:
        found.append(
            Difference("engine_version", d.serving.engine_version, ", ".join(engine_versions))
        )
    if d.adopted and not d.rolling and tuple(d.engine_args) != tuple(report.live_args):
        found.append(Difference("engine_args", " ".join(d.engine_args), " ".join(report.live_args)))
    return tuple(found)


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
