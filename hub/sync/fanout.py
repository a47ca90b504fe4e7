"""Wakes the stream sessions of clusters whose desired state changed.

The service layer calls `desired_changed` after a commit (it is the service's Publisher). A
session holds one `Wakeup` per stream; waking only sets a flag and an event, so a burst of
changes coalesces into one delta read per session. Sessions register per cluster; a newer
session of the same cluster supersedes the older one, which is told to close.

Callable from any thread: the hub's loop owns the events, other threads hand over with
call_soon_threadsafe (tests and tools may drive the service from outside the loop).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Protocol


class Listener(Protocol):
    def wake(self) -> None: ...

    def supersede(self) -> None: ...


class Fanout:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._listeners: dict[str, Listener] = {}
        self._lock = threading.Lock()

    def register(self, cluster_id: str, listener: Listener) -> None:
        with self._lock:
            previous = self._listeners.get(cluster_id)
            self._listeners[cluster_id] = listener
        if previous is not None and previous is not listener:
            previous.supersede()

    def unregister(self, cluster_id: str, listener: Listener) -> None:
        with self._lock:
            if self._listeners.get(cluster_id) is listener:
                del self._listeners[cluster_id]

    def connected(self) -> int:
        with self._lock:
            return len(self._listeners)

    def is_connected(self, cluster_id: str) -> bool:
        with self._lock:
            return cluster_id in self._listeners

    def desired_changed(self, cluster_ids: Iterable[str]) -> None:
        with self._lock:
            targets = [self._listeners[c] for c in cluster_ids if c in self._listeners]
        if not targets:
            return
        if _on_loop(self._loop):
            for listener in targets:
                listener.wake()
        else:
            self._loop.call_soon_threadsafe(_wake_all, targets)


def _wake_all(listeners: list[Listener]) -> None:
    for listener in listeners:
        listener.wake()


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
