"""Incoming observation batches validated off the event loop (docs/stream.md "Validation").

`convert.observations` checks every field of a batch and builds its domain records: pure
Python, a few microseconds a record. After a fleet-wide change every agent reports its rollout
at once, and on the loop that work was a quarter of the loop's time in the 2,000-agent fan-out
(docs/benchmark.md), where every stream's sends wait behind it. Here one thread of its own does
it (not the store-writer thread: the writes must not wait behind validation either).

What stays as it was:
- order: a stream's reader hands its batch over and awaits the result before it reads the next
  message, so a stream has at most one batch here and its batches keep their order;
- back-pressure: for the same reason what waits here is bounded by the number of streams, and
  an agent that sends faster than the hub validates waits on gRPC's flow control, as before;
- the answer: the batch, or the very exception `convert.observations` raised (an
  InvalidArgument naming the field), raised where the reader awaited it, so the stream's
  Problem, its seq checks and everything after them are the reader's, on the loop, unchanged.

The thread takes every batch queued meanwhile (up to `max_group`) and hands all of their
results back in one wakeup of the loop: a handoff costs the loop one future and one callback a
batch, not a wakeup each.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from dataclasses import dataclass

from hub.model import ObservationBatch
from hub.sync import convert
from wingsmith.v1 import sync_pb2

THREAD_NAME = "hub-validate"
# The longest the thread validates before it offers the loop the GIL. Each offer costs both
# threads a context switch: every 0.5 ms, a burst's timer lag p99 was 2.2 ms but the fleet's
# ingest cost 12.2 us of hub CPU a record at 200 agents (8.9 with validation on the loop);
# never (the interpreter's 5 ms switch interval alone), 10.0-10.7 us and a lag p99 of 98 ms;
# every 2 ms, 10.3-11.0 us and 5.7-7.6 ms (docs/benchmark.md "Observations validated off
# the loop").
YIELD_S = 0.002


@dataclass(frozen=True, slots=True)
class _Job:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[ObservationBatch]
    message: sync_pb2.ObservationBatch
    check: convert.Checker


# (future, batch, error): exactly one of batch and error is set.
_Result = tuple["asyncio.Future[ObservationBatch]", ObservationBatch | None, Exception | None]


class Validator:
    """One thread validating the hub's incoming observation batches, started at first use."""

    def __init__(self, *, max_group: int = 64) -> None:
        self._max_group = max_group
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    async def observations(
        self, message: sync_pb2.ObservationBatch, check: convert.Checker
    ) -> ObservationBatch:
        """The batch validated and converted in the validation thread (raises what
        `convert.observations` raises)."""
        if not self._started():
            # Closed (the hub is stopping): the few last batches are validated here.
            return convert.observations(message, check)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ObservationBatch] = loop.create_future()
        self._jobs.put(_Job(loop, future, message, check))
        return await future

    def close(self) -> None:
        """Let the thread end once it has answered what is queued (hub stop)."""
        with self._lock:
            self._closed = True
            if self._thread is not None:
                self._jobs.put(None)

    def _started(self) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            return True

    def _run(self) -> None:
        done = False
        while not done:
            job = self._jobs.get()
            if job is None:
                return
            jobs = [job]
            while len(jobs) < self._max_group:
                try:
                    queued = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if queued is None:
                    done = True
                    break
                jobs.append(queued)
            results: dict[asyncio.AbstractEventLoop, list[_Result]] = {}
            held = time.perf_counter()
            for job in jobs:
                results.setdefault(job.loop, []).append(self._validate(job))
                if time.perf_counter() - held >= YIELD_S:
                    # The GIL to the loop, should it wait for it (a stream has a message to
                    # send): else it would wait up to the switch interval (5 ms) at each of
                    # its wakeups while this thread has work. Not after every batch: each
                    # handover costs both threads a context switch.
                    time.sleep(0)
                    held = time.perf_counter()
            for loop, answered in results.items():
                # The loop is gone when its hub stopped with a batch still here: no one waits.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_resolve, answered)

    @staticmethod
    def _validate(job: _Job) -> _Result:
        try:
            return job.future, convert.observations(job.message, job.check), None
        except Exception as e:  # the reader raises it, as if it had validated the batch itself
            return job.future, None, e


def _resolve(answered: list[_Result]) -> None:
    """On the loop: each waiting reader gets its batch or its exception."""
    for future, batch, error in answered:
        if future.done():  # the stream was cancelled meanwhile
            continue
        if error is not None:
            future.set_exception(error)
        else:
            assert batch is not None
            future.set_result(batch)
