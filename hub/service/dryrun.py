"""Dry runs (AIP-163 validate_only): what a mutating call would do, with nothing written.

The call's own use-case code runs, unchanged, inside a write transaction that is then rolled
back, so the answer cannot drift from what the real call does: the same validation, placement,
admission (and preemption, on a hub started with --preemption) over the same view. The call
runs inside `port.undone`; the deployments of every cluster it touched are read (after), the
block is undone and they are read again (before), then the transaction rolls back whole.
One connection, one lock, the same SQL on SQLite and PostgreSQL; the difference is the answer.

Nothing leaves the transaction: no row, no revision (the cluster revision counters are rows
too), no notification to other hubs (sent only at commit), nothing published to the agents'
streams, and no admission metrics (the preview runs with a context whose publisher and hooks
discard everything). The write lock is held for the preview as for the real call, so the
before and after views are of one moment.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hub.model import REASON_PREEMPTED, Deployment
from hub.service import views
from hub.service.context import ServiceContext, Tx, silenced
from hub.store import deployments, port, workloads
from hub.store.port import Dialect, Listening, OnNotify, Store, Transaction

R = TypeVar("R")

CREATED = "created"
REMOVED = "removed"
SCALED = "scaled"
RESTARTED = "restarted"
RECONFIGURED = "reconfigured"
ADMITTED = "admitted"
WAITS = "waits"
PREEMPTED = "preempted"
ENABLED = "enabled"
DISABLED = "disabled"


@dataclass(frozen=True)
class Change:
    """One deployment before and after the call; `before` None: created, `after` None:
    removed."""

    before: views.DeploymentView | None
    after: views.DeploymentView | None
    effects: tuple[str, ...]

    @property
    def current(self) -> views.DeploymentView:
        view = self.after or self.before
        assert view is not None
        return view


@dataclass(frozen=True)
class DryRun:
    """The answer: the workload as it would be (None when deleted) and what would change."""

    workload: views.WorkloadView | None
    changes: tuple[Change, ...]
    summary: str


NO_CHANGE = "no change"


class _Discard(Exception):
    """Raised at the end of a preview so the store rolls its transaction back."""


@contextlib.contextmanager
def _rolled_back(ctx: ServiceContext) -> Iterator[Tx]:
    """A write transaction that never commits, in a context that publishes nothing."""
    try:
        with ctx.db.write() as conn:
            yield Tx(conn=conn, now=ctx.clock())
            raise _Discard
    except _Discard:
        return


def preview(
    ctx: ServiceContext,
    call: Callable[[ServiceContext, Tx], str],
    *,
    workload_ref: str,
) -> DryRun:
    """Run `call` (a use case's transaction body; it returns the workload id it acted on)
    and roll it back; answer what it would have done. `workload_ref` names the workload
    before the call (empty for a create): its deployments count as touched even where the
    call changed nothing of theirs."""
    quiet = silenced(ctx)
    result: DryRun | None = None
    with _rolled_back(quiet) as tx:
        before_ids = _workload_clusters(tx, workload_ref)
        # Undone when the block ends, in the same transaction: then what is committed, as of now.
        with port.undone(tx.conn):
            workload_id = call(quiet, tx)
            after_ids = _workload_clusters(tx, workload_id)
            cluster_ids = sorted(tx.touched | before_ids | after_ids)
            after = _views(quiet, tx, cluster_ids)
            stored = workloads.get(tx.conn, workload_id)
            workload = (
                None
                if stored is None
                else views.workload_view(
                    stored, [v for v in after if v.deployment.workload_id == workload_id]
                )
            )
        before = _views(quiet, tx, cluster_ids)
        changes = diff(before, after, subject=workload_id)
        result = DryRun(workload=workload, changes=tuple(changes), summary=summary(changes))
    assert result is not None
    return result


def rehearse(
    ctx: ServiceContext,
    call: Callable[[ServiceContext, Tx], R],
    *,
    cluster_ids: Iterable[str] = (),
) -> tuple[R, DryRun]:
    """Run `call` (a use case's transaction body, which answers what the real call answers:
    a cluster as it would be, for one) and roll it back; answer that and what the call would
    have changed on the clusters it touched and on `cluster_ids`. For the calls that act on
    a cluster or a deployment rather than a workload (cordon, uncordon, drain, authority)."""
    quiet = silenced(ctx)
    result: tuple[R, DryRun] | None = None
    with _rolled_back(quiet) as tx:
        with port.undone(tx.conn):
            value = call(quiet, tx)
            touched = sorted(tx.touched | set(cluster_ids))
            after = _views(quiet, tx, touched)
        before = _views(quiet, tx, touched)
        changes = diff(before, after, subject="")
        result = value, DryRun(workload=None, changes=tuple(changes), summary=summary(changes))
    assert result is not None
    return result


class _Touched:
    """The publisher of a whole dry call: it remembers which clusters' desired state the
    call's transactions changed (for the before/after comparison) and tells no stream."""

    def __init__(self) -> None:
        self.clusters: set[str] = set()

    def desired_changed(self, cluster_ids: Iterable[str]) -> None:
        self.clusters.update(cluster_ids)

    def settle(self, timeout_s: float) -> None:
        return None

    def identity_changed(self, cluster_id: str, token_hash: str | None) -> None:
        return None


class _Pinned:
    """A store whose every transaction, write or read, is the dry run's one open transaction:
    a call of several transactions reads its own writes, and nothing commits."""

    shared = False  # notifications are sent at commit only; there is none

    def __init__(self, inner: Store, conn: Transaction) -> None:
        self._inner, self._conn = inner, conn
        self.url, self.epoch = inner.url, inner.epoch
        self.schema_version = inner.schema_version

    @property
    def dialect(self) -> Dialect:
        return self._inner.dialect

    def write(
        self, clusters: Iterable[str] | None = None
    ) -> contextlib.AbstractContextManager[Transaction]:
        # The dry run's one transaction holds the covering lock: every scope is inside it.
        return contextlib.nullcontext(self._conn)

    def read(self) -> contextlib.AbstractContextManager[Transaction]:
        return contextlib.nullcontext(self._conn)

    def listen(
        self, channels: Sequence[str], on_notify: OnNotify, on_reconnect: Callable[[], None]
    ) -> Listening:
        raise NotImplementedError("a dry run listens to nothing")

    def close(self) -> None:
        return None


def whole(ctx: ServiceContext, call: Callable[[ServiceContext], R]) -> tuple[R, DryRun]:
    """Run a whole use case (its own transactions, reads and answer: a project's quota
    change, a cluster's registration) in one transaction that is rolled back, and answer
    what it answered and the deployments it would change. For the calls with no preview of
    their own; the same guarantees as `preview` (nothing written, published or notified)."""
    touched = _Touched()
    quiet = dataclasses.replace(silenced(ctx), publisher=touched)
    result: tuple[R, DryRun] | None = None
    with _rolled_back(quiet) as tx:
        pinned = dataclasses.replace(quiet, db=_Pinned(ctx.db, tx.conn))
        with port.undone(tx.conn):
            value = call(pinned)
            cluster_ids = sorted(touched.clusters)
            after = _views(quiet, tx, cluster_ids)
        before = _views(quiet, tx, cluster_ids)
        changes = diff(before, after, subject="")
        result = value, DryRun(workload=None, changes=tuple(changes), summary=summary(changes))
    assert result is not None
    return result


def _views(ctx: ServiceContext, tx: Tx, cluster_ids: Sequence[str]) -> list[views.DeploymentView]:
    return views.deployment_views(ctx, tx.conn, deployments.on_clusters(tx.conn, cluster_ids))


def _workload_clusters(tx: Tx, ref: str) -> set[str]:
    if not ref:
        return set()
    stored = workloads.get(tx.conn, ref)
    if stored is None:
        return set()
    return {d.cluster_id for d in deployments.of_workload(tx.conn, stored.workload_id)}


def diff(
    before: Sequence[views.DeploymentView],
    after: Sequence[views.DeploymentView],
    *,
    subject: str,
) -> list[Change]:
    """The deployments whose plane-written state differs, each with what happens to it.
    `subject` is the called workload's id: only another workload's deployment can be
    preempted by the call."""
    old = {v.deployment.deployment_id: v for v in before}
    new = {v.deployment.deployment_id: v for v in after}
    changes = []
    for deployment_id in sorted(
        old.keys() | new.keys(),
        key=lambda i: ((new.get(i) or old[i]).deployment.cluster_id, i),
    ):
        b, a = old.get(deployment_id), new.get(deployment_id)
        effects = _effects(
            b.deployment if b else None,
            a.deployment if a else None,
            subject=subject,
            reason=a.admission_reason if a else "",
            running=b is not None and (b.ready_replicas > 0 or any(b.live_digests.values())),
        )
        if effects:
            changes.append(Change(before=b, after=a, effects=effects))
    return changes


def _effects(
    b: Deployment | None, a: Deployment | None, *, subject: str, reason: str, running: bool
) -> tuple[str, ...]:
    if a is None:
        return (REMOVED,) if b is not None else ()
    effects: list[str] = []
    if b is None:
        effects.append(CREATED)
    else:
        if a.desired_replicas != b.desired_replicas:
            effects.append(SCALED)
        if a.enabled != b.enabled:
            effects.append(ENABLED if a.enabled else DISABLED)
    if b is not None and a.serving_digest != b.serving_digest:
        # A rolling restart when its pods run the old digest and the real call starts a
        # rollout (a template change of a managed deployment); else only a new generation.
        effects.append(RESTARTED if a.rolling and running else RECONFIGURED)
    admitted_before = b.admitted_replicas if b else 0
    if a.admitted_replicas > admitted_before:
        effects.append(ADMITTED)
    elif b is not None and a.admitted_replicas < admitted_before:
        # Another workload's deployment losing admitted replicas it still wants: only a
        # preemption takes them (the called workload's own shrink is "scaled").
        taken = a.workload_id != subject and a.desired_replicas >= b.desired_replicas
        if taken or reason == REASON_PREEMPTED:
            effects.append(PREEMPTED)
    if _waits(a) and (
        effects or b is None or not _waits(b) or a.admission_reason != b.admission_reason
    ):
        # Listed when the wait is news: with another change, or newly waiting, or for a new
        # reason. A deployment that keeps waiting as before is no change.
        effects.append(WAITS)
    return tuple(effects)


def _waits(d: Deployment) -> bool:
    return d.enabled and d.admitted_replicas < d.desired_replicas


def visible(preview: DryRun, reads: Callable[[str], bool]) -> DryRun:
    """The answer for a caller who reads only some projects (`reads(project)`): the changes
    it may read, and a count of the others in the summary."""
    shown = tuple(c for c in preview.changes if reads(c.current.deployment.project))
    hidden = len(preview.changes) - len(shown)
    if not hidden:
        return preview
    workload = preview.workload
    if workload is not None and not reads(workload.workload.project):
        workload = None
    said = summary(shown) if shown else NO_CHANGE
    noun = "deployment" if hidden == 1 else "deployments"
    return DryRun(
        workload=workload,
        changes=shown,
        summary=f"{said}; and {hidden} {noun} of other projects",
    )


def summary(changes: Sequence[Change]) -> str:
    """One line: how many deployments each effect concerns, e.g. "2 created, 1 admitted,
    1 waits (insufficient_quota)"; "no change" when the call would change nothing."""
    counts: dict[str, int] = {}
    reasons: dict[str, set[str]] = {}
    for change in changes:
        for effect in change.effects:
            counts[effect] = counts.get(effect, 0) + 1
            if effect in (WAITS, PREEMPTED) and change.after is not None:
                reason = change.after.admission_reason
                if reason:
                    reasons.setdefault(effect, set()).add(reason)
    if not counts:
        return NO_CHANGE
    order = (
        CREATED, REMOVED, SCALED, ENABLED, DISABLED, RESTARTED, RECONFIGURED, ADMITTED,
        PREEMPTED, WAITS,
    )  # fmt: skip
    parts = []
    for effect in order:
        if effect not in counts:
            continue
        why = f" ({', '.join(sorted(reasons[effect]))})" if effect in reasons else ""
        parts.append(f"{counts[effect]} {effect}{why}")
    noun = "deployment" if len(changes) == 1 else "deployments"
    return f"{len(changes)} {noun}: " + ", ".join(parts)
