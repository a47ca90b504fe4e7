"""Control calls under scoped write locks (docs/architecture.md "Write locks", per-path table).

A control call whose decision reads only a known set of clusters (a workload's deployments and
the clusters its placement may choose; a project's deployments) runs under those clusters'
locks instead of the covering lock, so writes elsewhere in the fleet do not wait for it, nor it
for them. The set is guessed from a snapshot before the write begins, and checked again inside
it, once its locks are held (`need`): a cluster that joined the set meanwhile is WiderScope
(run again with it); a decision that cannot be scoped at all (`need_covering`: a workload with
no deployment, whose own row no cluster lock guards) runs again under the covering lock.

Why a cluster lock covers what the decisions read: every write of a deployment's row (and its
cluster's revision) holds that cluster's lock (checked at commit, `port.check_held`); a
project's quota by its admission lock, taken by the admission pass itself; what only covering
writes change (clusters' labels and registrations) cannot change while any scoped write
holds the fleet lock shared. A workload create (or a promote) adds a deployment of its
project where it may have none, holding only the clusters it may choose: the project's lock
(`port.project_lock`) orders it with the writes that read where a project has deployments (a
change of the project's quota or preemption policy) or whether it has workloads (its
deletion).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from hub.service.context import ServiceContext, Tx, transaction
from hub.store.port import WIDER_ATTEMPTS, WiderScope, lock_clusters, scope_of

T = TypeVar("T")


class NeedsCovering(Exception):
    """The decision reads what no scoped lock guards: run it again under the covering lock."""


def write(ctx: ServiceContext, clusters: Iterable[str] | None, body: Callable[[Tx], T]) -> T:
    """`body` in one write transaction scoped to `clusters` (None: covering), again with the
    clusters a WiderScope names added (at most WIDER_ATTEMPTS tries), then covering; at once
    covering when it raises NeedsCovering."""
    scope = scope_of(clusters)
    for _ in range(WIDER_ATTEMPTS):
        if scope is None:
            break
        try:
            with transaction(ctx, scope) as tx:
                return body(tx)
        except WiderScope as e:
            scope = scope_of(scope | e.clusters)
        except NeedsCovering:
            break
    with transaction(ctx, None) as tx:
        return body(tx)


def need(tx: Tx, clusters: Iterable[str]) -> None:
    """WiderScope unless the transaction holds the locks of `clusters` (what its decision is
    about to read and may write); called before anything is written."""
    lock_clusters(tx.conn, clusters)


def need_covering(tx: Tx) -> None:
    """NeedsCovering unless the transaction holds the covering lock."""
    if not tx.conn.locks.covering:
        raise NeedsCovering()
