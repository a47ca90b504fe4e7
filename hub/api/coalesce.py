"""Concurrent identical reads share one read, without ever answering older than the request:
the REST list calls' coalescing (docs/rest.md "Identical list reads share one read").

Per key (the method, the request's bytes, the caller's credentials) at most one read is in
flight. A request whose key has none begins one. A request arriving while one is in flight
does not join it (it began before the request arrived, so it might miss a write acknowledged
just before): it waits for the *next* read of that key, which begins when the one in flight
ends, and which every request arriving meanwhile shares. So every answer comes from a read
that began after its request arrived: a write acknowledged before a list request is in that
list's answer (read-your-writes), as without coalescing. Nothing is kept once a read has
answered its requests: no answer is cached across time.

Why: clients polling the same list (a dashboard, 64 clients on one page in `python -m
bench.readload`) each cost the hub a full read and encoding on one interpreter; sharing them
costs one read per in-flight read's time, and the p99 of such a poll no longer grows with the
number of pollers.

Runs on the event loop (no lock): the reads themselves run wherever `read` sends them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Key(Generic[T]):
    # The read that begins when the one in flight ends, shared by every request arriving
    # before then; None while none waits.
    next: asyncio.Future[T] | None = None
    next_read: Callable[[], Awaitable[T]] | None = None


class Coalescer(Generic[T]):
    """`await coalescer.read(key, read)`: `read()`'s answer, from a read that began after
    this call, shared with the identical calls that arrived before it began."""

    def __init__(self) -> None:
        self._keys: dict[Hashable, _Key[T]] = {}
        # The next reads' tasks (the loop keeps only weak references to tasks).
        self._tasks: set[asyncio.Task[Any]] = set()
        # Requests answered by a read another request began (since this coalescer was made).
        self.joined = 0

    async def read(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        state = self._keys.get(key)
        if state is None:
            # Nothing in flight: begin now.
            self._keys[key] = _Key()
            return await self._lead(key, read)
        if state.next is None:
            state.next = asyncio.get_running_loop().create_future()
            state.next_read = read
        else:
            self.joined += 1
        # Shielded: one waiter going away (its client closed) does not end the others' read.
        return await asyncio.shield(state.next)

    async def _lead(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        try:
            return await read()
        finally:
            self._begin_next(key)

    def _begin_next(self, key: Hashable) -> None:
        state = self._keys[key]
        waiting, read = state.next, state.next_read
        if waiting is None or read is None:
            del self._keys[key]
            return
        # From here on a new arrival waits for the read after this one: this one begins now.
        state.next, state.next_read = None, None
        task = asyncio.get_running_loop().create_task(self._lead(key, read))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda done: _settle(waiting, done))


def _settle(waiting: asyncio.Future[T], done: asyncio.Task[T]) -> None:
    if waiting.done():
        return
    if done.cancelled():
        waiting.cancel()
        return
    error = done.exception()
    if error is not None:
        waiting.set_exception(error)
    else:
        waiting.set_result(done.result())
    # Retrieved here: a waiter that went away must not leave "exception never retrieved".
    with contextlib.suppress(BaseException):
        waiting.exception()
