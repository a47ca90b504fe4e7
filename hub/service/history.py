"""The dashboard's chart history kept in the store (hub/store/history.py), so a restarted hub,
or another hub, draws the points sampled before (hub/ui/history.py samples; this keeps).

Sampling is idempotent per time bucket: each hub samples on its own, and a bucket written
twice keeps one point, the latest values. Each write also drops what is older than the
retention, in the same transaction: the table holds at most retention / interval buckets.
"""

from __future__ import annotations

from collections.abc import Sequence

from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import history
from hub.store.history import Point, Value

__all__ = ["ChartHistory", "Point", "Value"]


class ChartHistory:
    """The store behind hub/ui/history.py's `Keeper` (called in a worker thread)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx

    def put(self, bucket: int, values: Sequence[Value], *, oldest: int) -> None:
        with transaction(self._ctx) as tx:
            history.put(tx.conn, bucket, values)
            history.prune(tx.conn, before=oldest)

    def read(self, kind: str, name: str, *, since: int) -> list[Point]:
        with snapshot(self._ctx) as conn:
            return history.read(conn, kind, name, since=since)
