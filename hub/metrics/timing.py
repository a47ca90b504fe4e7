"""The store wrapper that times every transaction (wingsmith_store_transaction_seconds,
wingsmith_store_lock_wait_seconds): the service layer opens all of them through it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from hub.store.port import Dialect, Listening, OnNotify, Store, Transaction

if TYPE_CHECKING:
    from hub.metrics.instruments import HubMetrics


class TimedStore:
    """A store whose transactions are timed (wingsmith_store_*): the service layer opens every
    transaction through `write` and `read`, so one place sees them all, on either store."""

    def __init__(self, store: Store, metrics: HubMetrics) -> None:
        self._store = store
        self._metrics = metrics
        self.url = store.url
        self.epoch = store.epoch
        self.schema_version = store.schema_version
        self.shared = store.shared

    @property
    def dialect(self) -> Dialect:
        return self._store.dialect

    @contextlib.contextmanager
    def write(self, clusters: Iterable[str] | None = None) -> Iterator[Transaction]:
        start = time.perf_counter()
        with self._timed("write", start), self._store.write(clusters) as conn:
            # Entered: SQLite's BEGIN IMMEDIATE (PostgreSQL's write locks) is held.
            self._metrics.lock_wait.observe(time.perf_counter() - start)
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Transaction]:
        with self._timed("read", time.perf_counter()), self._store.read() as conn:
            yield conn

    def listen(
        self, channels: Sequence[str], on_notify: OnNotify, on_reconnect: Callable[[], None]
    ) -> Listening:
        return self._store.listen(channels, on_notify, on_reconnect)

    def close(self) -> None:
        self._store.close()

    @contextlib.contextmanager
    def _timed(self, kind: str, start: float) -> Iterator[None]:
        try:
            yield
        finally:
            self._metrics.transaction_seconds.labels(kind=kind).observe(time.perf_counter() - start)
