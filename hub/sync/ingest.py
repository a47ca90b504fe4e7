"""Observation ingest: sessions queue validated batches; one writer drains them together.

gRPC costs far more per message than SQLite per row, and SQLite far more per transaction than
per row, so every batch queued while the previous write ran goes into the next transaction.
Observations are state, not commands: the agent needs no per-batch acknowledgement, and a batch
lost in a crash is replaced by the agent's next report (it resends its full state on reconnect).

Where the writes run: in the hub's store-writer thread (`executor`), so the event loop keeps
serving streams while SQLite works (the sqlite3 module lets go of the GIL while a statement
runs). Before each write the queue waits, up to `yield_for_s`, until the desired-state pump is
idle (`before_write`): a change an operator made reaches the agents before the hub writes their
reports of the previous one, and a flood of reports (a fleet-wide rollout) cannot delay it.
Observations are level-triggered, so a report written a moment later loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from hub.model import ObservationBatch

log = logging.getLogger(__name__)

Writer = Callable[[Sequence[tuple[str, ObservationBatch]]], Any]


class IngestQueue:
    def __init__(
        self,
        *,
        write: Writer,
        max_group: int = 512,
        executor: Executor | None = None,
        before_write: Callable[[], Awaitable[None]] | None = None,
        yield_for_s: float = 2.0,
    ) -> None:
        self._write = write
        self._max_group = max_group
        self._executor = executor
        self._before_write = before_write
        self._yield_for_s = yield_for_s
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
        loop = asyncio.get_running_loop()
        while True:
            group = [await self._queue.get()]
            if self._before_write is not None:
                # Desired state first; never so long that reports pile up without bound.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._before_write(), self._yield_for_s)
            while not self._queue.empty() and len(group) < self._max_group:
                group.append(self._queue.get_nowait())
            try:
                if self._executor is None:
                    self._write(group)
                else:
                    await loop.run_in_executor(self._executor, self._write, group)
            except Exception:
                log.exception("writing %d observation batches failed; they are dropped", len(group))
            if self._queue.empty():
                self._idle.set()
            # Let sessions run between groups so the loop never starves while busy.
            await asyncio.sleep(0)
