"""List-then-watch loops that keep the adapter's caches current (a small client-go reflector).

One `Reflector` per (kind, namespace scope) runs in a daemon thread:

    1. list (paged) -> replace the cache's scope, remember the list's resourceVersion;
    2. watch from that version (allowWatchBookmarks, a server-side timeoutSeconds) and apply
       every ADDED / MODIFIED / DELETED event, moving the version on with each event and
       BOOKMARK;
    3. when the server ends the watch (its timeout), watch again from the last version, with
       no re-list; when the version is too old (HTTP 410, or an ERROR event with code 410),
       go back to 1;
    4. on any failure wait a jittered, exponentially growing delay, then go on (the cache
       keeps its last contents meanwhile).

No busy loops, ever: a cycle that fails, or that ends sooner than `min_cycle_s` even without
an error (a server that closes every watch at once, or answers 410 to each), waits a backoff
delay first; only a cycle that lasted resets the backoff. So a server that fails instantly
sees at most one request per backoff delay, never a spinning core.

`stop` is prompt: the stop event ends every backoff wait at once, and `interrupt()` shuts the
socket of the watch in flight; the watch's client read timeout (server timeout + grace)
bounds what is left. Called by kube/cluster.py; the list functions it is handed are the
kubernetes client's, but this module imports nothing from the client.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agent.backoff import Backoff
from agent.cluster.kube import errors
from agent.cluster.kube.cache import KindCache
from agent.cluster.kube.mapping import Key
from agent.cluster.port import ClusterError

log = logging.getLogger(__name__)

T = TypeVar("T")

# A list function of the client, its path arguments bound: called with query keywords.
ListCall = Callable[..., Any]


@dataclass(frozen=True)
class WatchTuning:
    # The server ends each watch after this long; we re-watch from the last version.
    watch_timeout_s: int = 300
    # Client read timeout beyond the server's: a silently stalled connection ends too.
    read_grace_s: float = 15.0
    connect_timeout_s: float = 10.0
    list_timeout_s: float = 60.0
    page_size: int = 500
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    # A list+watch cycle shorter than this waits a backoff delay even if nothing failed.
    min_cycle_s: float = 1.0


class Gone(Exception):
    """The resourceVersion we asked for is compacted away: re-list."""


# The watch event types counted by name; anything else counts as "other".
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")


@dataclass
class WatchStats:
    """What one watcher did, counted since it started (read by agent/metrics.py). Written by
    its own thread only; readers see whole ints."""

    lists: int = 0
    # Lists again because the version it watched from was compacted away (HTTP 410).
    relists: int = 0
    watches: int = 0
    failures: int = 0
    events: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENT_TYPES, 0))


class Reflector(Generic[T]):
    """Keeps `cache` equal to what `list_call` lists, within `namespace` (None: everything)."""

    def __init__(
        self,
        *,
        name: str,
        list_call: ListCall,
        map_item: Callable[[Mapping[str, Any]], tuple[Key, T]],
        cache: KindCache[T],
        namespace: str | None,
        tuning: WatchTuning,
        stopping: threading.Event,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.synced = threading.Event()
        self.stats = WatchStats()
        self._list_call, self._map_item, self._cache = list_call, map_item, cache
        self._namespace, self._tuning, self._stopping = namespace, tuning, stopping
        self._clock = clock
        self._backoff = Backoff(
            base_s=tuning.backoff_initial_s, cap_s=tuning.backoff_max_s, rng=rng
        )
        self._response_lock = threading.Lock()
        self._response: Any = None
        # Where the next watch starts; None: (re)list first. Only the loop's thread uses it.
        self._version: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"kube-watch-{name}", daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def interrupt(self) -> None:
        """Unblock a watch read in flight (after `stopping` is set)."""
        with self._response_lock:
            response = self._response
        if response is not None:
            # Shutting the socket ends the blocked read; the response may already be gone.
            with contextlib.suppress(Exception):
                response.shutdown()

    def join(self, timeout: float) -> bool:
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            started = self._clock()
            failed = False
            try:
                if self._version is None:
                    self._list()
                self._watch()
            except Gone:
                log.info("%s: resource version expired, re-listing", self.name)
                self._version = None
                self.stats.relists += 1
            except ClusterError as e:
                if self._stopping.is_set():
                    break  # interrupt() broke the stream: not a failure
                failed = True
                self.stats.failures += 1
                log.warning("%s: %s", self.name, e)
            except Exception:  # a bug must not kill the thread and freeze the cache silently
                failed = True
                self.stats.failures += 1
                self._version = None
                log.exception("%s: unexpected error; re-listing after a backoff", self.name)
            if self._stopping.is_set():
                break
            if not failed and self._clock() - started >= self._tuning.min_cycle_s:
                self._backoff.reset()
                continue
            self._stopping.wait(self._backoff.next_delay())

    def _list(self) -> None:
        """List every page into the cache; resume from the list's resourceVersion."""
        items: dict[Key, T] = {}
        token: str | None = None
        while True:
            page = self._call(
                "list",
                limit=self._tuning.page_size,
                _continue=token,
                _request_timeout=(self._tuning.connect_timeout_s, self._tuning.list_timeout_s),
            )
            body = self._read_json(page)
            for obj in body.get("items") or []:
                self._map_into(items, obj)
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                break
        self._cache.replace(items, namespace=self._namespace)
        self.stats.lists += 1
        if not self.synced.is_set():
            self.synced.set()
            # Not yet listed and listed-but-empty read the same: tell observers it moved.
            self._cache.touch()
        self._version = str(meta.get("resourceVersion") or "")

    def _watch(self) -> None:
        """Apply the events of one watch, moving `_version` on with each."""
        tuning = self._tuning
        response = self._call(
            "watch",
            watch=True,
            resource_version=self._version or None,
            allow_watch_bookmarks=True,
            timeout_seconds=tuning.watch_timeout_s,
            _request_timeout=(
                tuning.connect_timeout_s,
                tuning.watch_timeout_s + tuning.read_grace_s,
            ),
        )
        self.stats.watches += 1
        try:
            for line in _lines(response, operation=f"watch {self.name}"):
                self._apply_event(line)
                if self._stopping.is_set():
                    break
        finally:
            # An unfinished stream cannot go back to the pool: close, then release the slot.
            self._release(response, close=True)

    def _apply_event(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError as e:
            raise ClusterError(f"watch {self.name}: not a JSON event: {line[:200]!r}") from e
        kind, obj = event.get("type"), event.get("object") or {}
        counted = kind if kind in EVENT_TYPES else "other"
        self.stats.events[counted] = self.stats.events.get(counted, 0) + 1
        if kind == "ERROR":
            raise self._watch_error(obj)
        # Each event (BOOKMARK too) moves the version a broken watch resumes from.
        self._version = str((obj.get("metadata") or {}).get("resourceVersion") or self._version)
        if kind in ("ADDED", "MODIFIED"):
            mapped = self._mapped(obj)
            if mapped is not None:
                self._cache.put(*mapped)
        elif kind == "DELETED":
            mapped = self._mapped(obj)
            if mapped is not None:
                self._cache.remove(mapped[0])

    def _watch_error(self, status: Mapping[str, Any]) -> Exception:
        code = int(status.get("code") or 0)
        if code == 410:
            return Gone()
        return ClusterError(
            f"watch {self.name}: ERROR event {code}: {status.get('message', '')}",
            retryable=True,
        )

    def _call(self, what: str, **query: Any) -> Any:
        """The raw response (headers read, body not), registered for `interrupt()`."""
        try:
            response = self._list_call(_preload_content=False, **query)
        except errors.CLIENT_ERRORS as e:
            if getattr(e, "status", None) == 410:
                raise Gone() from e
            raise errors.wrap(e, operation=f"{what} {self.name}") from e
        with self._response_lock:
            self._response = response
        # stop() sets `stopping` before interrupt() looks for a response: if it looked before
        # we registered this one, we see the flag here, so no stream outlives a stop.
        if self._stopping.is_set():
            self._release(response, close=True)
            raise ClusterError(f"{what} {self.name}: stopping")
        return response

    def _release(self, response: Any, *, close: bool) -> None:
        with self._response_lock:
            self._response = None
        if close:
            response.close()
        response.release_conn()

    def _read_json(self, response: Any) -> dict[str, Any]:
        operation = f"list {self.name}"
        try:
            data = response.data
        except errors.CLIENT_ERRORS as e:
            raise errors.wrap(e, operation=operation) from e
        finally:
            self._release(response, close=False)
        try:
            body = json.loads(data)
        except ValueError as e:
            raise ClusterError(f"{operation}: the server sent no JSON") from e
        if not isinstance(body, dict):
            raise ClusterError(f"{operation}: the server sent no JSON object")
        return body

    def _map_into(self, items: dict[Key, T], obj: Any) -> None:
        mapped = self._mapped(obj)
        if mapped is not None:
            items[mapped[0]] = mapped[1]

    def _mapped(self, obj: Any) -> tuple[Key, T] | None:
        try:
            return self._map_item(obj)
        except Exception:  # one malformed object is skipped, not a broken watch
            log.exception("%s: cannot read object %r", self.name, str(obj)[:200])
            return None


def _lines(response: Any, *, operation: str) -> Iterator[str]:
    """The non-empty lines of a watch stream, as they arrive."""
    buffer = b""
    try:
        for chunk in response.stream(amt=None, decode_content=True):
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                if line.strip():
                    yield line.decode("utf-8", errors="replace")
    except errors.CLIENT_ERRORS as e:
        raise errors.wrap(e, operation=operation) from e
    if buffer.strip():
        yield buffer.decode("utf-8", errors="replace")
