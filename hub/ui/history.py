"""The short history the dashboard's charts draw: GPU allocation over time.

Every `interval_s` the hub samples each cluster's devices per class (allocated, reserved,
free, unusable) and each project's use per class (used, reserved, quota): the `Keeper`
(hub/service/history.py `ChartHistory`) reads those figures from the store in a few aggregate
queries, the same figures ListClusters and ListProjects answer, and keeps them in the store
(table dashboard_history) by time bucket (the sample's time floored to the interval): a
restarted hub, or another hub of the same store, draws the points sampled before, and hubs
sampling the same bucket keep one point (the latest values), not one each. Bounded and
retained: each sample drops what is older than `retention_s`, and a chart reads only the
retention. A picture of the recent past, not a record (the audit log and the metrics are
those).

The event loop only schedules: a sample's read and write, and a chart's read, its columns
and their JSON, run in a worker thread (DESIGN.md "no writes on the loop"); nothing is listed
through the API or encoded for a sample. No sample is taken at start, while the fleet
reconnects: the first is one interval later, or when a chart is first read. Samples are taken
whether or not anyone has the dashboard open: a chart opened in the morning shows the night
(that is what a history is for), and one sample costs a few milliseconds off the loop.

A chart asking for a series whose newest sample is older than `FRESH_S` gets a new sample
first, at most one per `FRESH_S` (`NEW_S` for a cluster or project not sampled yet), so a page
opened just after a change shows it (it replaces the current bucket's values).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

SAMPLE_S = 15.0
RETENTION_S = 24 * 3600.0
FRESH_S = 2.0
NEW_S = 0.25

# (bucket, device class, field, value): one point of a series.
Point = tuple[int, str, str, int]


class Keeper(Protocol):
    """Where samples are read and kept (hub/service/history.py `ChartHistory`); called in a
    worker thread."""

    def sample(self, bucket: int, *, oldest: int) -> int:
        """Read the fleet's figures and keep them as this bucket's point, dropping the
        buckets before `oldest`."""
        ...

    def read(self, kind: str, name: str, *, since: int) -> list[Point]: ...


class History:
    def __init__(
        self,
        keeper: Keeper,
        *,
        interval_s: float = SAMPLE_S,
        retention_s: float = RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keeper = keeper
        self._interval = interval_s
        self._retention = retention_s
        self._clock = clock
        self._last = 0.0
        self._lock = asyncio.Lock()

    def _bucket(self, when: float) -> int:
        return int(when // self._interval * self._interval)

    async def sample(self) -> None:
        """One sample of every cluster and project, read and kept in a worker thread (what a
        failed read misses stays a gap)."""
        async with self._lock:
            now = self._clock()
            oldest = self._bucket(now - self._retention)
            await asyncio.to_thread(self._keeper.sample, self._bucket(now), oldest=oldest)
            self._last = now

    async def chart(self, kind: str, name: str) -> dict[str, Any] | None:
        """uPlot's data for one cluster or project: {"times": [...], "series": [{class, field,
        values}]}; None when it was never sampled (unknown). A class seen for the first time
        reads 0 in the samples before it (every series as long as the times)."""
        points = await self._points(kind, name)
        if not points:
            return None
        return await asyncio.to_thread(_columns, points)

    async def chart_json(self, kind: str, name: str) -> bytes | None:
        """`chart`'s answer as JSON, built and encoded in a worker thread (a day of a cluster's
        series is tens of thousands of numbers: not the event loop's work)."""
        points = await self._points(kind, name)
        if not points:
            return None
        return await asyncio.to_thread(lambda: json.dumps(_columns(points)).encode())

    async def _points(self, kind: str, name: str) -> list[Point]:
        age = self._clock() - self._last
        if age > FRESH_S:
            await self.sample()
        points = await self._read(kind, name)
        # A cluster or project not sampled yet (registered since) is read at once.
        if not points and self._clock() - self._last > NEW_S:
            await self.sample()
            points = await self._read(kind, name)
        return points

    async def _read(self, kind: str, name: str) -> list[Point]:
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
            # Not at start: a starting hub's fleet is reconnecting, and a chart read first
            # samples anyway when it needs one.
            await asyncio.sleep(self._interval)
            # A hub that cannot read its own store now samples at the next tick.
            with contextlib.suppress(Exception):
                await self.sample()


def _columns(points: list[Point]) -> dict[str, Any]:
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
