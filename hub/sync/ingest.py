"""Observation ingest: sessions queue validated batches; one writer drains them together.

gRPC costs far more per message than SQLite per row, and SQLite far more per transaction than
per row, so every batch queued while the previous write ran goes into the next transaction.
Observations are state, not commands: the agent needs no per-batch acknowledgement, and a batch
lost in a crash is replaced by the agent's next report (it resends its full state on reconnect).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from hub.model import ObservationBatch

log = logging.getLogger(__name__)

Writer = Callable[[Sequence[tuple[str, ObservationBatch]]], Any]


class IngestQueue:
    def __init__(self, *, write: Writer, max_group: int = 512) -> None:
        self._write = write
        self._max_group = max_group
        self._queue: asyncio.Queue[tuple[str, ObservationBatch]] = asyncio.Queue()
        self._idle = asyncio.Event()
        self._idle.set()

    def put(self, cluster_id: str, batch: ObservationBatch) -> None:
        self._idle.clear()
        self._queue.put_nowait((cluster_id, batch))

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    async def drained(self) -> None:
        """Wait until everything queued so far is written (tests, shutdown)."""
        await self._idle.wait()

    def flush_now(self) -> None:
        """Write whatever is queued, synchronously (shutdown)."""
        group = []
        while not self._queue.empty():
            group.append(self._queue.get_nowait())
        if group:
            self._write(group)
        self._idle.set()

    async def run(self) -> None:
        while True:
            group = [await self._queue.get()]
            while not self._queue.empty() and len(group) < self._max_group:
                group.append(self._queue.get_nowait())
            try:
                self._write(group)
            except Exception:
                log.exception("writing %d observation batches failed; they are dropped", len(group))
            if self._queue.empty():
                self._idle.set()
            # Let sessions run between groups so the loop never starves while busy.
            await asyncio.sleep(0)
