"""The store's write locks (docs/architecture.md "Write locks"): their names, the one order
they are taken in, and the checks that hold every write to it. Both backends record what a
transaction holds here (`Locks`); the service layer checks that a desired-state write holds its
clusters' locks (`check_held`) and runs a write again with a wider scope (`retry_wider`).
hub/store/port.py names all of it for its callers.

A write transaction holds the locks scoped to what its read-decide-write reads and writes,
always taken in this one order, so no two writers can wait for each other in a cycle:

  1. `fleet`       shared by every scoped write; exclusive (the covering lock) for a write
                   that names no scope: it then waits for every other writer and none
                   waits for it but later writers, as the old single write lock did;
  2. `cluster:ID`  one per cluster: its ingest, desired-state revisions, sessions and
                   leadership term (all taken as the write begins, in one statement);
  3. `project:P`   one per project, in ascending name: the project's existence and the set
                   of clusters it has deployments on, where a write could add one without
                   holding any of them (a workload created or promoted), read by a change of the
                   project's quota and by its deletion;
  4. `devices`     binding GPU UUIDs to the node that verified them first: an ingest that
                   writes nodes reads every cluster's devices to decide;
  5. `admission:P` one per project, in ascending name: its quota admission (a quota is
                   shared by the project's clusters; a cluster's free devices are guarded by
                   the cluster's lock, which every pass writing there holds);
  6. `watch`       the watch feed's recorder.

Singleton try-locks (`try_serialize`: pruning tombstones, sweeping dead hubs) never wait, so
they stand outside the order. `Store.write(clusters)` takes levels 1 and 2 when it begins;
`serialize(key)` takes a later one. Each transaction records what it holds (`Locks`) and
refuses a lock that would come before one it already holds (`LockOrderError`, on both
backends, so a test on SQLite finds an out-of-order path too). SQLite has one writer
(BEGIN IMMEDIATE): there the locks are recorded and checked, never taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from hub.store.port import Transaction

T = TypeVar("T")


class LockOrderError(RuntimeError):
    """A write asked for a lock that comes before one it holds, or wrote what it holds no lock
    for: a defect of the caller (the lock order is in this module's docstring)."""


class WiderScope(Exception):
    """A scoped write found it needs clusters it could not lock in order: the caller runs the
    whole transaction again with `clusters` added to its scope (bounded: see `retry_wider`)."""

    def __init__(self, clusters: Iterable[str]) -> None:
        self.clusters = frozenset(clusters)
        super().__init__(f"needs the locks of clusters {sorted(self.clusters)}")


FLEET = "fleet"
DEVICES = "devices"
WATCH = "watch"
_CLUSTER = "cluster:"
_PROJECT = "project:"
_ADMISSION = "admission:"
# The order of the waiting locks (the module docstring); clusters sort by id within theirs,
# projects by name within theirs.
_LEVELS = {FLEET: 1, DEVICES: 4, WATCH: 6}
_CLUSTER_LEVEL = 2
_PROJECT_LEVEL = 3
_ADMISSION_LEVEL = 5


def cluster_lock(cluster_id: str) -> str:
    """The name of a cluster's lock."""
    return _CLUSTER + cluster_id


def project_lock(project: str) -> str:
    """The name of the lock of a project's set of clusters (where it has deployments)."""
    return _PROJECT + project


def admission_lock(project: str) -> str:
    """The name of the lock of a project's quota admission."""
    return _ADMISSION + project


def _rank(key: str) -> tuple[int, str]:
    if key.startswith(_CLUSTER):
        return (_CLUSTER_LEVEL, key[len(_CLUSTER) :])
    if key.startswith(_PROJECT):
        return (_PROJECT_LEVEL, key[len(_PROJECT) :])
    if key.startswith(_ADMISSION):
        return (_ADMISSION_LEVEL, key[len(_ADMISSION) :])
    level = _LEVELS.get(key)
    if level is None:
        raise LockOrderError(f"no lock named {key!r} in the lock order")
    return (level, "")


class Locks:
    """The locks one write transaction holds, and the order they must come in. `covering`:
    it holds the fleet lock exclusively, so no other writer holds anything: every later lock
    is already covered (nothing to take)."""

    __slots__ = ("_held", "_top", "covering")

    def __init__(self, *, covering: bool) -> None:
        # Exclusive fleet lock: every other writer is excluded, every later lock covered.
        self.covering = covering
        self._held: set[str] = {FLEET}
        self._top = _rank(FLEET)

    def take(self, key: str) -> bool:
        """Record `key` as held; True when the backend must take it now. LockOrderError when
        it comes before the last lock taken (waiting for it could close a cycle)."""
        rank = _rank(key)
        if key in self._held or self.covering:
            return False
        if rank[0] == _CLUSTER_LEVEL:
            raise LockOrderError(
                f"lock {key!r} requested inside the transaction: a write takes its clusters'"
                " locks when it begins (Store.write(clusters); lock_clusters)"
            )
        if rank < self._top:
            raise LockOrderError(
                f"lock {key!r} requested after {sorted(self._held)}: out of order"
                ' (docs/architecture.md "Write locks")'
            )
        self._held.add(key)
        self._top = rank
        return True

    def begin(self, cluster_ids: Iterable[str]) -> list[str]:
        """Record the cluster locks a write begins with; the ids whose locks the backend must
        take (sorted, none when covering). Only here: a cluster lock is never taken later."""
        if self.covering:
            return []
        wanted = sorted(set(cluster_ids))
        self._held.update(cluster_lock(c) for c in wanted)
        if wanted:
            self._top = (_CLUSTER_LEVEL, wanted[-1])
        return wanted

    def missing(self, cluster_ids: Iterable[str]) -> list[str]:
        """Those of `cluster_ids` whose lock this transaction does not hold (sorted)."""
        if self.covering:
            return []
        return sorted({c for c in cluster_ids if cluster_lock(c) not in self._held})

    def held(self) -> frozenset[str]:
        return frozenset(self._held)


def lock_clusters(conn: Transaction, cluster_ids: Iterable[str]) -> None:
    """Make sure the transaction holds the locks of `cluster_ids`. Cluster locks are all taken
    when a write begins (in one order), so one it lacks is WiderScope: the caller starts again
    with them in its scope (`retry_wider`)."""
    wanted = conn.locks.missing(cluster_ids)
    if wanted:
        raise WiderScope(wanted)


def retry_wider(run: Callable[[frozenset[str] | None], T], clusters: Iterable[str]) -> T:
    """`run(scope)` (one whole write transaction) with `clusters` as its scope, again with the
    clusters a WiderScope asked for added (at most `WIDER_ATTEMPTS` times: a workload's
    clusters rarely change between two tries), then under the covering lock."""
    scope = frozenset(clusters)
    for _ in range(WIDER_ATTEMPTS):
        try:
            return run(scope)
        except WiderScope as e:
            scope |= e.clusters
    return run(None)


WIDER_ATTEMPTS = 3
# A write naming more clusters than this takes the covering lock instead: PostgreSQL keeps
# advisory locks in a shared table sized by max_locks_per_transaction (64 per connection by
# default), and a liveness flush of thousands of clusters would fill it.
MAX_SCOPED_CLUSTERS = 256


def scope_of(clusters: Iterable[str] | None) -> frozenset[str] | None:
    """The clusters a write locks, or None for the covering lock (none named, or too many)."""
    if clusters is None:
        return None
    scope = frozenset(clusters)
    return None if len(scope) > MAX_SCOPED_CLUSTERS else scope


def check_held(conn: Transaction, cluster_ids: Iterable[str]) -> None:
    """LockOrderError unless the transaction holds the locks of `cluster_ids` (a write to a
    cluster's desired state is about to commit)."""
    missing = conn.locks.missing(cluster_ids)
    if missing:
        raise LockOrderError(
            f"wrote the desired state of clusters {missing} without their locks"
            f" (held: {sorted(conn.locks.held())})"
        )
