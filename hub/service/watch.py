"""The watch feed's use cases (docs/rest.md "Watch"): record what changed, read it back.

Design (it must work on several hubs sharing one store): a hub with watchers `record`s every
few hundred milliseconds: under the store-wide "watch" lock it reads the watched objects as
the List calls show them (the caller renders them: `current`), compares each with what
watchers last saw (table watch_objects, by a digest that leaves heartbeat timestamps out) and
appends one event per difference, numbered from the last revision. Holding the lock while
reading means two hubs record one after the other, each against the other's result, so no
change is recorded twice and none flaps back. Revisions are dense and commit in order, so a
reader on any hub that has seen R and reads `> R` later misses nothing and repeats nothing.
Changes between two recordings coalesce into one event (level-triggered, as Kubernetes'
watch): a watcher sees every object's latest state, not every intermediate one.

Costs: one recording reads every watched object (as a full List would), only while some
client watches on that hub; events are kept for the last `watch_keep` revisions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hub import errors
from hub.filters import DeploymentFilter
from hub.service import clusters, deployments, views, workloads
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import watch
from hub.store.port import WATCH
from hub.store.watch import Event, Seen

__all__ = [
    "KINDS",
    "Event",
    "Rendered",
    "Start",
    "Watched",
    "head",
    "record",
    "since",
    "start",
    "watched",
]

KINDS = ("workload", "deployment", "cluster")
LOCK = WATCH


@dataclass(frozen=True)
class Rendered:
    """A watched object as a client reads it: its body (JSON) and a digest of what counts as
    a change."""

    kind: str
    object_id: str
    project: str
    digest: str
    body: str


Current = Callable[[], Sequence[Rendered]]
_PAGE = 1000


@dataclass(frozen=True)
class Watched:
    """Every watched object, as the List calls read them (for an admin)."""

    workloads: list[views.WorkloadView]
    deployments: list[views.DeploymentView]
    clusters: list[views.ClusterView]


def watched(ctx: ServiceContext) -> Watched:
    found = Watched([], [], [])
    token = ""
    while True:
        page, token = workloads.list_page(ctx, project="", page_size=_PAGE, page_token=token)
        found.workloads.extend(page)
        if not token:
            break
    while True:
        placed, token = deployments.list_page(
            ctx, where=DeploymentFilter(), page_size=_PAGE, page_token=token
        )
        found.deployments.extend(placed)
        if not token:
            break
    while True:
        fleet, token = clusters.list_page(ctx, page_size=_PAGE, page_token=token)
        found.clusters.extend(fleet)
        if not token:
            break
    return found


def record(ctx: ServiceContext, current: Current) -> int:
    """Append an event per object changed since the last recording; the head revision."""
    rendered = None if ctx.db.shared else current()  # one hub: nobody else records meanwhile
    # The fleet lock shared, then the watch lock (last in the order, docs/architecture.md
    # "Write locks"): it writes only the feed's tables, which only recorders write.
    with transaction(ctx, ()) as tx:
        tx.conn.serialize(LOCK)
        if rendered is None:
            rendered = current()  # under the lock: read after the previous recorder committed
        before = {(s.kind, s.object_id): s for s in watch.seen(tx.conn)}
        revision = watch.head(tx.conn)
        events: list[Event] = []
        kept: list[Seen] = []
        for r in sorted(rendered, key=lambda r: (KINDS.index(r.kind), r.object_id)):
            old = before.pop((r.kind, r.object_id), None)
            if old is not None and old.digest == r.digest:
                continue
            revision += 1
            kind = "ADDED" if old is None else "MODIFIED"
            events.append(Event(revision, r.kind, r.object_id, r.project, kind, r.body))
            kept.append(Seen(r.kind, r.object_id, r.project, r.digest, r.body, revision))
        for gone in before.values():
            revision += 1
            events.append(
                Event(revision, gone.kind, gone.object_id, gone.project, "DELETED", gone.body)
            )
        if events:
            watch.append(tx.conn, events, now=tx.now)
            watch.keep(tx.conn, kept)
            watch.prune(tx.conn, keep_after=revision - max(1, ctx.settings.watch_keep))
    return revision


@dataclass(frozen=True)
class Start:
    """Where a new watcher starts: the events to send first and the revision they reach."""

    events: list[Event]
    revision: int


def start(ctx: ServiceContext, *, since: int, kinds: Sequence[str]) -> Start:
    """From the beginning (`since` 0: every current object as ADDED, at its own revision) or
    after `since` (every kept event after it). OutOfRange when `since` is no longer kept or
    was never handed out."""
    with snapshot(ctx) as conn:
        head = watch.head(conn)
        if since == 0:
            found = watch.seen(conn, kinds)
            added = [
                Event(s.revision, s.kind, s.object_id, s.project, "ADDED", s.body) for s in found
            ]
            return Start(added, head)
        if since > head:
            raise errors.OutOfRange(
                f"since_revision {since} is past the last revision, {head}: resume from a revision"
                " an event or bookmark gave, or watch without since_revision"
            )
        oldest = watch.oldest(conn)
        if since < head and (oldest is None or oldest > since + 1):
            raise errors.OutOfRange(
                f"since_revision {since} is no longer kept (the oldest kept is"
                f" {oldest if oldest is not None else head}): watch again without"
                " since_revision to get the current state"
            )
        events = watch.since(conn, since, limit=max(1, head - since))
    return Start(events, events[-1].revision if events else since)


def head(ctx: ServiceContext) -> int:
    """The last revision handed out: a reader that has just read the current state resumes
    from it (what changed since is recorded later, with higher revisions)."""
    with snapshot(ctx) as conn:
        return watch.head(conn)


def since(ctx: ServiceContext, revision: int, *, limit: int) -> list[Event]:
    with snapshot(ctx) as conn:
        return watch.since(conn, revision, limit=limit)
