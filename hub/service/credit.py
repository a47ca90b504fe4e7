"""Failover's quota credit, read for admission and for the projects' usage.

A replica and its stand-in are charged to the project once (docs/admission.md "Failover"):
per workload with a failover in progress, the project is charged max(lost, stand_in) rather
than lost + stand_in, where `lost` is the charge of its lost deployments and `stand_in` the
part of the hosts' charges beyond their own replicas, up to their stand-in replicas. The
difference, min(lost, stand_in), is the credit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hub.admission import Cover, QuotaKey
from hub.model import Deployment
from hub.store import accounting, deployments, failovers
from hub.store.port import Transaction


@dataclass(frozen=True)
class Role:
    """A deployment's part in its workload's failovers (hub.admission.Demand's cover fields)."""

    cover: str
    role: str
    base_replicas: int = 0
    stand_in_replicas: int = 0


@dataclass
class Credits:
    covers: dict[str, Cover] = field(default_factory=dict)
    # Credit per (project, class): what quota_charges counts twice.
    credit: dict[QuotaKey, int] = field(default_factory=dict)
    roles: dict[str, Role] = field(default_factory=dict)


def read(conn: Transaction, projects: Iterable[str]) -> Credits:
    """The covers of the workloads of these projects with a failover in progress."""
    result = Credits()
    workload_ids = failovers.active_workloads(conn, projects)
    if not workload_ids:
        return result
    records = failovers.of_workloads(conn, workload_ids)
    found = deployments.of_workloads(conn, workload_ids)
    charges = accounting.charges_by_deployment(conn, [d.deployment_id for d in found])
    by_workload: dict[str, list[Deployment]] = {}
    for d in found:
        by_workload.setdefault(d.workload_id, []).append(d)
    for workload_id, present in by_workload.items():
        active = [r for r in records.get(workload_id, []) if r.active]
        lost_ids = {r.deployment_id for r in active}
        standing: dict[str, int] = {}
        for r in active:
            for cluster_id, count in r.stand_ins.items():
                standing[cluster_id] = standing.get(cluster_id, 0) + count
        lost = stand_in = 0
        for d in present:
            charge = charges.get(d.deployment_id, 0)
            # The part of a host's charge beyond its own replicas, up to its stand-ins.
            portion = 0
            if standing.get(d.cluster_id):
                base = max(0, d.desired_replicas - standing[d.cluster_id])
                own = base * d.devices_per_replica
                portion = max(0, min(charge - own, standing[d.cluster_id] * d.devices_per_replica))
            if d.deployment_id in lost_ids:
                # A host lost in turn: its own replicas are lost, its stand-ins still stand
                # in for the cluster lost first (they run on where they are, as it does), so
                # that pair stays charged once.
                lost += charge - portion
                stand_in += portion
                result.roles[d.deployment_id] = Role(workload_id, "lost")
            elif standing.get(d.cluster_id):
                stand_in += portion
                result.roles[d.deployment_id] = Role(
                    workload_id, "stand_in", base, standing[d.cluster_id]
                )
        if not present:
            continue
        key = (present[0].project, present[0].device_class)
        result.covers[workload_id] = Cover(lost=lost, stand_in=stand_in)
        result.credit[key] = result.credit.get(key, 0) + min(lost, stand_in)
    return result
