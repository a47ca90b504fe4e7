"""Who leads each cluster: fencing by Lease term (docs/daemonset.md).

In a DaemonSet every agent pod streams to the hub; the one holding the cluster's Lease leads:
it alone reconciles deployments and reports cluster-level state (deployments, discovered
workloads, rejects). It says so with its Lease term (in its Hello, then in Leadership
messages). The hub keeps the newest term per cluster, persisted, and:

- a claim with a newer term wins: the previous leader's session is fenced (told to stop
  reconciling);
- a claim with an older term is fenced at once (a pod that lost the Lease while partitioned);
- a second session claiming the term already held is fenced (the first claim stands).

An agent of a whole cluster (no node name: the simulated cluster's, one per cluster) leads
without a Lease: its sessions supersede one another instead (hub/sync/fanout.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Fenceable(Protocol):
    def fence(self, term: int, reason: str) -> None: ...


# (cluster id, claimed term) -> the newest term persisted for the cluster
Persist = Callable[[str, int], int]
# (cluster id, the leading session's id or None)
MarkLeader = Callable[[str, "str | None"], None]


class Leadership:
    def __init__(self, *, persist: Persist, mark: MarkLeader) -> None:
        self._persist = persist
        self._mark = mark
        self._leaders: dict[str, tuple[int, Fenceable, str]] = {}

    def claim(self, cluster_id: str, session: Fenceable, *, session_id: str, term: int) -> bool:
        newest = self._persist(cluster_id, term)
        current = self._leaders.get(cluster_id)
        if term < newest:
            session.fence(newest, f"a newer leader holds the cluster (term {newest} > {term})")
            return False
        if current is not None and current[1] is not session:
            if current[0] >= term:
                session.fence(current[0], f"term {term} is already led by another agent")
                return False
            current[1].fence(term, f"superseded by a newer leader (term {term})")
        self._leaders[cluster_id] = (term, session, session_id)
        self._mark(cluster_id, session_id)
        return True

    def mark_whole(self, cluster_id: str, session_id: str) -> None:
        """The agent of a whole cluster leads without a term (its slot is exclusive)."""
        self._mark(cluster_id, session_id)

    def release(self, cluster_id: str, session: Fenceable) -> None:
        current = self._leaders.get(cluster_id)
        if current is not None and current[1] is session:
            del self._leaders[cluster_id]
            self._mark(cluster_id, None)

    def leads(self, cluster_id: str, session: Fenceable) -> bool:
        current = self._leaders.get(cluster_id)
        return current is not None and current[1] is session

    def term(self, cluster_id: str) -> int:
        current = self._leaders.get(cluster_id)
        return current[0] if current else 0
