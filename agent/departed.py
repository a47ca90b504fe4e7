"""Nodes that left the cluster: which ones the leader reports absent to the hub. Pure.

In a DaemonSet every pod reports its own node, so a node that is deleted (scaled down,
replaced, drained and removed) takes its reporter with it: nobody would ever tell the hub, and
the hub would count the node's GPUs as free capacity forever. The leader closes that gap: it
watches Node objects, and reports as absent every node it knows of that has no Node object any
more (docs/daemonset.md).

Which nodes does it know of? Those the hub holds, as named in the hub's LeadershipGrant when
this pod came to lead (so nodes deleted while no one led, or before this pod started, are
caught too), plus every node seen in the Node cache at one of its observation passes since
(they run on every cache change and every node poll). A node is reported once it has been
missing for `grace_s`: a watch that lags, or a node whose Node object is being re-registered,
must not wipe a live node's report (its own agent resends only what changes). Its own node is
never reported: the leader runs on it.

Called by agent/app.py on the leader's observation passes; holds no clock of its own.
"""

from __future__ import annotations

from collections.abc import Iterable


class DepartedNodes:
    def __init__(self, *, own_node: str, grace_s: float) -> None:
        self._own = own_node
        self._grace_s = grace_s
        self._known: set[str] = set()
        self._missing_since: dict[str, float] = {}

    @property
    def known(self) -> frozenset[str]:
        """The nodes it would report absent if their Node object went."""
        return frozenset(self._known)

    def learn(self, node_ids: Iterable[str]) -> None:
        """The nodes the hub holds (from a grant): each must exist, or be reported absent."""
        self._known |= set(node_ids)

    def forget(self) -> None:
        """Leadership lost: the next leadership starts from the hub's list again."""
        self._known.clear()
        self._missing_since.clear()

    def collect(self, present: Iterable[str], *, now: float) -> list[str]:
        """Nodes to report absent now (each once); `present`: the Node objects that exist."""
        existing = set(present)
        self._known |= existing
        for node_id in existing:
            self._missing_since.pop(node_id, None)
        gone = []
        for node_id in sorted(self._known - existing - {self._own}):
            since = self._missing_since.setdefault(node_id, now)
            if now - since >= self._grace_s:
                gone.append(node_id)
        for node_id in gone:
            self._known.discard(node_id)
            self._missing_since.pop(node_id, None)
        return gone

    def undelivered(self, node_ids: Iterable[str]) -> None:
        """Reports that never reached the hub: report them again at the next pass."""
        for node_id in node_ids:
            self._known.add(node_id)
            self._missing_since[node_id] = float("-inf")
