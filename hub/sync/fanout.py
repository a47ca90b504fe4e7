"""Which streams are open, and which clusters' desired state changed since they were told.

The service layer calls `desired_changed` after a commit (it is the service's Publisher): it
only marks the clusters dirty. The pump (hub/sync/pump.py) takes dirty clusters a few hundred
at a time, reads the deltas of all their streams together and hands each stream its message.
So a burst of changes coalesces into one delta per stream, and a change touching every
cluster is read in a few statements rather than one per stream.

A cluster may have several streams (a DaemonSet: one per node); each sits in a *slot*: a
pod's name, or one shared slot for the agent of a whole cluster. A newer stream in an occupied
slot supersedes the older one, which is told to close. With several hubs on one store, the
hub holding the older stream hears of the newer one through the store (`supersede_sessions`),
and of changes committed on other hubs (`desired_changed`, from the store's notifications).

Callable from any thread: the hub's loop owns the dirty set and its events, other threads
(control calls and ingest run in worker threads) hand over with call_soon_threadsafe.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from typing import Any, Protocol

from hub import tracing

WHOLE_CLUSTER = ""


class Listener(Protocol):
    """A stream, as the fanout and the pump see it."""

    cluster_id: str
    # The revision its agent will hold once everything handed to the stream is sent.
    sent_revision: int

    def accepts_desired(self) -> bool:
        """False while its first message is not out, it is closing, or a desired-state
        message handed to it is still unsent (it asks again once that one is sent)."""
        ...

    def deliver(self, message: Any, *, revision: int, changed_at: float) -> None:
        """Queue `message` (bringing the agent to `revision`); `changed_at`: when the oldest
        change it carries was published (time.monotonic), for the delivery-time metric."""
        ...

    def supersede(self) -> None: ...

    # The hash of the token the stream was opened with: its identity.
    token_hash: str

    def revoke(self, reason: str) -> None:
        """Close the stream (UNAUTHENTICATED): its token or cluster is gone."""
        ...


class Fanout:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._listeners: dict[str, dict[str, Listener]] = {}
        self._lock = threading.Lock()
        self._causes: dict[str, tracing.Carrier] = {}
        # Owned by the loop: clusters whose streams may be behind (-> when the oldest change
        # not yet handed out was published), and whether the pump has nothing left to do
        # (observation ingest waits for that: hub/sync/ingest.py).
        self._dirty: dict[str, float] = {}
        self._has_dirty = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

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

    def supersede_sessions(self, session_ids: Iterable[str]) -> None:
        """Close the streams with these session ids: newer ones took their slots on another
        hub. Unknown ids are ignored (that stream has closed already). Call on the loop."""
        wanted = set(session_ids)
        with self._lock:
            found = [
                listener
                for slots in self._listeners.values()
                for listener in slots.values()
                if getattr(listener, "session_id", None) in wanted
            ]
        for listener in found:
            listener.supersede()

    def cluster_ids(self) -> list[str]:
        """Clusters with a stream on this hub."""
        with self._lock:
            return list(self._listeners)

    def connected(self) -> int:
        with self._lock:
            return sum(len(slots) for slots in self._listeners.values())

    def is_connected(self, cluster_id: str) -> bool:
        with self._lock:
            return cluster_id in self._listeners

    def listeners(self, cluster_id: str) -> list[Listener]:
        with self._lock:
            return list(self._listeners.get(cluster_id, {}).values())

    def identity_changed(self, cluster_id: str, token_hash: str | None) -> None:
        """The cluster was re-keyed (`token_hash`: its only valid token now) or deleted (None):
        close its streams opened with any other token. From any thread."""
        if _on_loop(self._loop):
            self._revoke(cluster_id, token_hash)
        else:
            self._loop.call_soon_threadsafe(self._revoke, cluster_id, token_hash)

    def _revoke(self, cluster_id: str, token_hash: str | None) -> None:
        reason = (
            f"cluster {cluster_id} was deleted"
            if token_hash is None
            else f"the token of cluster {cluster_id} was rotated"
        )
        for listener in self.listeners(cluster_id):
            if listener.token_hash != token_hash:
                listener.revoke(reason)

    def desired_changed(self, cluster_ids: Iterable[str]) -> None:
        ids = list(cluster_ids)
        if not ids:
            return
        # The traced change that caused this (a control call), for the span sending the delta
        # (hub/tracing.py); in the caller's thread, where its span is current. The last cause
        # wins: deltas coalesce, and so do their traces.
        cause = tracing.current_carrier()
        if cause is not None:
            with self._lock:
                for cluster_id in ids:
                    self._causes[cluster_id] = cause
        if _on_loop(self._loop):
            self._mark(ids)
        else:
            self._loop.call_soon_threadsafe(self._mark, ids)

    def take_cause(self, cluster_id: str) -> tracing.Carrier | None:
        """The trace context of the last traced change published for the cluster since the
        last take (None: none), for the span that sends it its delta."""
        with self._lock:
            return self._causes.pop(cluster_id, None)

    def _mark(self, cluster_ids: list[str]) -> None:
        with self._lock:
            connected = [c for c in cluster_ids if c in self._listeners]
        if connected:
            now = time.monotonic()
            for cluster_id in connected:
                self._dirty.setdefault(cluster_id, now)
            self._idle.clear()
            self._has_dirty.set()

    async def take_dirty(self, limit: int) -> dict[str, float]:
        """The next dirty clusters, oldest first, at most `limit`, with when each was first
        marked; waits while there are none (and only then counts as idle)."""
        while not self._dirty:
            self._idle.set()
            self._has_dirty.clear()
            await self._has_dirty.wait()
        taken: dict[str, float] = {}
        for cluster_id, marked_at in self._dirty.items():
            taken[cluster_id] = marked_at
            if len(taken) == limit:
                break
        for cluster_id in taken:
            del self._dirty[cluster_id]
        return taken

    def settle(self, timeout_s: float) -> None:
        """From a worker thread: wait until the pump is idle, at most `timeout_s`. On the loop
        itself, or with the loop stopped, return at once (nothing could make progress)."""
        if _on_loop(self._loop) or not self._loop.is_running():
            return
        # Marks from this thread reach the loop by call_soon_threadsafe, in order: the wait
        # starts after them, so an idle pump then has seen them.
        future = asyncio.run_coroutine_threadsafe(self.idle(), self._loop)
        try:
            future.result(timeout_s)
        except TimeoutError:
            future.cancel()

    async def idle(self) -> None:
        """Until every stream was handed what changed (the pump waits for new changes)."""
        await self._idle.wait()


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
