"""A bounded memo of values already checked, for ingest's hot path (hub/sync/observed.py).

Agents report state, not changes: a node's report repeats its devices, a deployment's report
repeats the object its agent applied, byte for byte, report after report. Checking such a value
is a pure function of its bytes, so what passed once need not be checked again: `Memo` keeps
values by key up to a total weight (a count, or bytes), shared by the validation thread and a
stream's reader validating on the loop (the hub stopping). A lookup is one dict read; a change
takes the lock.

Once full, a new value takes the places of values drawn at random, not the oldest's: agents
report in turn, and with more values than places oldest-first would miss every time (the
oldest is the next one reported), where random places keep most of them.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    """Values by key, at most `limit` in total weight (each value's weight is 1 unless `put`
    says otherwise). `draw(n)` picks the place to free among n (tests fix it)."""

    def __init__(self, limit: int, *, draw: Callable[[int], int] | None = None) -> None:
        if limit < 1:
            raise ValueError(f"a memo holds at least one value, not {limit}")
        self.limit = limit
        self._entries: dict[K, V] = {}
        self._keys: list[K] = []  # the same keys, for a random place
        self._weights: dict[K, int] = {}  # only those whose weight is not 1
        self._total = 0
        self._draw = draw or random.Random().randrange
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Keep `value` under `key`, freeing random places until it fits; a value heavier
        than the whole limit is not kept."""
        if weight > self.limit:
            return
        with self._lock:
            if key in self._entries:
                return
            while self._total + weight > self.limit:
                place = self._draw(len(self._keys))
                dropped = self._keys[place]
                self._keys[place] = self._keys[-1]
                self._keys.pop()
                del self._entries[dropped]
                self._total -= self._weights.pop(dropped, 1)
            self._keys.append(key)
            self._entries[key] = value
            if weight != 1:
                self._weights[key] = weight
            self._total += weight

    @property
    def weight(self) -> int:
        """The total weight held."""
        return self._total

    def __len__(self) -> int:
        return len(self._entries)
