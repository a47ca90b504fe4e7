"""Admission: which deployments' demand fits quota and capacity. Pure.

hub/service/admission.py reads an `AdmissionView` and the waiting `Demand`s inside one write
transaction, calls `decide`, and commits the decisions in that same transaction, so two
admissions can never both spend the same quota or the same free device (docs/admission.md).

Accounting, per device class:
- A deployment *charges* max(admitted_replicas x devices_per_replica, devices it holds in live
  allocations). The charge is `used` (allocated) plus `reserved` (admitted, not yet allocated).
- A project's quota is spent by the charges of its deployments: admit only if
  charged + delta <= limit.
- A cluster's free devices = verified healthy devices - allocated devices (anyone's pods) -
  reservations of admitted deployments. Admit only if delta <= free.
- Demand is all or nothing per deployment: the delta (desired - admitted replicas) is admitted
  whole or waits whole. Already admitted replicas keep running while a scale-up waits.
- Scale-downs and disabled deployments release at once (they need no check).

Order: best-effort FIFO. Demands are considered oldest first (pending_since); one that does not
fit does not block a later, smaller one that does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub.model import (
    REASON_DISABLED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
)

QuotaKey = tuple[str, str]  # (project, device class)
CapacityKey = tuple[str, str]  # (cluster id, device class)


@dataclass(frozen=True)
class Demand:
    deployment_id: str
    project: str
    cluster_id: str
    device_class: str
    devices_per_replica: int
    desired_replicas: int
    admitted_replicas: int
    enabled: bool
    pending_since: float


@dataclass(frozen=True)
class AdmissionView:
    """Quota and capacity as they stand, read in the deciding transaction."""

    quota_limits: Mapping[QuotaKey, int]
    quota_charged: Mapping[QuotaKey, int]
    cluster_free: Mapping[CapacityKey, int]


@dataclass(frozen=True)
class Decision:
    deployment_id: str
    admitted_replicas: int
    reason: str
    message: str

    @property
    def waiting(self) -> bool:
        return self.reason not in (REASON_NONE, REASON_DISABLED)


def decide(demands: Sequence[Demand], view: AdmissionView) -> list[Decision]:
    """One decision per demand, oldest first, spending quota and capacity as it goes."""
    charged = dict(view.quota_charged)
    free = dict(view.cluster_free)
    decisions = []
    for demand in sorted(demands, key=lambda d: (d.pending_since, d.deployment_id)):
        decision = _decide_one(demand, view.quota_limits, charged, free)
        grown = decision.admitted_replicas - demand.admitted_replicas
        if grown > 0:
            delta = grown * demand.devices_per_replica
            quota_key = (demand.project, demand.device_class)
            capacity_key = (demand.cluster_id, demand.device_class)
            charged[quota_key] = charged.get(quota_key, 0) + delta
            free[capacity_key] = free.get(capacity_key, 0) - delta
        decisions.append(decision)
    return decisions


def _decide_one(
    demand: Demand,
    limits: Mapping[QuotaKey, int],
    charged: Mapping[QuotaKey, int],
    free: Mapping[CapacityKey, int],
) -> Decision:
    if not demand.enabled:
        return Decision(demand.deployment_id, 0, REASON_DISABLED, "deployment is disabled")
    if demand.desired_replicas <= demand.admitted_replicas:
        return Decision(demand.deployment_id, demand.desired_replicas, REASON_NONE, "")
    delta = (demand.desired_replicas - demand.admitted_replicas) * demand.devices_per_replica
    quota_key = (demand.project, demand.device_class)
    limit = limits.get(quota_key)
    if limit is None:
        return Decision(
            demand.deployment_id,
            demand.admitted_replicas,
            REASON_INSUFFICIENT_QUOTA,
            f"project {demand.project} has no quota for {demand.device_class}",
        )
    spent = charged.get(quota_key, 0)
    if spent + delta > limit:
        return Decision(
            demand.deployment_id,
            demand.admitted_replicas,
            REASON_INSUFFICIENT_QUOTA,
            f"needs {delta} {demand.device_class}; project {demand.project} has "
            f"{max(0, limit - spent)} of {limit} left",
        )
    room = free.get((demand.cluster_id, demand.device_class), 0)
    if delta > room:
        return Decision(
            demand.deployment_id,
            demand.admitted_replicas,
            REASON_INSUFFICIENT_CAPACITY,
            f"needs {delta} {demand.device_class}; cluster {demand.cluster_id} has "
            f"{max(0, room)} free",
        )
    return Decision(demand.deployment_id, demand.desired_replicas, REASON_NONE, "")
