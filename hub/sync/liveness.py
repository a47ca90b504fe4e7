"""Liveness: batched last-seen writes, and noticing when clusters go stale or come back.

`LivenessRecorder` batches liveness (last message time) and acknowledged revisions into one
write per second. A heartbeat per agent every few seconds would otherwise be a transaction
each; with thousands of agents that is the hub's whole write budget. Values only move forward
(the store takes the maximum), so a lost flush on a crash costs at most a second of last_seen,
never correctness.

`StalenessWatch` polls which clusters are stale (one cheap query) and reports the ones that
changed either way, so admission is re-run for them: staleness is derived from last_seen and
the clock, and no write marks the moment a cluster crosses the grace period.

`ReporterWatch` notices nodes whose reporter is gone while their cluster lives on: in a
DaemonSet every agent reports its own node, so a node whose agent went for good (the node
died with it, or its pod can no longer run there) would otherwise keep its devices as free
capacity, and its allocations and replicas, forever. A node that no open stream has reported
for the grace period is dropped (hub/service/sync.py `drop_nodes`). Only in clusters that
still report: a cluster gone quiet is stale, keeps its data, and loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor

from hub.sync.episodes import FaultEpisode

log = logging.getLogger(__name__)

Flush = Callable[[Mapping[str, float], Mapping[str, int]], None]


class LivenessRecorder:
    def __init__(
        self, *, flush: Flush, clock: Callable[[], float], interval_s: float = 1.0
    ) -> None:
        self._flush = flush
        self._clock = clock
        self._interval_s = interval_s
        self._seen: dict[str, float] = {}
        self._applied: dict[str, int] = {}
        self.fault = FaultEpisode(log, "liveness flush")

    def seen(self, cluster_id: str) -> None:
        self._seen[cluster_id] = self._clock()

    def applied(self, cluster_id: str, revision: int) -> None:
        if revision > self._applied.get(cluster_id, 0):
            self._applied[cluster_id] = revision

    def flush(self) -> None:
        seen, applied = self._take()
        if seen or applied:
            self._flush(seen, applied)

    def _take(self) -> tuple[dict[str, float], dict[str, int]]:
        seen, applied = self._seen, self._applied
        self._seen, self._applied = {}, {}
        return seen, applied

    async def run(self, executor: Executor | None = None) -> None:
        """Flush every interval; the write runs in `executor` (the store's writer thread)
        when given, the maps are swapped on the loop that fills them."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._interval_s)
            seen, applied = self._take()
            if not seen and not applied:
                continue
            try:
                await loop.run_in_executor(executor, self._flush, seen, applied)
            except Exception as e:
                self.fault.failed(e)
                # Values only move forward: put them back under anything newer.
                for cluster_id, at in seen.items():
                    self._seen.setdefault(cluster_id, at)
                for cluster_id, revision in applied.items():
                    self.applied(cluster_id, revision)
            else:
                self.fault.succeeded()


class StalenessWatch:
    def __init__(
        self,
        *,
        stale_now: Callable[[], set[str]],
        changed: Callable[[Sequence[str]], None],
        interval_s: float = 1.0,
    ) -> None:
        self._stale_now = stale_now
        self._changed = changed
        self._interval_s = interval_s
        # None until the first tick: then every stale cluster counts as changed, so waiting
        # deployments of a cluster stale since before a hub restart learn why at once.
        self._stale: set[str] | None = None
        self._fault = FaultEpisode(log, "staleness check")

    def tick(self) -> list[str]:
        """Report the clusters whose staleness changed since the last tick; returns them."""
        now = self._stale_now()
        changed = sorted(now if self._stale is None else now ^ self._stale)
        if changed:
            log.info(
                "liveness changed: stale %s, fresh again %s",
                sorted(set(changed) & now) or "-",
                sorted(set(changed) - now) or "-",
            )
            self._changed(changed)
        self._stale = now  # only once reported: a failed report is retried on the next tick
        return changed

    async def run(self, executor: Executor | None = None) -> None:
        """Tick every interval, in `executor` (the store's writer thread): a change re-runs
        admission, a write, which never runs on the loop."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await loop.run_in_executor(executor, self.tick)
            except Exception as e:
                self._fault.failed(e)
            else:
                self._fault.succeeded()


Node = tuple[str, str]


class ReporterWatch:
    """Drops the nodes nobody has reported for `grace_s` (see the module's docstring).

    The grace period is counted here, from the first tick a node is seen without a reporter,
    not from any stored time: a restarted hub gives every agent the whole grace period to
    reconnect before it drops anything, and nothing is written while agents come and go.
    """

    def __init__(
        self,
        *,
        unreported: Callable[[], set[Node]],
        drop: Callable[[Sequence[Node]], object],
        clock: Callable[[], float],
        grace_s: float,
        interval_s: float = 1.0,
    ) -> None:
        self._unreported = unreported
        self._drop = drop
        self._clock = clock
        self._grace_s = grace_s
        self._interval_s = interval_s
        self._missing_since: dict[Node, float] = {}
        self._fault = FaultEpisode(log, "dropping unreported nodes")

    def tick(self) -> list[Node]:
        """Drop the nodes unreported for the grace period; returns them."""
        now = self._clock()
        current = self._unreported()
        # A node reported again (or gone already) starts afresh next time.
        self._missing_since = {n: self._missing_since.get(n, now) for n in current}
        due = sorted(n for n, since in self._missing_since.items() if now - since >= self._grace_s)
        if not due:
            return []
        log.info(
            "nodes no agent has reported for %gs, dropped: %s",
            self._grace_s,
            ", ".join(f"{cluster_id}/{node_id}" for cluster_id, node_id in due[:20]),
        )
        self._drop(due)
        for node in due:
            self._missing_since.pop(node, None)
        return due

    async def run(self, executor: Executor | None = None) -> None:
        """Tick every interval; in `executor` (the store's writer thread) when given."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await loop.run_in_executor(executor, self.tick)
            except Exception as e:
                self._fault.failed(e)
            else:
                self._fault.succeeded()
