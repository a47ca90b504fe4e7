"""Observation ingest: sessions queue validated batches; one writer drains them together.

gRPC costs far more per message than SQLite per row, and SQLite far more per transaction than
per row, so every batch queued while the previous write ran goes into the next transaction.
Observations are state, not commands: the agent needs no per-batch acknowledgement, and a batch
lost in a crash is replaced by the agent's next report (it resends its full state on reconnect).

A failed group is written again batch by batch, and a failed batch record by record
(hub/service/ingest.py `ingest_reports`): one cluster's poisoned record costs no other cluster
anything. What could not be written is told to its stream: a Problem for records the store
refuses, a ResyncRequest when the fault is the hub's own (the agent resends its full state),
so no observation is silently dropped.

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
from typing import Protocol

from hub.service.ingest import IngestOutcome, Report

log = logging.getLogger(__name__)

Writer = Callable[[Sequence[Report]], IngestOutcome]


class Sender(Protocol):
    """The stream a report came from, told what became of it when it was not written."""

    def refused(self, seq: int, message: str) -> None:
        """Records of the batch held values the store refuses (a Problem)."""
        ...

    def resync(self, seq: int, reason: str) -> None:
        """The hub could not store the batch: the agent must resend its full state."""
        ...


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
        self._queue: asyncio.Queue[tuple[Report, Sender]] = asyncio.Queue()
        self._idle = asyncio.Event()
        self._idle.set()

    def put(self, report: Report, sender: Sender) -> None:
        self._idle.clear()
        self._queue.put_nowait((report, sender))

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    async def drained(self) -> None:
        """Wait until everything queued so far is written (tests, shutdown)."""
        await self._idle.wait()

    def flush_now(self) -> None:
        """Write whatever is queued, synchronously (shutdown: no stream is left to tell)."""
        group = []
        while not self._queue.empty():
            group.append(self._queue.get_nowait()[0])
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
            reports = [report for report, _ in group]
            try:
                if self._executor is None:
                    outcome = self._write(reports)
                else:
                    outcome = await loop.run_in_executor(self._executor, self._write, reports)
            except Exception as e:
                # The writer answers per report; this is a failure of its own: ask every
                # stream of the group for its state again rather than lose it silently.
                log.exception("writing %d observation batches failed", len(group))
                outcome = IngestOutcome(
                    unwritten={
                        i: f"the hub could not store this batch: {e}" for i in range(len(group))
                    }
                )
            self._tell(group, outcome)
            if self._queue.empty():
                self._idle.set()
            # Let sessions run between groups so the loop never starves while busy.
            await asyncio.sleep(0)

    @staticmethod
    def _tell(group: Sequence[tuple[Report, Sender]], outcome: IngestOutcome) -> None:
        for index, message in outcome.refused.items():
            report, sender = group[index]
            log.info(
                "cluster %s: batch %d refused: %s", report.cluster_id, report.batch.seq, message
            )
            sender.refused(report.batch.seq, message)
        for index, reason in outcome.unwritten.items():
            report, sender = group[index]
            log.warning(
                "cluster %s: batch %d not stored, asking for a resync: %s",
                report.cluster_id,
                report.batch.seq,
                reason,
            )
            sender.resync(report.batch.seq, reason)
