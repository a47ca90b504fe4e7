"""The fleet's state as an operator alerts on it: per cluster and per project and class.

Read by hub/metrics/fleet.py for /metrics (at most every few seconds, off the event loop), from what
the store holds, so every hub sharing a store exports the same figures. A few aggregate
queries, whatever the fleet's size: one read of the clusters and their streams, the
accounting of docs/admission.md (hub/store/accounting.py), the quotas, the waiting demand.
Nothing here decides; it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hub.model import Capacity, QuotaUsage
from hub.service import credit, views
from hub.service.context import ServiceContext, snapshot
from hub.store import accounting, projects
from hub.store import clusters as cluster_store


@dataclass(frozen=True)
class ClusterState:
    cluster_id: str
    connected: bool
    # Unix time the hub last heard from any agent of it (None: never).
    last_seen: float | None
    stale: bool
    desired_revision: int
    applied_revision: int
    leader_term: int
    # device class -> its devices (docs/admission.md)
    capacity: Mapping[str, Capacity]


@dataclass(frozen=True)
class Waiting:
    """Enabled deployments of one project and class waiting for one reason."""

    deployments: int
    devices: int
    # Unix time the oldest of them started waiting.
    oldest_since: float


@dataclass(frozen=True)
class ProjectClassState:
    project: str
    device_class: str
    usage: QuotaUsage
    # reason -> what waits for it
    waiting: Mapping[str, Waiting]


@dataclass(frozen=True)
class FleetState:
    clusters: tuple[ClusterState, ...]
    projects: tuple[ProjectClassState, ...]
    # the service clock when read
    read_at: float


def read(ctx: ServiceContext) -> FleetState:
    with snapshot(ctx) as conn:
        found = cluster_store.get_many(conn, cluster_store.ids(conn))
        capacities = accounting.capacities(conn)
        limits = projects.quota_limits(conn)
        charges = accounting.quota_charges(conn)
        waiting = accounting.waiting_demand(conn)
        keys = set(limits) | set(charges) | {(p, c) for (p, c, _) in waiting}
        credits = credit.read(conn, sorted({project for project, _ in keys}))
    now = ctx.clock()
    by_cluster: dict[str, dict[str, Capacity]] = {}
    for (cluster_id, device_class), cap in capacities.items():
        by_cluster.setdefault(cluster_id, {})[device_class] = cap
    clusters = tuple(
        ClusterState(
            cluster_id=c.cluster_id,
            connected=c.connected,
            last_seen=c.last_seen,
            stale=views.is_stale(ctx, c, now),
            desired_revision=c.desired_revision,
            applied_revision=c.applied_revision,
            leader_term=c.leader_term,
            capacity=by_cluster.get(c.cluster_id, {}),
        )
        for c in sorted(found.values(), key=lambda c: c.cluster_id)
    )
    waits: dict[tuple[str, str], dict[str, Waiting]] = {}
    for (project, device_class, reason), (count, devices, oldest) in waiting.items():
        waits.setdefault((project, device_class), {})[reason] = Waiting(count, devices, oldest)
    states = tuple(
        ProjectClassState(
            project=project,
            device_class=device_class,
            usage=views.quota_usage(
                charges.get((project, device_class), (0, 0)),
                covered=credits.credit.get((project, device_class), 0),
                limit=limits.get((project, device_class), 0),
            ),
            waiting=waits.get((project, device_class), {}),
        )
        for project, device_class in sorted(keys)
    )
    return FleetState(clusters=clusters, projects=states, read_at=now)
