"""Read views: stored plane and cluster state joined, with the derived fields computed.

Phases, staleness, degraded and live digests are computed here on every read from what the
store holds (hub/phases.py), never stored, so they cannot drift from their inputs. A cluster
silent past the grace period is stale: its reports are kept and shown, marked stale, and
nothing of it counts as ready, and nothing is compared with it (no drift).

Replicas, not pods: `ready_replicas` is the agent's count (for disaggregated serving, complete
sets of prefill and decode workers), and live digests count per digest the replicas its pods
make up (docs/rollouts.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub import phases, rollout, topology
from hub.model import (
    PHASE_ADMITTED,
    REASON_CLUSTER_READ_ONLY,
    REASON_REJECTED,
    ROLLOUT_CONVERGED,
    ROLLOUT_DRIFTED,
    ROLLOUT_ROLLING,
    AppliedObject,
    Capacity,
    Cluster,
    Deployment,
    FailoverRecord,
    Node,
    Project,
    QuotaUsage,
    Rejection,
    Replica,
    StatusReport,
    Workload,
)
from hub.service import credit
from hub.service.context import ServiceContext
from hub.store import accounting, observations
from hub.store import clusters as cluster_store
from hub.store import failovers as failover_store
from hub.store import nodes as node_store
from hub.store import replicas as replica_store
from hub.store.port import Transaction


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

    @property
    def state(self) -> str:
        """`rolling` while a rollout runs; `converged` only when no replica runs another
        digest; else `drifted` (an observed deployment given a new config: nothing rolls,
        the cluster differs, and its drift says how)."""
        if self.rolling:
            return ROLLOUT_ROLLING
        return ROLLOUT_DRIFTED if self.replicas_on_older else ROLLOUT_CONVERGED


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
    # Admitted and managed, but its cluster's agent is read-only and never applied it.
    idle_on_read_only: bool = False
    # The object its agent applied (without body), once reported.
    applied_object: AppliedObject | None = None
    # Of desired_replicas, how many stand in for lost clusters of the workload, and for which.
    failover_replicas: int = 0
    failover_for: tuple[str, ...] = ()

    @property
    def admission_reason(self) -> str:
        """The stored decision's reason, unless something stops the deployment now: the agent
        rejects its current generation (it reserves nothing meanwhile), or its admitted
        replicas never run because its cluster's agent is read-only. Disabled is disabled,
        whatever an earlier rejection said (the phase is pending too: hub/phases.py)."""
        if self._rejected:
            return REASON_REJECTED
        if self.idle_on_read_only:
            return REASON_CLUSTER_READ_ONLY
        return self.deployment.admission_reason

    @property
    def admission_message(self) -> str:
        d = self.deployment
        if self._rejected and self.rejection is not None:
            return (
                f"the agent of cluster {d.cluster_id} rejected generation"
                f" {self.rejection.generation}: {self.rejection.error}; it reserves no device"
                " until the agent applies it (a new generation, or the cause removed in the"
                " cluster)"
            )
        if self.idle_on_read_only:
            return (
                f"admitted, but cluster {d.cluster_id}'s agent runs read-only: it keeps this"
                " deployment and applies nothing, so it does not run; restart the agent"
                " managing (without --read-only or HANGAR_OPERATOR_READ_ONLY, with the full"
                " RBAC: docs/deploy.md, step 6) to run it"
            )
        return d.admission_message

    @property
    def _rejected(self) -> bool:
        return self.rejection is not None and self.deployment.enabled


@dataclass(frozen=True)
class WorkloadView:
    workload: Workload
    deployments: tuple[DeploymentView, ...]
    phase: str
    ready_replicas: int
    degraded: bool
    # Each cluster's place in the workload's rollout in waves (none when it never had one).
    waves: tuple[rollout.ClusterWave, ...] = ()
    # Failovers of its clusters, active and ended (hub/failover.py).
    failovers: tuple[FailoverRecord, ...] = ()


@dataclass(frozen=True)
class ClusterView:
    cluster: Cluster
    stale: bool
    nodes: tuple[Node, ...]
    capacity: dict[str, Capacity]
    # No agent of it was ever heard from: no message, no stream, no node reported.
    never_connected: bool = False


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
    return _silent(ctx, cluster.last_seen, now)


def _silent(ctx: ServiceContext, last_seen: float | None, now: float) -> bool:
    if last_seen is None:
        return False
    return now - last_seen > ctx.settings.stale_after_s


def stale_clusters(ctx: ServiceContext, conn: Transaction, cluster_ids: Sequence[str]) -> set[str]:
    return _stale(ctx, cluster_store.get_many(conn, cluster_ids))


def _stale(ctx: ServiceContext, clusters: Mapping[str, Cluster]) -> set[str]:
    now = ctx.clock()
    return {cluster_id for cluster_id, c in clusters.items() if is_stale(ctx, c, now)}


def deployment_views(
    ctx: ServiceContext, conn: Transaction, deployments: Sequence[Deployment]
) -> list[DeploymentView]:
    ids = [d.deployment_id for d in deployments]
    reports = observations.reports(conn, ids)
    rejections = observations.rejections(conn, ids)
    replicas = replica_store.replica_counts(conn, ids)
    no_replicas = replica_store.ReplicaCounts(replica_store.PodCounts(0, 0), {}, set())
    required = [d.deployment_id for d in deployments if d.topology]
    held_devices = replica_store.held_devices(conn, required) if required else {}
    held = accounting.held_by_deployment(conn, ids)
    applied_objects = observations.applied_objects(conn, ids)
    # One read of every cluster on the page (not two per deployment's cluster).
    # (Three columns: not the clusters' labels, maintenance and sessions.)
    clusters = cluster_store.sync_states(conn, {d.cluster_id for d in deployments})
    applied = {cluster_id: c.applied_revision for cluster_id, c in clusters.items()}
    read_only = {cluster_id for cluster_id, c in clusters.items() if c.read_only}
    now = ctx.clock()
    stale = {cluster_id for cluster_id, c in clusters.items() if _silent(ctx, c.last_seen, now)}
    standing: dict[tuple[str, str], dict[str, int]] = {}
    for records in failover_store.of_workloads(conn, {d.workload_id for d in deployments}).values():
        for record in records:
            for cluster_id, count in record.stand_ins.items() if record.active else ():
                key = (record.workload_id, cluster_id)
                standing.setdefault(key, {})[record.cluster_id] = count
    views = []
    for d in deployments:
        is_stale_cluster = d.cluster_id in stale
        counted = replicas.get(d.deployment_id, no_replicas)
        pods = counted.pods
        report = reports.get(d.deployment_id)
        ready = 0 if is_stale_cluster or report is None else report.ready_replicas
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
        by_digest = counted.by_digest_role
        live = {} if is_stale_cluster else _live_digests(d, by_digest)
        engine_versions = tuple(sorted(counted.engine_versions))
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
                rollout=_rollout(d, report, by_digest) if report is not None else None,
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
                applied_object=applied_objects.get(d.deployment_id),
                failover_replicas=sum(standing.get((d.workload_id, d.cluster_id), {}).values()),
                failover_for=tuple(sorted(standing.get((d.workload_id, d.cluster_id), {}))),
                # Nothing of it on the cluster: a read-only agent applies nothing.
                idle_on_read_only=(
                    d.cluster_id in read_only
                    and d.authority == "managed"
                    and phase == PHASE_ADMITTED
                    and report is None
                ),
            )
        )
    return views


UNLABELED = "unlabeled"
RoleCounts = Mapping[tuple[str, str], replica_store.DigestCount]


def _workers(d: Deployment, role: str) -> int:
    """Pods of one role in one replica."""
    if d.serving.mode != "disaggregated":
        return 1
    if role == "prefill":
        return d.serving.prefill_workers
    if role == "decode":
        return d.serving.decode_workers
    return d.serving.prefill_workers + d.serving.decode_workers  # roles not told apart


def _replicas_up(d: Deployment, counts: Mapping[str, int]) -> int:
    """Replicas that pods of each role make up (role -> pods), counting a partial one: the
    fewest replicas that could hold them, so a digest whose pods hold devices never reads 0."""
    return max((-(-pods // _workers(d, role)) for role, pods in counts.items() if pods), default=0)


def _replicas_ready(d: Deployment, counts: Mapping[str, int]) -> int:
    """Complete replicas among ready pods (role -> ready pods), as the agent counts them."""
    if d.serving.mode != "disaggregated" or set(counts) <= {"worker"}:
        return sum(counts.values()) // _workers(d, "worker")
    return min(counts.get(role, 0) // _workers(d, role) for role in ("prefill", "decode"))


def _by_digest(counts: RoleCounts, field: str) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for (digest, role), count in counts.items():
        roles = result.setdefault(digest, {})
        roles[role] = roles.get(role, 0) + getattr(count, field)
    return result


def _live_digests(d: Deployment, counts: RoleCounts) -> dict[str, int]:
    """Replicas up (pods scheduled on a node) per serving digest: during a rollout the old
    ones still serving and the new ones starting. Pods Wingsmith did not render show as
    "unlabeled"."""
    up = {
        (digest or UNLABELED): _replicas_up(d, roles)
        for digest, roles in sorted(_by_digest(counts, "running").items())
    }
    return {digest: replicas for digest, replicas in up.items() if replicas}


def template_kept(d: Deployment, report: StatusReport | None) -> bool:
    """An adopted deployment whose declaration leaves the pod template as it is: no
    engine_args (they enforce nothing), or the ones its engine runs. Its pods run the target
    whatever digest label they carry (none, or the one an earlier change left)."""
    live = report.live_args if report is not None else None
    return d.adopted and (not d.engine_args or tuple(d.engine_args) == live)


def rolls_out(conn: Transaction, d: Deployment) -> bool:
    """Would the agent's next apply of `d` change its pod template (so pods restart)? A DGD
    we render: yes, a new digest is a new template. An adopted one: only when its engine_args
    are set and differ from the flags its engine runs."""
    if not d.adopted:
        return True
    return not template_kept(d, observations.reports(conn, [d.deployment_id]).get(d.deployment_id))


def _rollout(d: Deployment, report: StatusReport, counts: RoleCounts) -> RolloutView:
    kept = template_kept(d, report)
    target = {
        digest: roles
        for digest, roles in _by_digest(counts, "ready").items()
        if kept or digest == d.serving_digest
    }
    ready: dict[str, int] = {}
    for roles in target.values():
        for role, pods in roles.items():
            ready[role] = ready.get(role, 0) + pods
    older = {
        digest: roles
        for digest, roles in _by_digest(counts, "pods").items()
        if not (kept or digest == d.serving_digest)
    }
    return RolloutView(
        rolling=d.rolling,
        generation=d.generation,
        serving_digest=d.serving_digest,
        ready_on_target=_replicas_ready(d, ready),
        replicas_on_older=sum(_replicas_up(d, roles) for roles in older.values()),
        surge_replicas=d.surge_replicas,
    )


def drift(
    d: Deployment,
    report: StatusReport,
    live_digests: Mapping[str, int],
    engine_versions: Sequence[str],
) -> tuple[Difference, ...]:
    """How the cluster differs from the declaration. For a managed deployment the declared
    replicas are the admitted ones (what the agent was told to run). While a rollout runs, old
    and new config side by side are no drift; only replicas are compared."""
    found = []
    declared_replicas = d.admitted_replicas if d.authority == "managed" else d.desired_replicas
    # Replicas an autoscaler owns (through Dynamo's scaling adapter) are its to set: no drift.
    autoscaled = report.replicas_owner.startswith("autoscaler:")
    if report.applied_replicas != declared_replicas and not autoscaled:
        found.append(Difference("replicas", str(declared_replicas), str(report.applied_replicas)))
    if d.rolling:
        return tuple(found)
    kept = template_kept(d, report)
    other = sorted(g for g in live_digests if g not in (d.serving_digest, UNLABELED))
    if other and not kept:
        found.append(Difference("serving_digest", d.serving_digest, ", ".join(other)))
    versions = [v for v in engine_versions if v != d.serving.engine_version]
    if versions:
        found.append(
            Difference("engine_version", d.serving.engine_version, ", ".join(engine_versions))
        )
    # An adopted deployment's live_args are all its flags, and empty engine_args enforce
    # none; a rendered one's are the flags beyond its render, to match its engine_args
    # (agent/observe.py), so an edit made outside Wingsmith shows, demoted or not.
    if not kept and tuple(d.engine_args) != tuple(report.live_args):
        found.append(Difference("engine_args", " ".join(d.engine_args), " ".join(report.live_args)))
    return tuple(found)


def workload_view(
    workload: Workload,
    deployments: Sequence[DeploymentView],
    failovers: Sequence[FailoverRecord] = (),
) -> WorkloadView:
    ready = sum(d.ready_replicas for d in deployments)
    return WorkloadView(
        failovers=tuple(failovers),
        workload=workload,
        deployments=tuple(deployments),
        phase=phases.workload_phase((d.phase for d in deployments), replicas=workload.replicas),
        ready_replicas=ready,
        degraded=any(d.status is not None for d in deployments) and ready < workload.replicas,
        waves=_waves(workload, deployments) if workload.rollout.state else (),
    )


def _waves(
    workload: Workload, deployments: Sequence[DeploymentView]
) -> tuple[rollout.ClusterWave, ...]:
    """Each cluster's place in the workload's rollout, as the API says it: a cluster whose
    replicas run another config while nothing rolls there reads drifted, not converged."""
    drifted = {
        d.deployment.cluster_id
        for d in deployments
        if d.rollout is not None and d.rollout.state == ROLLOUT_DRIFTED
    }
    waves = rollout.waves_of(workload, [d.deployment for d in deployments])
    return tuple(dataclasses.replace(w, drifted=w.cluster_id in drifted) for w in waves)


def cluster_view(ctx: ServiceContext, conn: Transaction, cluster: Cluster) -> ClusterView:
    capacity = {
        device_class: cap
        for (_, device_class), cap in accounting.capacities(conn, [cluster.cluster_id]).items()
    }
    nodes = tuple(node_store.nodes_of(conn, cluster.cluster_id))
    never_connected = cluster.never_connected and not nodes
    return ClusterView(
        cluster=cluster,
        stale=is_stale(ctx, cluster, ctx.clock()),
        nodes=nodes,
        # Never heard from: no device count is known, so none is shown (not "0 free").
        capacity={} if never_connected else dict(sorted(capacity.items())),
        never_connected=never_connected,
    )


def project_view(conn: Transaction, project: Project) -> ProjectView:
    charges = accounting.quota_charges(conn, [project.name])
    credits = credit.read(conn, [project.name])
    classes = set(project.quotas) | {device_class for (_, device_class) in charges}
    usage = {
        device_class: quota_usage(
            charges.get((project.name, device_class), (0, 0)),
            covered=credits.credit.get((project.name, device_class), 0),
            limit=project.quotas.get(device_class, 0),
        )
        for device_class in sorted(classes)
    }
    return ProjectView(project=project, usage=usage)


def quota_usage(charge: tuple[int, int], *, covered: int, limit: int) -> QuotaUsage:
    """A project's usage of one class from its (used, reserved) charge: a replica and its
    failover stand-in count once, the credit coming off what is reserved first (a stand-in
    not yet running), then off what is held."""
    used, reserved = charge
    off_reserved = min(reserved, covered)
    reserved, used = reserved - off_reserved, max(0, used - (covered - off_reserved))
    return QuotaUsage(used=used, reserved=reserved, limit=limit)


def replica_views(
    ctx: ServiceContext, conn: Transaction, replicas: Sequence[Replica]
) -> list[ReplicaView]:
    stale = stale_clusters(ctx, conn, [r.cluster_id for r in replicas])
    return [ReplicaView(replica=r, stale=r.cluster_id in stale) for r in replicas]
