"""The records of a simulated cluster's workloads: pods, services and graphs, and what a
service tells of itself (its generations, whether its surge is spent, the old pod to retire,
its counts for the graph's status).

Mutable on purpose and private to the simulated operator (agent/cluster/simulated/dynamo.py),
which is the only writer; everything else sees them through `view()`, which gives the frozen
`Pod` and `Dgd` values of agent/cluster/port.py. A pod's view is cached until it changes
(pods are listed far more often than they change); a graph's view is a fresh copy each time
because its spec and status are plain dicts a caller could edit.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agent.cluster.port import Dgd, Pod
from agent.cluster.simulated.manifest import Graph, Template
from agent.cluster.simulated.rollout import max_surge, removal_rank
from agent.cluster.simulated.status import ServiceCounts

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
REASON_STARTING = "ContainersNotReady"


class SimPod:
    __slots__ = (
        "_view",
        "created_unix",
        "devices",
        "graph_key",
        "instant",
        "key",
        "name",
        "namespace",
        "node_name",
        "owner",
        "phase",
        "ready",
        "ready_at",
        "reason",
        "seq",
        "template",
    )

    def __init__(
        self,
        *,
        name: str,
        owner: Service,
        graph: Graph,
        seq: int,
        created_unix: float,
        instant: bool,
    ) -> None:
        self.name = name
        self.namespace = graph.namespace
        self.key = f"{graph.namespace}/{name}"
        self.graph_key = graph.key
        self.owner = owner
        self.template = owner.template
        self.seq = seq
        self.created_unix = created_unix
        # Seeded pods were running before we looked: ready as soon as they have devices.
        self.instant = instant
        self.node_name = ""
        self.devices: tuple[str, ...] = ()
        self.phase = PHASE_PENDING
        self.ready = False
        self.ready_at: float | None = None
        self.reason = ""
        self._view: Pod | None = None

    @property
    def scheduled(self) -> bool:
        return self.phase == PHASE_RUNNING

    @property
    def live(self) -> bool:
        return self.phase != PHASE_FAILED

    def rank(self) -> tuple[bool, bool, int]:
        return removal_rank(scheduled=self.scheduled, ready=self.ready, seq=self.seq)

    def view(self) -> Pod:
        if self._view is None:
            self._view = Pod(
                name=self.name,
                namespace=self.namespace,
                labels=self.template.labels,
                node_name=self.node_name,
                phase=self.phase,
                ready=self.ready,
                gpu_request=self.template.gpu_request,
                image=self.template.image,
                argv=self.template.argv,
                reason=self.reason,
                created_unix=self.created_unix,
            )
        return self._view


class Service:
    """One service of a graph: its current template and all its pods, oldest first."""

    __slots__ = ("blocked", "counter", "failure", "name", "pods", "template")

    def __init__(self, template: Template) -> None:
        self.name = template.service
        self.template = template
        self.pods: dict[str, SimPod] = {}
        self.counter = 0
        # Why the service is failed; cleared once it is whole again.
        self.failure = ""
        # Its waiting new pods cannot be placed even by retiring its old pods.
        self.blocked = False

    def generations(self) -> tuple[list[SimPod], list[SimPod]]:
        """Live pods of the current template, and live pods of older ones."""
        new: list[SimPod] = []
        old: list[SimPod] = []
        for pod in self.pods.values():
            if pod.live:
                (new if pod.template.key == self.template.key else old).append(pod)
        return new, old

    def surge_spent(self, annotations: Mapping[str, str]) -> bool:
        """Has a rolling service as many pods holding devices as replicas + max surge?"""
        limit = max_surge(annotations, self.name)
        if limit is None:
            return False
        new, old = self.generations()
        if not old:
            return False
        holding = sum(1 for p in new + old if p.scheduled)
        return holding >= self.template.replicas + limit

    def surge_reason(self, annotations: Mapping[str, str]) -> str:
        limit = max_surge(annotations, self.name)
        return f"WaitingForSurge: an old replica must retire first (max surge {limit})"

    def retirable(self, budget: int) -> SimPod | None:
        """The old pod to retire for one new one: not-ready ones cost nothing, a ready one
        only within the maxUnavailable budget."""
        _, old = self.generations()
        scheduled = sorted((p for p in old if p.scheduled), key=SimPod.rank)
        if not scheduled:
            return None
        victim = scheduled[0]
        if victim.ready and budget < 1:
            return None
        return victim

    def counts(self) -> ServiceCounts:
        """The service's pods counted for its graph's status; a failure whose service is whole
        again is cleared."""
        new, old = self.generations()
        waiting = [p for p in new + old if not p.scheduled]
        counts = ServiceCounts(
            name=self.name,
            component_name=self.template.selector,
            is_worker=self.template.is_worker,
            desired=self.template.replicas,
            replicas=len(new) + len(old),
            ready=sum(1 for p in new + old if p.ready),
            updated=len(new),
            updated_scheduled=sum(1 for p in new if p.scheduled),
            updated_ready=sum(1 for p in new if p.ready),
            unschedulable=len(waiting),
            unschedulable_reason=waiting[0].reason if waiting else "",
            has_old=bool(old),
            blocked=self.blocked,
            failure=self.failure,
        )
        if self.failure and counts.complete:
            # Whole again (its replacement is ready): the failure is history, not state.
            self.failure = ""
            counts = replace(counts, failure="")
        return counts


class GraphState:
    __slots__ = ("generation", "graph", "rollout_started", "services", "status")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.generation = 1
        self.rollout_started = False
        self.services = {t.service: Service(t) for t in graph.templates}
        self.status: dict[str, Any] = {}

    def view(self) -> Dgd:
        # Fresh copies on every call, as a Kubernetes client returns: a caller may edit what
        # it was given without editing the simulation or what other callers see.
        return Dgd(
            namespace=self.graph.namespace,
            name=self.graph.name,
            labels=self.graph.labels,
            annotations=self.graph.annotations,
            spec=_copied(dict(self.graph.spec)),
            status=_copied(self.status),
            generation=self.generation,
        )


def _copied(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars): what copy.deepcopy gives,
    without its memo bookkeeping (a third of the cost; every observation pass copies every
    DGD of the cluster)."""
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    if kind is tuple:
        return tuple(_copied(item) for item in value)
    return copy.deepcopy(value)


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})
