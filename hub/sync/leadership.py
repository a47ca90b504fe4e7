"""Who leads each cluster: Lease terms, hub grants and fencing (docs/daemonset.md).

In a DaemonSet every agent pod streams to the hub; one of them leads: it alone reconciles
deployments and reports cluster-level state (deployments, discovered workloads, rejects, and
nodes that left the cluster). Every leadership has a **term**, and the hub keeps the newest
term per cluster, persisted, so terms never go back, even across hub restarts.

A pod comes to lead in one of two ways:

- **claimed** (a managed DaemonSet): the pod holding the cluster's coordination.k8s.io Lease
  claims the Lease's term, in its Hello or in a Leadership message. A claim with a newer term
  wins and the previous leader's session is fenced (told to stop reconciling); a claim with an
  older term is fenced at once (a pod that lost the Lease while partitioned), and so is a second
  session claiming the term already held (the first claim stands). A fenced holder whose Lease
  is still its own (the Lease was deleted and recreated, restarting its transitions) moves the
  Lease past the hub's term and claims again (agent/cluster/kube/lease.py);
- **granted** (a read-only DaemonSet, which may write nothing, a Lease included): read-only
  node agents *stand*; while no session leads, the hub grants leadership to the one that has
  stood longest, with a term one past the newest (read and raised in one transaction under
  the cluster's write lock, so two hubs granting at once never hand out the same term), and
  grants it again to the next when that session closes or steps down. Leadership there only
  decides who reports cluster-level state.

Every session that comes to lead, by claim or by grant, is sent a LeadershipGrant with its term
and the ids of the nodes the hub holds for the cluster: the leader reports as absent those
whose Node object is gone (a deleted node's own agent never will).

An agent of a whole cluster (no node name: the simulated cluster's, one per cluster) leads
without a term: its sessions supersede one another instead (hub/sync/fanout.py).

State is per hub process, on its event loop: called only from the stream sessions. The store
writes (the persisted term, the leader mark) run off the loop, in the hub's store-writer thread
(`run`), like every write a stream makes (docs/stream.md "No write on the event loop"): on
PostgreSQL a write may wait for a lock, and the loop serves every stream of the hub. So a
decision awaits its writes, and the decisions of one cluster are serialized (one asyncio lock
per cluster, taken in arrival order): a claim, a grant, a release, or a newer term heard from
another hub decides on what the previous one left, and never between another's write and its
outcome. Each decision runs to its end even when the stream that asked is cancelled meanwhile
(its own task, shielded), so what it wrote and what the sessions were told agree. Within one,
the order is: the term is persisted first, then the leader is marked, and only then are
sessions told (the old leader fenced before the new one is granted).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hub import errors

log = logging.getLogger(__name__)
T = TypeVar("T")


class Fenceable(Protocol):
    def fence(self, term: int, reason: str) -> None: ...

    def grant(self, term: int, node_ids: Sequence[str]) -> None: ...


# (cluster id, claimed term) -> the newest term persisted for the cluster
Persist = Callable[[str, int], int]
# cluster id -> a term one past the newest, persisted in the same transaction (a grant)
NextTerm = Callable[[str], int]
# (cluster id, the leading session's id or None)
MarkLeader = Callable[[str, "str | None"], None]
# cluster id -> the ids of the nodes the hub holds for it
NodeIds = Callable[[str], Sequence[str]]


class Run(Protocol):
    """Runs a store write off the event loop (the hub's writer thread) and awaits it."""

    def __call__(self, call: Callable[[], T], /) -> Awaitable[T]: ...


async def _inline(call: Callable[[], T]) -> T:
    """No writer thread (a store in memory, in tests): the call runs where it is awaited."""
    return call()


@dataclass(frozen=True)
class _Leader:
    term: int
    session: Fenceable
    session_id: str


@dataclass
class _Serial:
    """The lock of one cluster's leadership decisions, and how many hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Leadership:
    def __init__(
        self,
        *,
        persist: Persist,
        next_term: NextTerm,
        mark: MarkLeader,
        node_ids: NodeIds = lambda cluster_id: (),
        run: Run = _inline,
    ) -> None:
        self._persist = persist
        self._next_term = next_term
        self._mark = mark
        self._node_ids = node_ids
        self._run = run
        self._leaders: dict[str, _Leader] = {}
        # Read-only node sessions waiting for a grant, oldest first.
        self._standing: dict[str, list[tuple[Fenceable, str]]] = {}
        self._serials: dict[str, _Serial] = {}
        # Decisions under way (strong references: a task nobody awaits is not collected).
        self._changes: set[asyncio.Task[Any]] = set()

    # -- one cluster's decisions, one at a time ---------------------------------------------

    async def _decide(self, cluster_id: str, decision: Coroutine[Any, Any, T]) -> T:
        """Run `decision` under the cluster's lock, in its own task: a caller cancelled while
        it waits (its stream closed) leaves the decision to finish, written and told."""
        return await asyncio.shield(self._start(cluster_id, decision))

    def _start(self, cluster_id: str, decision: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        serial = self._serials.get(cluster_id)
        if serial is None:
            serial = self._serials[cluster_id] = _Serial()
        serial.users += 1

        async def serialized() -> T:
            try:
                async with serial.lock:
                    return await decision
            finally:
                serial.users -= 1
                if serial.users == 0 and self._serials.get(cluster_id) is serial:
                    del self._serials[cluster_id]

        task = asyncio.get_running_loop().create_task(serialized())
        self._changes.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._changes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Also told to the caller when it still waits (a Problem on its stream); logged
            # here for a decision nobody waits for (a release after the stream closed).
            log.warning("a leadership change failed: %s", task.exception())

    def pending(self, cluster_id: str) -> bool:
        """A leadership decision of the cluster is under way (or waits its turn)."""
        return cluster_id in self._serials

    # -- claims (a Lease's term) --------------------------------------------------------------

    async def claim(
        self, cluster_id: str, session: Fenceable, *, session_id: str, term: int
    ) -> bool:
        return await self._decide(cluster_id, self._claim(cluster_id, session, session_id, term))

    async def _claim(self, cluster_id: str, session: Fenceable, session_id: str, term: int) -> bool:
        current = self._leaders.get(cluster_id)
        if current is not None and current.session is session and current.term == term:
            return True  # already leading with this term (a granted agent echoing its grant)
        newest = await self._run(lambda: self._persist(cluster_id, term))
        if term < newest:
            session.fence(newest, f"a newer leader holds the cluster (term {newest} > {term})")
            return False
        current = self._leaders.get(cluster_id)
        if current is not None and current.session is not session and current.term >= term:
            session.fence(current.term, f"term {term} is already led by another agent")
            return False
        await self._lead(cluster_id, _Leader(term, session, session_id))
        return True

    # -- grants (read-only DaemonSets) --------------------------------------------------------

    async def stand(self, cluster_id: str, session: Fenceable, *, session_id: str) -> None:
        """A read-only node session may be granted leadership; at once if no one leads."""
        await self._decide(cluster_id, self._stand(cluster_id, session, session_id))

    async def _stand(self, cluster_id: str, session: Fenceable, session_id: str) -> None:
        standing = self._standing.setdefault(cluster_id, [])
        if all(s is not session for s, _ in standing):
            standing.append((session, session_id))
        if cluster_id not in self._leaders:
            await self._grant_next(cluster_id)

    async def _grant_next(self, cluster_id: str) -> None:
        standing = self._standing.get(cluster_id)
        if not standing:
            return
        session, session_id = standing[0]
        # Read and raised in one transaction under the cluster's lock: another hub granting at
        # the same moment gets the next term, never this one.
        term = await self._run(lambda: self._next_term(cluster_id))
        log.info(
            "cluster %s: leadership granted to session %s (term %d)", cluster_id, session_id, term
        )
        await self._lead(cluster_id, _Leader(term, session, session_id))

    # -- either ---------------------------------------------------------------------------------

    async def _lead(self, cluster_id: str, leader: _Leader) -> None:
        """The term is persisted: mark the new leader, then tell the old one it is fenced and
        the new one its grant (nothing is told before it is written)."""
        await self._run(lambda: self._mark(cluster_id, leader.session_id))
        current = self._leaders.get(cluster_id)
        if current is not None and current.session is not leader.session:
            current.session.fence(leader.term, f"superseded by a newer leader (term {leader.term})")
        self._leaders[cluster_id] = leader
        leader.session.grant(leader.term, self._known_nodes(cluster_id))

    def _known_nodes(self, cluster_id: str) -> Sequence[str]:
        try:
            return self._node_ids(cluster_id)
        except errors.WingsmithError as e:  # the cluster was deleted meanwhile
            log.info("cluster %s: no node list for its leader: %s", cluster_id, e)
            return ()

    async def mark_whole(self, cluster_id: str, session_id: str) -> None:
        """The agent of a whole cluster leads without a term (its slot is exclusive)."""
        await self._decide(cluster_id, self._mark_whole(cluster_id, session_id))

    async def _mark_whole(self, cluster_id: str, session_id: str) -> None:
        await self._run(lambda: self._mark(cluster_id, session_id))

    async def release(self, cluster_id: str, session: Fenceable) -> None:
        """The session stepped down: it no longer leads, nor stands for a grant. When it led,
        the next read-only session standing is granted leadership."""
        await self._decide(cluster_id, self._release(cluster_id, session))

    def release_soon(self, cluster_id: str, session: Fenceable) -> None:
        """`release`, for a stream that closed (and may be cancelled): nobody waits for it."""
        self._start(cluster_id, self._release(cluster_id, session))

    async def _release(self, cluster_id: str, session: Fenceable) -> None:
        standing = self._standing.get(cluster_id, [])
        standing[:] = [(s, sid) for s, sid in standing if s is not session]
        if not standing:
            self._standing.pop(cluster_id, None)
        current = self._leaders.get(cluster_id)
        if current is not None and current.session is session:
            del self._leaders[cluster_id]
            await self._run(lambda: self._mark(cluster_id, None))
            await self._grant_next(cluster_id)

    def newer_term_elsewhere(self, cluster_id: str, term: int) -> None:
        """Another hub persisted `term` for the cluster: a leader of an older term held here is
        fenced (its Lease was taken by a pod whose stream is on that hub). In turn with this
        hub's own decisions: a claim of an older term under way here is fenced once done."""
        self._start(cluster_id, self._newer_term_elsewhere(cluster_id, term))

    async def _newer_term_elsewhere(self, cluster_id: str, term: int) -> None:
        current = self._leaders.get(cluster_id)
        if current is None or current.term >= term:
            return
        current.session.fence(term, f"superseded by a newer leader on another hub (term {term})")
        del self._leaders[cluster_id]

    def leads(self, cluster_id: str, session: Fenceable) -> bool:
        current = self._leaders.get(cluster_id)
        return current is not None and current.session is session

    def term(self, cluster_id: str) -> int:
        current = self._leaders.get(cluster_id)
        return current.term if current else 0
