"""What placing replicas needs, shared by the use cases that place them (workloads, failover):
the rooms of the eligible clusters and a new deployment."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from hub import placement, serving
from hub.model import Deployment, Workload
from hub.service import admit
from hub.store import accounting, clusters
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
