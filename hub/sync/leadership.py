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
  Lease past the hub's term and claims again (agent/cluster/kube_lease.py);
- **granted** (a read-only DaemonSet, which may write nothing, a Lease included): read-only
  node agents *stand*; while no session leads, the hub grants leadership to the one that has
  stood longest, with a term one past the newest, and grants it again to the next when that
  session closes or steps down. Leadership there only decides who reports cluster-level state.

Every session that comes to lead, by claim or by grant, is sent a LeadershipGrant with its term
and the ids of the nodes the hub holds for the cluster: the leader reports as absent those
whose Node object is gone (a deleted node's own agent never will).

An agent of a whole cluster (no node name: the simulated cluster's, one per cluster) leads
without a term: its sessions supersede one another instead (hub/sync/fanout.py).

State is per hub process, on its event loop: called only from the stream sessions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hub import errors

log = logging.getLogger(__name__)


class Fenceable(Protocol):
    def fence(self, term: int, reason: str) -> None: ...

    def grant(self, term: int, node_ids: Sequence[str]) -> None: ...


# (cluster id, claimed term) -> the newest term persisted for the cluster
Persist = Callable[[str, int], int]
# (cluster id, the leading session's id or None)
MarkLeader = Callable[[str, "str | None"], None]
# cluster id -> the ids of the nodes the hub holds for it
NodeIds = Callable[[str], Sequence[str]]


@dataclass(frozen=True)
class _Leader:
    term: int
    session: Fenceable
    session_id: str


class Leadership:
    def __init__(
        self, *, persist: Persist, mark: MarkLeader, node_ids: NodeIds = lambda cluster_id: ()
    ) -> None:
        self._persist = persist
        self._mark = mark
        self._node_ids = node_ids
        self._leaders: dict[str, _Leader] = {}
        # Read-only node sessions waiting for a grant, oldest first.
        self._standing: dict[str, list[tuple[Fenceable, str]]] = {}

    # -- claims (a Lease's term) --------------------------------------------------------------

    def claim(self, cluster_id: str, session: Fenceable, *, session_id: str, term: int) -> bool:
        current = self._leaders.get(cluster_id)
        if current is not None and current.session is session and current.term == term:
            return True  # already leading with this term (a granted agent echoing its grant)
        newest = self._persist(cluster_id, term)
        if term < newest:
            session.fence(newest, f"a newer leader holds the cluster (term {newest} > {term})")
            return False
        if current is not None and current.session is not session:
            if current.term >= term:
                session.fence(current.term, f"term {term} is already led by another agent")
                return False
            current.session.fence(term, f"superseded by a newer leader (term {term})")
        self._lead(cluster_id, _Leader(term, session, session_id))
        return True

    # -- grants (read-only DaemonSets) --------------------------------------------------------

    def stand(self, cluster_id: str, session: Fenceable, *, session_id: str) -> None:
        """A read-only node session may be granted leadership; at once if no one leads."""
        standing = self._standing.setdefault(cluster_id, [])
        if all(s is not session for s, _ in standing):
            standing.append((session, session_id))
        if cluster_id not in self._leaders:
            self._grant_next(cluster_id)

    def _grant_next(self, cluster_id: str) -> None:
        standing = self._standing.get(cluster_id)
        if not standing:
            return
        session, session_id = standing[0]
        term = self._persist(cluster_id, self._persist(cluster_id, 0) + 1)
        log.info(
            "cluster %s: leadership granted to session %s (term %d)", cluster_id, session_id, term
        )
        self._lead(cluster_id, _Leader(term, session, session_id))

    # -- either ---------------------------------------------------------------------------------

    def _lead(self, cluster_id: str, leader: _Leader) -> None:
        self._leaders[cluster_id] = leader
        self._mark(cluster_id, leader.session_id)
        leader.session.grant(leader.term, self._known_nodes(cluster_id))

    def _known_nodes(self, cluster_id: str) -> Sequence[str]:
        try:
            return self._node_ids(cluster_id)
        except errors.WingsmithError as e:  # the cluster was deleted meanwhile
            log.info("cluster %s: no node list for its leader: %s", cluster_id, e)
            return ()

    def mark_whole(self, cluster_id: str, session_id: str) -> None:
        """The agent of a whole cluster leads without a term (its slot is exclusive)."""
        self._mark(cluster_id, session_id)

    def release(self, cluster_id: str, session: Fenceable) -> None:
        """The session closed, or stepped down: it no longer leads, nor stands for a grant.
        When it led, the next read-only session standing is granted leadership."""
        standing = self._standing.get(cluster_id, [])
        standing[:] = [(s, sid) for s, sid in standing if s is not session]
        if not standing:
            self._standing.pop(cluster_id, None)
        current = self._leaders.get(cluster_id)
        if current is not None and current.session is session:
            del self._leaders[cluster_id]
            self._mark(cluster_id, None)
            self._grant_next(cluster_id)

    def newer_term_elsewhere(self, cluster_id: str, term: int) -> None:
        """Another hub persisted `term` for the cluster: a leader of an older term held here is
        fenced (its Lease was taken by a pod whose stream is on that hub)."""
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
