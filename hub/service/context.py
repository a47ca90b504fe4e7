"""What every use case needs: the database, a clock, settings, and where to publish changes."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hub.admission import Decision
from hub.store.port import Store, Transaction, check_held


class Publisher(Protocol):
    def desired_changed(self, cluster_ids: Iterable[str]) -> None: ...

    def settle(self, timeout_s: float) -> None:
        """Block (a worker thread) until what was published is handed to the streams, at most
        `timeout_s`; return at once where blocking would stall the streams themselves."""
        ...

    def identity_changed(self, cluster_id: str, token_hash: str | None) -> None:
        """After a commit that re-keyed (`token_hash`: the only one still valid) or deleted
        (None) a cluster: close its open streams opened with any other token."""
        ...


@dataclass(frozen=True)
class AdmissionWait:
    """A deployment given more replicas: how long it had waited (since pending_since)."""

    project: str
    device_class: str
    seconds: float


class Hooks(Protocol):
    """Observers of decisions, for metrics; the service never depends on how they count."""

    def admission_decided(self, decisions: Sequence[Decision]) -> None: ...

    def admission_waited(self, waits: Sequence[AdmissionWait]) -> None:
        """Told once the transaction that admitted them committed."""
        ...


class _NoPublisher:
    def desired_changed(self, cluster_ids: Iterable[str]) -> None:
        return None

    def settle(self, timeout_s: float) -> None:
        return None

    def identity_changed(self, cluster_id: str, token_hash: str | None) -> None:
        return None


class _NoHooks:
    def admission_decided(self, decisions: Sequence[Decision]) -> None:
        return None

    def admission_waited(self, waits: Sequence[AdmissionWait]) -> None:
        return None


# How long a write waits for its fan-out before going on (see `transaction`).
SETTLE_S = 2.0

# Notification channels between hubs sharing a store (docs/architecture.md "Several hubs"):
# payloads are comma-separated cluster ids / session ids, and "cluster_id term".
DESIRED_CHANNEL = "wingsmith_desired"
SUPERSEDE_CHANNEL = "wingsmith_supersede"
TERM_CHANNEL = "wingsmith_term"
# PostgreSQL refuses payloads of 8,000 bytes or more.
_PAYLOAD_LIMIT = 7000


def payloads(items: Iterable[str]) -> Iterator[str]:
    """Comma-joined chunks of `items`, each under the notification payload limit."""
    chunk: list[str] = []
    size = 0
    for item in items:
        if chunk and size + len(item) + 1 > _PAYLOAD_LIMIT:
            yield ",".join(chunk)
            chunk, size = [], 0
        chunk.append(item)
        size += len(item) + 1
    if chunk:
        yield ",".join(chunk)


@dataclass(frozen=True)
class Settings:
    # A cluster silent for longer than this is stale (its data kept, nothing counted ready).
    stale_after_s: float = 30.0
    # How often agents should send a heartbeat when they have nothing else to say.
    heartbeat_interval_s: float = 5.0
    # Tombstones older than this are pruned; an agent that far behind gets a snapshot.
    tombstone_retention_s: float = 7 * 24 * 3600.0
    # Observations claiming a time further in the future than this are malformed.
    max_clock_skew_s: float = 300.0
    # Hubs sharing a store beat a heartbeat this often; one silent for `hub_dead_after_s` is
    # dead: its streams are forgotten (their agents reconnect to another hub meanwhile).
    hub_heartbeat_s: float = 2.0
    hub_dead_after_s: float = 10.0
    # Audit records older than this are pruned (hourly).
    audit_retention_s: float = 90 * 24 * 3600.0
    # How often rollouts in waves are checked against their wave deadline.
    rollout_sweep_s: float = 1.0
    # A waiting higher-priority deployment may preempt lower-priority managed ones on its
    # cluster (hub --preemption; docs/admission.md "Priority and preemption"). Off by default.
    preemption: bool = False
    # The watch feed (docs/rest.md "Watch"): how often a hub with watchers records changes, how
    # many events a client may leave unread before it is cut off, how often an idle stream
    # gets a BOOKMARK (a heartbeat), and how many past revisions are kept for resuming.
    watch_interval_s: float = 1.0
    watch_buffer: int = 1000
    watch_heartbeat_s: float = 15.0
    watch_keep: int = 10000


@dataclass
class ServiceContext:
    db: Store
    clock: Callable[[], float] = time.time
    settings: Settings = field(default_factory=Settings)
    publisher: Publisher = field(default_factory=_NoPublisher)
    hooks: Hooks = field(default_factory=_NoHooks)
    # What ingest last wrote per node (hub/store/nodes.py NodeHashes).
    node_hashes: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # This hub process, among the hubs sharing the store (its streams' rows name it).
    hub_id: str = ""


def silenced(ctx: ServiceContext) -> ServiceContext:
    """The same context, publishing nothing and telling no hook: for a dry run, whose
    transaction is rolled back (hub/service/dryrun.py)."""
    return dataclasses.replace(ctx, publisher=_NoPublisher(), hooks=_NoHooks())


@dataclass
class Tx:
    """An open write transaction and the clusters whose desired state it changed."""

    conn: Transaction
    now: float
    touched: set[str] = field(default_factory=set)
    # Run once the transaction committed (never when it rolls back): observers of what it did.
    committed: list[Callable[[], None]] = field(default_factory=list)


@contextlib.contextmanager
def transaction(ctx: ServiceContext, clusters: Iterable[str] | None = None) -> Iterator[Tx]:
    """Read, decide and write in one transaction; publish once it has committed. `clusters`:
    the scope of its locks (Store.write; docs/architecture.md "Write locks"): None is the
    covering lock, for a decision that reads across scopes."""
    with ctx.db.write(clusters) as conn:
        tx = Tx(conn=conn, now=ctx.clock())
        yield tx
        # A desired state changed under no lock of its cluster would race with that
        # cluster's own writers: refused (a defect), never committed.
        check_held(conn, tx.touched)
        if tx.touched and ctx.db.shared:
            # Delivered at commit to every hub, which hands it to the streams it holds.
            for payload in payloads(sorted(tx.touched)):
                conn.notify(DESIRED_CHANNEL, payload)
    for observe in tx.committed:
        observe()
    if tx.touched:
        ctx.publisher.desired_changed(sorted(tx.touched))
        # Agents first: the caller goes on (building its response: a view of every deployment
        # of a fleet-wide workload) once the fan-out has gone out, or after a bound.
        ctx.publisher.settle(SETTLE_S)


@contextlib.contextmanager
def snapshot(ctx: ServiceContext) -> Iterator[Transaction]:
    with ctx.db.read() as conn:
        yield conn
