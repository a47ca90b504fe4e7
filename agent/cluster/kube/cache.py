"""The in-memory caches the watchers fill and `KubernetesCluster.list_*` read.

One `KindCache` per kind (DGDs, pods, nodes), holding the port's values (already mapped, so
a read costs a list copy), all sharing one `Revision`: it moves only when a cached value
really changes. Watch events that touch nothing we map (a pod's resourceVersion, a node's
heartbeat, managedFields beyond who else owns a DGD's spec) leave it still, and the observer
skips its work.

Thread-safe: watcher threads write, the agent's worker threads read. Listeners run after
each change on the writing thread, outside every lock; they must be quick and thread-safe
(the agent's is `loop.call_soon_threadsafe(event.set)`). Pure Python: must not import the
kubernetes client.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from agent.cluster.kube.mapping import Key

log = logging.getLogger(__name__)

T = TypeVar("T")


class Revision:
    """A counter that increases on every change of any cache, with change listeners."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0
        self._listeners: list[Callable[[], None]] = []

    @property
    def value(self) -> int:
        with self._lock:
            return self._value

    def add_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def bump(self) -> None:
        with self._lock:
            self._value += 1
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:  # a listener's bug must not stop the watch that called it
                log.exception("cluster change listener failed")


class KindCache(Generic[T]):
    """Values of one kind by (namespace, name)."""

    def __init__(self, revision: Revision) -> None:
        self._revision = revision
        self._lock = threading.Lock()
        self._items: dict[Key, T] = {}
        self._listing: list[T] | None = None

    def values(self) -> list[T]:
        """Every value, sorted by (namespace, name); a fresh list the caller may keep."""
        with self._lock:
            if self._listing is None:
                self._listing = [self._items[k] for k in sorted(self._items)]
            return list(self._listing)

    def put(self, key: Key, value: T) -> bool:
        with self._lock:
            if self._items.get(key) == value:
                return False
            self._items[key] = value
            self._listing = None
        self._revision.bump()
        return True

    def remove(self, key: Key) -> bool:
        with self._lock:
            if self._items.pop(key, None) is None:
                return False
            self._listing = None
        self._revision.bump()
        return True

    def touch(self) -> None:
        """Move the revision without a change of values (the first list of an empty scope)."""
        self._revision.bump()

    def replace(self, items: Mapping[Key, T], *, namespace: str | None) -> bool:
        """Make the cache hold exactly `items` within `namespace` (None: everything), as after
        a (re)list; entries of other namespaces, filled by other watchers, are kept."""
        with self._lock:
            kept = {
                k: v for k, v in self._items.items() if namespace is not None and k[0] != namespace
            }
            fresh = {**kept, **items}
            if fresh == self._items:
                return False
            self._items = fresh
            self._listing = None
        self._revision.bump()
        return True
