"""State words agree with the facts they name (issue 20 section 3): small named checks.

Each check takes what a user reads (the hub's views, and for a word the API spells itself, the
message it answers) and returns the disagreements it found as sentences naming the cluster,
workload or deployment; an empty list means the words are true. `check` reads every cluster
and workload of a hub through its use cases and runs them all; `preempted_stays_said` compares
two readings of one deployment (a word about what happened needs the before).

The words:
1. `draining_reads_cordoned`: a draining cluster reads cordoned (a drain cordons).
2. `failover_words`: a failover record reads `failed_over` only with stand-ins placed; one
   that placed none reads `stays` and says why (a drain of a pinned workload, say).
3. `preempted_stays_said`: a preempted deployment partly admitted again reads `preempted` for
   the part still waiting on capacity.
4. `rollout_words`: a deployment's rollout reads `converged` only when it is not rolling and
   no replica runs another digest; an observed deployment whose replicas run another config
   reads drift (`drifted`, and a `serving_digest` difference), not converged. `wave_words`:
   the same for each cluster of a rollout in waves.
5. `recovering_words`: a failback reads `recovering` only once the returning cluster reports
   (not stale, not cordoned) all its own replicas ready, in a report made since it was lost.

Used by tests/unit/hub/test_state_words.py (each word's own example) and by the invariants of
the model-based test (invariant 5): from a store, `check(ServiceContext(db=store,
settings=the_hub_settings))` (the settings say when a cluster is stale); between two steps,
`preempted_stays_said` over each deployment's views before and after.
"""

from __future__ import annotations

from collections.abc import Iterable

from hub.api import convert
from hub.model import REASON_INSUFFICIENT_CAPACITY, REASON_PREEMPTED
from hub.service import clusters, views, workloads
from hub.service.context import ServiceContext
from wingsmith.v1 import resources_pb2 as pb


def draining_reads_cordoned(view: views.ClusterView) -> list[str]:
    marks = view.cluster.maintenance
    said = convert.cluster(view)
    if marks.draining and not said.cordoned:
        return [f"cluster {view.cluster.cluster_id} is draining but does not read cordoned"]
    return []


def failover_words(view: views.WorkloadView) -> list[str]:
    found = []
    name = view.workload.name
    for record in view.failovers:
        if not record.active:
            continue
        placed = sum(record.stand_ins.values())
        where = f"workload {name}'s failover of cluster {record.cluster_id}"
        if record.state == "failed_over" and not placed:
            found.append(f"{where} reads failed_over with no stand-in placed")
        if record.state == "stays" and placed:
            found.append(f"{where} reads stays with {placed} stand-in(s) placed")
        if record.state == "stays" and not record.message:
            found.append(f"{where} reads stays without saying why")
    return found


def preempted_stays_said(before: views.DeploymentView, after: views.DeploymentView) -> list[str]:
    """A deployment that read `preempted`, wants as many replicas as then, and still waits on
    capacity (partly admitted again or not) still reads `preempted`."""
    b, a = before.deployment, after.deployment
    if (
        before.admission_reason == REASON_PREEMPTED
        and a.enabled
        and a.desired_replicas == b.desired_replicas
        and a.admitted_replicas < a.desired_replicas
        and after.admission_reason == REASON_INSUFFICIENT_CAPACITY
    ):
        return [
            f"deployment {a.name} was preempted and {a.desired_replicas - a.admitted_replicas}"
            f" of its replicas still wait, but it reads {after.admission_reason}"
        ]
    return []


def rollout_words(view: views.DeploymentView) -> list[str]:
    d = view.deployment
    if view.rollout is None:
        return []
    said = convert.deployment(view).rollout.state
    others = view.rollout.replicas_on_older
    found = []
    if said == pb.ROLLOUT_STATE_CONVERGED and (d.rolling or others):
        found.append(
            f"deployment {d.name} reads converged while"
            + (" rolling" if d.rolling else f" {others} replica(s) run another digest")
        )
    if d.authority == "observed" and others and not d.rolling:
        if said != pb.ROLLOUT_STATE_DRIFTED:
            found.append(f"observed deployment {d.name} runs another config but reads {said}")
        if not any(x.field == "serving_digest" for x in view.drift):
            found.append(f"observed deployment {d.name} runs another config with no drift")
    return found


def wave_words(view: views.WorkloadView) -> list[str]:
    """A cluster of a rollout in waves reads converged only when its replicas all run the
    target (an observed cluster still on the old config reads drifted)."""
    if not view.workload.rollout.state:
        return []
    by_cluster = {v.deployment.cluster_id: v for v in view.deployments}
    found = []
    for wave in convert.workload(view).rollout_status.clusters:
        there = by_cluster.get(wave.cluster_id)
        if there is None or there.rollout is None:
            continue
        if wave.state == pb.ROLLOUT_STATE_CONVERGED and there.rollout.replicas_on_older:
            found.append(
                f"workload {view.workload.name}'s rollout reads cluster {wave.cluster_id}"
                f" converged while {there.rollout.replicas_on_older} replica(s) run another"
                " digest"
            )
    return found


def recovering_words(view: views.WorkloadView) -> list[str]:
    found = []
    by_cluster = {v.deployment.cluster_id: v for v in view.deployments}
    for record in view.failovers:
        if not record.active or record.state != "recovering":
            continue
        where = f"workload {view.workload.name}'s failback of cluster {record.cluster_id}"
        there = by_cluster.get(record.cluster_id)
        if there is None:
            found.append(f"{where} reads recovering with no deployment there")
            continue
        own = there.deployment.desired_replicas - there.failover_replicas
        if there.stale:
            found.append(f"{where} reads recovering while the cluster is stale")
        elif there.ready_replicas < own:
            found.append(
                f"{where} reads recovering with {there.ready_replicas} of {own} replicas ready"
            )
        report = there.status.report if there.status is not None else None
        if record.cause == "stale" and (
            report is None or report.observe_ns / 1e9 <= record.start_time
        ):
            found.append(f"{where} reads recovering on no report made since it was lost")
    return found


def check_views(
    cluster_views: Iterable[views.ClusterView], workload_views: Iterable[views.WorkloadView]
) -> list[str]:
    found: list[str] = []
    for cluster in cluster_views:
        found += draining_reads_cordoned(cluster)
    for workload in workload_views:
        found += failover_words(workload)
        found += recovering_words(workload)
        found += wave_words(workload)
        for deployment in workload.deployments:
            found += rollout_words(deployment)
    return found


def read(ctx: ServiceContext) -> tuple[list[views.ClusterView], list[views.WorkloadView]]:
    """Every cluster and workload as the API reads them (page by page)."""
    cluster_views: list[views.ClusterView] = []
    token = ""
    while True:
        page, token = clusters.list_page(ctx, page_size=100, page_token=token)
        cluster_views += page
        if not token:
            break
    workload_views: list[views.WorkloadView] = []
    token = ""
    while True:
        found, token = workloads.list_page(ctx, project="", page_size=100, page_token=token)
        workload_views += found
        if not token:
            break
    return cluster_views, workload_views


def check(ctx: ServiceContext) -> list[str]:
    """Every word of the hub that disagrees with its facts, now."""
    return check_views(*read(ctx))
