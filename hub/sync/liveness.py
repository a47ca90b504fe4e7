"""Batches liveness (last message time) and acknowledged revisions into one write per second.

A heartbeat per agent every few seconds would otherwise be a transaction each; with thousands
of agents that is the hub's whole write budget. Values only move forward (the store takes the
maximum), so a lost flush on a crash costs at most a second of last_seen, never correctness.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

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

    def seen(self, cluster_id: str) -> None:
        self._seen[cluster_id] = self._clock()

    def applied(self, cluster_id: str, revision: int) -> None:
        if revision > self._applied.get(cluster_id, 0):
            self._applied[cluster_id] = revision

    def flush(self) -> None:
        seen, applied = self._seen, self._applied
        self._seen, self._applied = {}, {}
        if seen or applied:
            self._flush(seen, applied)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                self.flush()
            except Exception:
                log.exception("liveness flush failed; will retry")
