"""The short history the dashboard's charts draw: GPU allocation over time.

Every `interval_s` the hub's dashboard samples, through the API's own dispatch as the admin,
each cluster's devices per class (allocated, reserved, free, unusable) and each project's
use per class (used, reserved, quota). Samples are kept in the store (`Keeper`:
hub/service/history.py, table dashboard_history), by time bucket (the sample's time floored to
the interval): a restarted hub, or another hub of the same store, draws the points sampled
before, and hubs sampling the same bucket keep one point (the latest values), not one each.
Bounded and retained: each sample drops what is older than `retention_s`, and a chart reads
only the retention. A picture of the recent past, not a record (the audit log and the metrics
are those).

A chart asking for a series whose newest sample is older than `FRESH_S` gets a new sample
first, at most one per `FRESH_S` (`NEW_S` for a cluster or project not sampled yet), so a page
opened just after a change shows it (it replaces the current bucket's values).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

SAMPLE_S = 15.0
RETENTION_S = 24 * 3600.0
FRESH_S = 2.0
NEW_S = 0.25
CLUSTER_FIELDS = ("allocated", "reserved", "free", "unusable")
PROJECT_FIELDS = ("used", "reserved", "quota")

# (kind, name) -> ListX answer's items: "clusters" or "projects".
Lister = Callable[[str], Awaitable[list[dict[str, Any]]]]


class Keeper(Protocol):
    """Where samples are kept (hub/service/history.py `ChartHistory`); called in a worker
    thread. A value: (kind, name, device class, field, value); a point: (bucket, device
    class, field, value)."""

    def put(
        self, bucket: int, values: Sequence[tuple[str, str, str, str, int]], *, oldest: int
    ) -> None: ...

    def read(self, kind: str, name: str, *, since: int) -> list[tuple[int, str, str, int]]: ...


class History:
    def __init__(
        self,
        lister: Lister,
        keeper: Keeper,
        *,
        interval_s: float = SAMPLE_S,
        retention_s: float = RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._list = lister
        self._keeper = keeper
        self._interval = interval_s
        self._retention = retention_s
        self._clock = clock
        self._last = 0.0
        self._lock = asyncio.Lock()

    def _bucket(self, when: float) -> int:
        return int(when // self._interval * self._interval)

    async def sample(self) -> None:
        """One sample of every cluster and project (what a failed read misses stays a gap)."""
        async with self._lock:
            now = self._clock()
            clusters = await self._list("clusters")
            projects = await self._list("projects")
            values: list[tuple[str, str, str, str, int]] = []
            for c in clusters:
                for name, d in (c.get("devices") or {}).items():
                    values += [
                        ("cluster", c["cluster_id"], name, f, int(d.get(f) or 0))
                        for f in CLUSTER_FIELDS
                    ]
            for p in projects:
                quotas, usage = p.get("quotas") or {}, p.get("usage") or {}
                for name in set(quotas) | set(usage):
                    used = usage.get(name) or {}
                    values += [
                        ("project", p["name"], name, "used", int(used.get("used") or 0)),
                        ("project", p["name"], name, "reserved", int(used.get("reserved") or 0)),
                        ("project", p["name"], name, "quota", int(quotas.get(name) or 0)),
                    ]
            oldest = self._bucket(now - self._retention)
            await asyncio.to_thread(self._keeper.put, self._bucket(now), values, oldest=oldest)
            self._last = now

    async def chart(self, kind: str, name: str) -> dict[str, Any] | None:
        """uPlot's data for one cluster or project: {"times": [...], "series": [{class, field,
        values}]}; None when it was never sampled (unknown). A class seen for the first time
        reads 0 in the samples before it (every series as long as the times)."""
        age = self._clock() - self._last
        if age > FRESH_S:
            await self.sample()
        points = await self._read(kind, name)
        # A cluster or project not sampled yet (registered since) is read at once.
        if not points and self._clock() - self._last > NEW_S:
            await self.sample()
            points = await self._read(kind, name)
        if not points:
            return None
        times = sorted({bucket for bucket, _, _, _ in points})
        at = {bucket: i for i, bucket in enumerate(times)}
        columns: dict[tuple[str, str], list[int]] = {}
        for bucket, cls, field, value in points:
            columns.setdefault((cls, field), [0] * len(times))[at[bucket]] = value
        return {
            "times": [float(t) for t in times],
            "series": [
                {"class": cls, "field": f, "values": column}
                for (cls, f), column in sorted(columns.items())
            ],
        }

    async def _read(self, kind: str, name: str) -> list[tuple[int, str, str, int]]:
        since = self._bucket(self._clock() - self._retention)
        return await asyncio.to_thread(self._keeper.read, kind, name, since=since)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Sample every interval while the app runs (an aiohttp cleanup context)."""
        task = asyncio.create_task(self._loop())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            # A hub that cannot read its own store now samples at the next tick.
            with contextlib.suppress(Exception):
                await self.sample()
            await asyncio.sleep(self._interval)
