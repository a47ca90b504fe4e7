"""Admission's ledger: the quota charged and the capacity free as one pass admits, and what
moving a demand's charge costs the quota (a failover's pair is charged once)."""

from __future__ import annotations

from collections.abc import Sequence

from hub.admission.records import AdmissionView, CapacityKey, Demand
from hub.model import REASON_PREEMPTED


class Ledger:
    """Quota charged and capacity free, spent as the pass admits."""

    def __init__(self, view: AdmissionView, demands: Sequence[Demand]) -> None:
        self.limits = view.quota_limits
        self.charged = dict(view.quota_charged)
        self.free = dict(view.cluster_free)
        self.stale = view.stale_clusters
        self.unheard = view.unheard_clusters
        self.cordoned = view.cordoned_clusters
        self.cordoned_classes = view.cordoned_classes
        self.covers = {key: [c.lost, c.stand_in] for key, c in view.covers.items()}
        # An overcommitted cluster starts below zero: shedding its reservations brings it back.
        for key, over in view.overcommitted.items():
            self.free[key] = -over
        # Devices that preempted deployments' pods still hold, per cluster and class: they
        # come free as the pods go, and a preemptor waits for them rather than preempting more.
        self.releasing: dict[CapacityKey, int] = {}
        for d in demands:
            if d.reason == REASON_PREEMPTED and d.releasing():
                key = (d.cluster_id, d.device_class)
                self.releasing[key] = self.releasing.get(key, 0) + d.releasing()

    def closed(self, demand: Demand) -> bool:
        """Cordoned for this demand: it takes nothing new, whatever it has free."""
        return (
            demand.cluster_id in self.cordoned
            or (demand.cluster_id, demand.device_class) in self.cordoned_classes
        )

    def claim(self, demand: Demand, *, free: int, releasing: int) -> None:
        """Hold room for a preemptor for the rest of this pass: capacity only, no quota."""
        key = (demand.cluster_id, demand.device_class)
        self.free[key] = self.free.get(key, 0) - free
        self.releasing[key] = self.releasing.get(key, 0) - releasing

    def headroom(self, demand: Demand) -> tuple[int | None, int]:
        """(quota left or None when the class has no quota, free devices: none on a stale
        cluster, even what a scale-down in this pass gave back)."""
        key = (demand.project, demand.device_class)
        limit = self.limits.get(key)
        quota_left = None if limit is None else limit - self.charged.get(key, 0)
        if demand.cluster_id in self.stale or self.closed(demand):
            return quota_left, 0
        return quota_left, self.free.get((demand.cluster_id, demand.device_class), 0)

    def quota_cost(self, demand: Demand, before: int, after: int) -> int:
        """What moving the demand's charge from `before` to `after` devices costs the
        project's quota: the difference, except that a failover's pair (a lost replica and its
        stand-in) is charged once, the larger of the two (Cover)."""
        cover = self.covers.get(demand.cover) if demand.cover else None
        if cover is None:
            return after - before
        lost, stand_in = cover
        if demand.cover_role == "lost":
            return max(lost + after - before, stand_in) - max(lost, stand_in)
        moved = _portion(demand, after) - _portion(demand, before)
        return (after - before - moved) + max(lost, stand_in + moved) - max(lost, stand_in)

    def spend(self, demand: Demand, before: int, after: int) -> None:
        """Move the demand's charge from `before` to `after` devices (after < before: give
        back what a scale-down or release frees)."""
        if before == after:
            return
        quota_key = (demand.project, demand.device_class)
        capacity_key = (demand.cluster_id, demand.device_class)
        self.charged[quota_key] = self.charged.get(quota_key, 0) + self.quota_cost(
            demand, before, after
        )
        self.free[capacity_key] = self.free.get(capacity_key, 0) - (after - before)
        cover = self.covers.get(demand.cover) if demand.cover else None
        if cover is not None:
            if demand.cover_role == "lost":
                cover[0] += after - before
            else:
                cover[1] += _portion(demand, after) - _portion(demand, before)


def _portion(demand: Demand, charge: int) -> int:
    """The part of a stand-in host's charge that stands in for a lost cluster's replicas."""
    own = demand.base_replicas * demand.devices_per_replica
    return max(0, min(charge - own, demand.stand_in_replicas * demand.devices_per_replica))
