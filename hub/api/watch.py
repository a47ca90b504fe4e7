"""The Watch RPC's machinery (docs/rest.md "Watch"): one feed per hub, one bounded queue per
client.

`WatchFeed` runs while this hub has watchers: every `watch_interval_s` it records what changed
(hub/service/watch.py, in a worker thread), reads the new events once and offers each to every
watcher. A watcher's queue holds at most `watch_buffer` events: a client that leaves more
unread is cut off (RESOURCE_EXHAUSTED, naming the revision to resume from) rather than let the
hub's memory grow. A new watcher's first events (the current state, or what it missed since
its revision) are read for it alone and sent before its queue; the feed skips what it already
has. Both edges (gRPC here, SSE in hub/api/rest.py) call `WatchFeed.stream`.

Authorization is the List calls': a project-scoped token gets only its projects' workloads
and deployments (clusters are fleet-wide reads); a project filter it may not read is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hub import access, errors
from hub.api import convert, jsonmap, jsonread
from hub.service import projects, watch
from hub.service.context import ServiceContext
from hub.service.watch import Event, Rendered
from wingsmith.v1 import control_pb2 as cpb
from wingsmith.v1 import resources_pb2 as pb

log = logging.getLogger(__name__)

# REST/proto kind words -> the feed's kinds.
KIND_WORDS = {"workloads": "workload", "deployments": "deployment", "clusters": "cluster"}
# Fields that change on every heartbeat: not a change worth an event (the body still carries
# their latest value whenever something else changed).
_NOISE = frozenset({"last_seen", "observe_time", "lastSeen", "observeTime"})
_PAGE = 1000
_TYPES = {
    "ADDED": cpb.WatchEvent.TYPE_ADDED,
    "MODIFIED": cpb.WatchEvent.TYPE_MODIFIED,
    "DELETED": cpb.WatchEvent.TYPE_DELETED,
}
_MESSAGES: dict[str, type[Any]] = {
    "workload": pb.Workload,
    "deployment": pb.Deployment,
    "cluster": pb.Cluster,
}


class _Watcher:
    def __init__(
        self,
        *,
        kinds: frozenset[str],
        readable: frozenset[str] | None,
        project: str,
        revision: int,
        capacity: int,
    ) -> None:
        self.kinds = kinds
        self.readable = readable
        self.project = project
        # The last revision this client was handed (or was known to need nothing up to).
        self.revision = revision
        self.queue: asyncio.Queue[cpb.WatchEvent] = asyncio.Queue(capacity)
        self.capacity = capacity
        self.cut: errors.WingsmithError | None = None
        self.cut_off = asyncio.Event()
        self.wake = asyncio.Event()
        # The revision of the last event written to the client.
        self.sent = revision

    def shows(self, event: Event) -> bool:
        if event.kind not in self.kinds:
            return False
        if event.kind == "cluster":
            return True
        if self.project and event.project != self.project:
            return False
        return self.readable is None or event.project in self.readable

    def end(self, error: errors.WingsmithError) -> None:
        if self.cut is None:
            self.cut = error
            self.cut_off.set()

    def offer(self, events: Sequence[Event], head: int) -> None:
        if self.cut is not None:
            return
        for event in events:
            if event.revision <= self.revision or not self.shows(event):
                continue
            if self.queue.full():
                self.end(
                    errors.ResourceExhausted(
                        f"the watch was cut off: the client left {self.capacity} events unread;"
                        " watch again with since_revision set to the last revision it read"
                        f" ({self.sent} was the last one written to it) and read faster"
                    )
                )
                return
            self.queue.put_nowait(message(event))
            self.revision = event.revision
        self.revision = max(self.revision, head)
        self.wake.set()


def message(event: Event) -> cpb.WatchEvent:
    obj = jsonread.from_json(json.loads(event.body), _MESSAGES[event.kind])
    answer = cpb.WatchEvent(type=_TYPES[event.type], revision=event.revision)
    getattr(answer, event.kind).CopyFrom(obj)
    return answer


def bookmark(revision: int) -> cpb.WatchEvent:
    return cpb.WatchEvent(type=cpb.WatchEvent.TYPE_BOOKMARK, revision=revision)


def render(ctx: ServiceContext) -> list[Rendered]:
    """Every watched object as the List calls show it (to an admin)."""
    found = watch.watched(ctx)
    rendered: list[Rendered] = []
    for w in found.workloads:
        shown = convert.workload(w)
        rendered.append(_rendered("workload", w.workload.workload_id, shown.project, shown))
    for d in found.deployments:
        dep = convert.deployment(d)
        rendered.append(_rendered("deployment", d.deployment.deployment_id, dep.project, dep))
    for c in found.clusters:
        rendered.append(_rendered("cluster", c.cluster.cluster_id, "", convert.cluster(c)))
    return rendered


def _rendered(kind: str, object_id: str, project: str, shown: Any) -> Rendered:
    document = jsonmap.to_json(shown)
    body = json.dumps(document, sort_keys=True, separators=(",", ":"))
    quiet = json.dumps(_quiet(document), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(quiet.encode()).hexdigest()
    return Rendered(kind, object_id, project, digest, body)


def _quiet(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _quiet(v) for k, v in value.items() if k not in _NOISE}
    if isinstance(value, list):
        return [_quiet(v) for v in value]
    return value


class WatchFeed:
    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self._watchers: set[_Watcher] = set()
        # The last revision read from the store and offered to every watcher.
        self._cursor = -1
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.cut_offs = 0
        self._closed = False

    @property
    def watchers(self) -> int:
        return len(self._watchers)

    async def stop(self) -> None:
        """End every watch (UNAVAILABLE: its client resumes on another hub) and the feed."""
        async with self._lock:
            self._closed = True
            for watcher in list(self._watchers):
                watcher.end(
                    errors.Unavailable(
                        "the hub is shutting down: watch again (on another hub) with"
                        f" since_revision={watcher.sent}"
                    )
                )
            self._watchers.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def head(self) -> int:
        """The last revision handed out (the dashboard's pages carry it: hub/ui/live.py)."""
        return await asyncio.to_thread(watch.head, self._ctx)

    async def _record(self) -> int:
        return await asyncio.to_thread(watch.record, self._ctx, lambda: render(self._ctx))

    async def _run(self) -> None:
        settings = self._ctx.settings
        while self._watchers:
            try:
                head = await self._record()
                events: list[Event] = []
                cursor = self._cursor
                while cursor < head:
                    batch = await asyncio.to_thread(watch.since, self._ctx, cursor, limit=_PAGE)
                    if not batch:
                        break
                    events += batch
                    cursor = batch[-1].revision
                async with self._lock:
                    self._cursor = max(cursor, head)
                    for watcher in list(self._watchers):
                        watcher.offer(events, self._cursor)
                        if watcher.cut is not None:
                            self._watchers.discard(watcher)
            except errors.WingsmithError as e:
                log.warning("watch feed: %s", e.message)
            except Exception:
                log.exception("watch feed failed; retrying")
            await asyncio.sleep(settings.watch_interval_s)
        self._task = None
        self._cursor = -1  # the next first watcher sets it (nothing to catch up for nobody)

    async def drive(
        self,
        request: cpb.WatchRequest,
        principal: access.Principal,
        write: Callable[[cpb.WatchEvent], Awaitable[None]],
    ) -> None:
        """Serve one watch: `write` each event until the client goes (the caller cancels) or
        is cut off (ResourceExhausted, raised even while a `write` waits on a client that
        does not read: that write is cancelled)."""
        watcher, first = await self._open(request, principal)
        try:
            sender = asyncio.create_task(self._send(watcher, first, write))
            cut = asyncio.create_task(watcher.cut_off.wait())
            try:
                await asyncio.wait({sender, cut}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                cut.cancel()
                if not sender.done():
                    sender.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sender
            if watcher.cut is not None:
                if isinstance(watcher.cut, errors.ResourceExhausted):
                    self.cut_offs += 1
                raise watcher.cut
            sender.result()
        finally:
            self._watchers.discard(watcher)

    async def _open(
        self, request: cpb.WatchRequest, principal: access.Principal
    ) -> tuple[_Watcher, list[cpb.WatchEvent]]:
        if self._closed:
            raise errors.Unavailable("the hub is shutting down: watch on another hub")
        kinds = _kinds(request)
        if request.project:
            await asyncio.to_thread(projects.get, self._ctx, request.project)
            if not principal.reads(request.project):
                raise errors.PermissionDenied(
                    f"Watch of project {request.project}: {principal.describe()} reads only its"
                    " own projects' workloads and deployments"
                )
        if request.since_revision < 0:
            raise errors.InvalidArgument("since_revision", "must be >= 0")
        await self._record()  # the state a new watcher starts from is current
        async with self._lock:
            start = await asyncio.to_thread(
                watch.start, self._ctx, since=request.since_revision, kinds=sorted(kinds)
            )
            watcher = _Watcher(
                kinds=kinds,
                readable=principal.readable,
                project=request.project,
                revision=start.revision,
                capacity=max(1, self._ctx.settings.watch_buffer),
            )
            first = [message(e) for e in start.events if watcher.shows(e)]
            if request.since_revision == 0:
                first.append(bookmark(start.revision))
            if self._cursor < 0:
                # Only the first watcher sets it: with others, the feed must still hand them
                # what it has not read yet (this watcher skips what it already has).
                self._cursor = start.revision
            self._watchers.add(watcher)
            if self._task is None:
                self._task = asyncio.create_task(self._run(), name="watch-feed")
        return watcher, first

    async def _send(
        self,
        watcher: _Watcher,
        first: list[cpb.WatchEvent],
        write: Callable[[cpb.WatchEvent], Awaitable[None]],
    ) -> None:
        for event in first:
            await write(event)
            watcher.sent = event.revision
        heartbeat = self._ctx.settings.watch_heartbeat_s
        clock = asyncio.get_running_loop().time
        written = clock()
        while True:
            while not watcher.queue.empty():
                event = watcher.queue.get_nowait()
                await write(event)
                watcher.sent = event.revision
                written = clock()
            watcher.wake.clear()
            # Counted from the last write, not from the last wake: the feed wakes every
            # watcher at each recording, events or not, and an idle stream must still get
            # its heartbeat (before, it got none while the feed ran).
            left = heartbeat - (clock() - written)
            if left <= 0:
                await write(bookmark(watcher.revision))
                watcher.sent = watcher.revision
                written = clock()
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher.wake.wait(), left)


def _kinds(request: cpb.WatchRequest) -> frozenset[str]:
    chosen = set()
    for word in request.kinds:
        kind = KIND_WORDS.get(word)
        if kind is None:
            raise errors.InvalidArgument(
                "kinds", f"unknown kind {word!r}; expected one of {', '.join(KIND_WORDS)}"
            )
        chosen.add(kind)
    return frozenset(chosen or KIND_WORDS.values())
