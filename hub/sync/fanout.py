"""Wakes the stream sessions of clusters whose desired state changed.

The service layer calls `desired_changed` after a commit (it is the service's Publisher). A
session holds one `Listener` per stream; waking only sets a flag and an event, so a burst of
changes coalesces into one delta read per session. A cluster may have several sessions (a
DaemonSet: one per node); each sits in a *slot*: a pod's name, or one shared slot for the
agent of a whole cluster. A newer session in an occupied slot supersedes the older one, which
is told to close.

Callable from any thread: the hub's loop owns the events, other threads hand over with
call_soon_threadsafe (tests and tools may drive the service from outside the loop).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Protocol

WHOLE_CLUSTER = ""


class Listener(Protocol):
    def wake(self) -> None: ...

    def supersede(self) -> None: ...


class Fanout:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._listeners: dict[str, dict[str, Listener]] = {}
        self._lock = threading.Lock()

    def register(self, cluster_id: str, slot: str, listener: Listener) -> None:
        with self._lock:
            slots = self._listeners.setdefault(cluster_id, {})
            previous = slots.get(slot)
            slots[slot] = listener
        if previous is not None and previous is not listener:
            previous.supersede()

    def unregister(self, cluster_id: str, slot: str, listener: Listener) -> None:
        with self._lock:
            slots = self._listeners.get(cluster_id, {})
            if slots.get(slot) is listener:
                del slots[slot]
                if not slots:
                    self._listeners.pop(cluster_id, None)

    def connected(self) -> int:
        with self._lock:
            return sum(len(slots) for slots in self._listeners.values())

    def is_connected(self, cluster_id: str) -> bool:
        with self._lock:
            return cluster_id in self._listeners

    def desired_changed(self, cluster_ids: Iterable[str]) -> None:
        with self._lock:
            targets = [
                listener for c in cluster_ids for listener in self._listeners.get(c, {}).values()
            ]
        if not targets:
            return
        if _on_loop(self._loop):
            _wake_all(targets)
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
