"""What placing replicas needs, shared by the use cases that place them (workloads, failover):
the rooms of the eligible clusters, a new deployment, and the clusters a change of a workload
reads (the scope of its write locks: docs/architecture.md "Write locks")."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable, Sequence

from hub import errors, placement, serving
from hub.model import Deployment, Placement, Workload
from hub.service import admit
from hub.store import accounting, clusters, deployments, workloads
from hub.store.port import Transaction


def new_deployment(workload: Workload, *, cluster_id: str, replicas: int, now: float) -> Deployment:
    return Deployment(
        deployment_id="dep_" + secrets.token_hex(8),
        workload_id=workload.workload_id,
        workload_name=workload.name,
        project=workload.project,
        cluster_id=cluster_id,
        desired_replicas=replicas,
        admitted_replicas=0,
        admission_reason="",
        admission_message="",
        generation=1,
        authority="managed",
        enabled=True,
        engine_args=workload.serving.engine_args,
        imported_args=(),
        serving=workload.serving,
        serving_digest=serving.digest(workload.serving),
        device_class=workload.device_class,
        devices_per_replica=workload.serving.devices_per_replica,
        revision=0,
        create_time=now,
        update_time=now,
        pending_since=now,
    )


def rooms(
    conn: Transaction, eligible: Sequence[str], device_class: str
) -> list[placement.ClusterRoom]:
    """Each eligible cluster's free and total devices of the class, as placement reads them:
    free as new demand may take it (a cordoned node's idle devices left out), and whether it
    is cordoned for the class."""
    capacity = accounting.capacities(conn, eligible)
    marks = clusters.maintenance_of(conn, eligible)
    free = admit.open_free(conn, capacity, marks)
    result = []
    for cluster_id in eligible:
        cap = capacity.get((cluster_id, device_class))
        result.append(
            placement.ClusterRoom(
                cluster_id=cluster_id,
                free_devices=free.get((cluster_id, device_class), 0),
                total_devices=cap.total if cap else 0,
                closed=cluster_id in marks and marks[cluster_id].closed_to(device_class),
            )
        )
    return result


def reads(
    conn: Transaction,
    workload: Workload,
    current: Sequence[Deployment],
    new_placement: Placement | None,
) -> set[str]:
    """The clusters a change of the workload reads and may write: those of its deployments
    (shares, rollouts, failovers, admission there), and every cluster its placement, old or
    new, may choose (placement reads their rooms; failover places stand-ins there)."""
    found = {d.cluster_id for d in current}
    for wanted in (workload.placement, new_placement):
        if wanted is None:
            continue
        labels = clusters.labels_by_cluster(conn, wanted.clusters or None)
        with contextlib.suppress(errors.InvalidArgument):
            # None eligible: the change itself says so, before anything is written.
            found |= set(placement.eligible_clusters(wanted, labels))
    return found


def clusters_read_by(conn: Transaction, workload_ids: Iterable[str]) -> set[str]:
    """The clusters a change of these workloads reads and may write (each workload's
    deployments and every cluster its placement may choose: `reads`), for a call that
    reconciles them (cordon, drain, uncordon of a cluster they run on: hub/service/clusters.py).
    """
    found: set[str] = set()
    wanted = sorted(set(workload_ids))
    by_workload: dict[str, list[Deployment]] = {}
    for d in deployments.of_workloads(conn, wanted):
        by_workload.setdefault(d.workload_id, []).append(d)
    for workload_id in wanted:
        workload = workloads.get(conn, workload_id)
        if workload is not None:
            found |= reads(conn, workload, by_workload.get(workload_id, []), None)
    return found
