"""The dashboard's chart history kept in the store (hub/store/history.py), so a restarted hub,
or another hub, draws the points sampled before (hub/ui/history.py decides when; this reads
the figures and keeps them).

A sample reads only what the charts draw, in a few aggregate queries whatever the fleet's
size: each cluster's devices per class (allocated, reserved, free, unusable) and each
project's use per class (used, reserved, quota): the same figures as ListClusters and
ListProjects answer (hub/service/views.py), without a view per cluster, its nodes and devices,
or any encoding. It runs in a worker thread (called by hub/ui/history.py through
`asyncio.to_thread`): no read or write of it is on the event loop.

Sampling is idempotent per time bucket: each hub samples on its own, and a bucket written
twice keeps one point, the latest values. Each write also drops what is older than the
retention, in the same transaction: the table holds at most retention / interval buckets.
"""

from __future__ import annotations

from collections.abc import Sequence

from hub.service import credit, views
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import accounting, history, projects
from hub.store.history import Point, Value

__all__ = ["CLUSTER_FIELDS", "PROJECT_FIELDS", "ChartHistory", "Point", "Value", "figures"]

CLUSTER_FIELDS = ("allocated", "reserved", "free", "unusable")
PROJECT_FIELDS = ("used", "reserved", "quota")


def figures(ctx: ServiceContext) -> list[Value]:
    """One sample's values, (kind, name, device class, field, value), read in one snapshot."""
    with snapshot(ctx) as conn:
        heard = history.heard_from(conn)
        capacities = accounting.capacities(conn)
        names = history.project_names(conn)
        limits = projects.quota_limits(conn)
        charges = accounting.quota_charges(conn)
        credits = credit.read(conn, names)
    values: list[Value] = []
    for (cluster_id, cls), cap in sorted(capacities.items()):
        # A cluster never heard from shows no device count (views.cluster_view), nor one
        # deleted since its devices were counted.
        if heard.get(cluster_id):
            counts = (cap.allocated, cap.reserved, cap.free, cap.unusable)
            values += [
                ("cluster", cluster_id, cls, f, n)
                for f, n in zip(CLUSTER_FIELDS, counts, strict=True)
            ]
    known = set(names)
    for project, cls in sorted(set(limits) | set(charges)):
        if project in known:
            usage = views.quota_usage(
                charges.get((project, cls), (0, 0)),
                covered=credits.credit.get((project, cls), 0),
                limit=limits.get((project, cls), 0),
            )
            used = (usage.used, usage.reserved, usage.limit)
            values += [
                ("project", project, cls, f, n) for f, n in zip(PROJECT_FIELDS, used, strict=True)
            ]
    return values


class ChartHistory:
    """The store behind hub/ui/history.py's `Keeper` (called in a worker thread)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx

    def figures(self) -> list[Value]:
        return figures(self._ctx)

    def sample(self, bucket: int, *, oldest: int) -> int:
        """Read the figures and keep them as this bucket's point, dropping the buckets before
        `oldest`; the count of values kept."""
        values = self.figures()
        self.put(bucket, values, oldest=oldest)
        return len(values)

    def put(self, bucket: int, values: Sequence[Value], *, oldest: int) -> None:
        # Only the fleet lock (shared): the history table decides no other write, and the
        # covering lock would hold up every writer of the fleet once a sample interval.
        with transaction(self._ctx, ()) as tx:
            history.put(tx.conn, bucket, values)
            history.prune(tx.conn, before=oldest)

    def read(self, kind: str, name: str, *, since: int) -> list[Point]:
        with snapshot(self._ctx) as conn:
            return history.read(conn, kind, name, since=since)
