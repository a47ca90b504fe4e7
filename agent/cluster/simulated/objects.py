"""The records of a simulated cluster's workloads: pods, services and graphs.

Mutable on purpose and private to the simulated operator (agent/cluster/simulated/dynamo.py),
which is the only writer; everything else sees them through `view()`, which gives the frozen
`Pod` and `Dgd` values of agent/cluster/port.py. A pod's view is cached until it changes
(pods are listed far more often than they change); a graph's view is a fresh copy each time
because its spec and status are plain dicts a caller could edit.
"""

from __future__ import annotations

import copy
from typing import Any

from agent.cluster.port import Dgd, Pod
from agent.cluster.simulated.manifest import Graph, Template
from agent.cluster.simulated.rollout import removal_rank

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
