"""The short history the dashboard's charts draw: GPU allocation over time.

Every `interval_s` the hub's dashboard samples, through the API's own dispatch as the admin,
each cluster's devices per class (allocated, reserved, free, unusable) and each project's
use per class (used, reserved, quota). Samples are kept in memory, per series, in a ring of
`retention_s / interval_s` entries: bounded, the oldest dropped first, and anything older than
the retention dropped on read. Each hub process keeps its own (lost on restart): a picture of
the recent past, not a record (the audit log and the metrics are those).

A chart asking for a series whose newest sample is older than `FRESH_S` gets a new sample
first, at most one per `FRESH_S` (`NEW_S` for a cluster or project not sampled yet), so a page
opened just after a change shows it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

SAMPLE_S = 15.0
RETENTION_S = 24 * 3600.0
FRESH_S = 2.0
NEW_S = 0.25
CLUSTER_FIELDS = ("allocated", "reserved", "free", "unusable")
PROJECT_FIELDS = ("used", "reserved", "quota")

# (kind, name) -> ListX answer's items: "clusters" or "projects".
Lister = Callable[[str], Awaitable[list[dict[str, Any]]]]


@dataclass
class Series:
    """One cluster's or project's samples: times and, per (device class, field), values."""

    times: collections.deque[float]
    values: dict[tuple[str, str], collections.deque[int]] = field(default_factory=dict)


class History:
    def __init__(
        self,
        lister: Lister,
        *,
        interval_s: float = SAMPLE_S,
        retention_s: float = RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._list = lister
        self._interval = interval_s
        self._retention = retention_s
        self._size = max(2, int(retention_s / interval_s) + 1)
        self._clock = clock
        self._series: dict[tuple[str, str], Series] = {}
        self._last = 0.0
        self._lock = asyncio.Lock()

    async def sample(self) -> None:
        """One sample of every cluster and project (what a failed read misses stays a gap)."""
        async with self._lock:
            now = self._clock()
            clusters = await self._list("clusters")
            projects = await self._list("projects")
            for c in clusters:
                per_class = {
                    (name, f): int(d.get(f) or 0)
                    for name, d in (c.get("devices") or {}).items()
                    for f in CLUSTER_FIELDS
                }
                self._add(("cluster", c["cluster_id"]), now, per_class)
            for p in projects:
                classes = set(p.get("quotas") or {}) | set(p.get("usage") or {})
                per_class = {}
                for name in classes:
                    usage = (p.get("usage") or {}).get(name) or {}
                    per_class[(name, "used")] = int(usage.get("used") or 0)
                    per_class[(name, "reserved")] = int(usage.get("reserved") or 0)
                    per_class[(name, "quota")] = int((p.get("quotas") or {}).get(name) or 0)
                self._add(("project", p["name"]), now, per_class)
            self._last = now

    def _add(self, key: tuple[str, str], now: float, values: dict[tuple[str, str], int]) -> None:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = Series(collections.deque(maxlen=self._size))
        # A class seen for the first time reads 0 in the samples before it (same lengths).
        for name in values.keys() - series.values.keys():
            series.values[name] = collections.deque([0] * len(series.times), maxlen=self._size)
        series.times.append(now)
        for name, column in series.values.items():
            column.append(values.get(name, 0))

    async def chart(self, kind: str, name: str) -> dict[str, Any] | None:
        """uPlot's data for one cluster or project: {"times": [...], "series": [{class, field,
        values}]}; None when it was never sampled (unknown)."""
        age = self._clock() - self._last
        # A cluster or project not sampled yet (registered since) is read at once.
        if age > FRESH_S or ((kind, name) not in self._series and age > NEW_S):
            await self.sample()
        series = self._series.get((kind, name))
        if series is None:
            return None
        oldest = self._clock() - self._retention
        keep = [i for i, t in enumerate(series.times) if t >= oldest]
        return {
            "times": [round(series.times[i], 3) for i in keep],
            "series": [
                {"class": cls, "field": f, "values": [column[i] for i in keep]}
                for (cls, f), column in sorted(series.values.items())
            ],
        }

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
