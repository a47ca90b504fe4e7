"""The simulated Dynamo operator and kube-scheduler of one simulated cluster.

`SimulatedCluster` (simulated/cluster.py) owns one `DynamoController` and calls it under
its lock with the clock's `now`; nothing else may touch it. It turns applied graphs into pods,
books devices through `Hardware` (agent/cluster/simulated/hardware.py), makes pods ready
`ready_after` seconds after they are scheduled, rolls out new templates and keeps each graph's
status. It knows nothing of Kubernetes clients, NVML or Wingsmith's own labels.

Cheapness is the point (thousands of clusters in one process): work happens only in answer to
an operation or a due timer, and touches only the graphs and pods that changed. Pending pods are
looked at again only when devices were freed or nodes changed. `revision` moves only when
something a list call returns changed.

Every operation ends in `_settle`, which runs three steps until none makes progress:
  1. reconcile the graphs marked stale: scale each service's current generation to its
     replicas and retire old-generation pods that new ready pods replace;
  2. schedule pending pods, oldest first, first fit among the nodes the pod's nodeSelector and
     required node affinity admit (simulated/node_selection.py); a pod that does not fit
     does not block a later one that does, and waits with kube-scheduler's message;
  3. for graphs in a rollout, make room: retire old pods within maxUnavailable so that new
     pods that fit nowhere get their devices (agent/cluster/simulated/rollout.py).
Then the status of every graph touched is recomputed.
"""

from __future__ import annotations

import heapq
import itertools

from agent.cluster.port import Dgd, Pod
from agent.cluster.simulated.hardware import Hardware, SimNode
from agent.cluster.simulated.manifest import Graph, Template
from agent.cluster.simulated.objects import (
    PHASE_FAILED,
    PHASE_RUNNING,
    REASON_STARTING,
    GraphState,
    Service,
    SimPod,
)
from agent.cluster.simulated.rollout import (
    Holder,
    fits_all,
    max_unavailable,
    plan_room,
)
from agent.cluster.simulated.status import graph_status


class DynamoController:
    def __init__(self, hardware: Hardware, *, ready_after: float, unix_offset: float) -> None:
        self.hw = hardware
        self.ready_after = ready_after
        self.unix_offset = unix_offset
        self.revision = 0
        self.graphs: dict[str, GraphState] = {}
        self.pods: dict[str, SimPod] = {}
        # dicts used as ordered sets: iteration order must not depend on string hashing.
        self._pending: dict[str, SimPod] = {}
        self._fresh: dict[str, SimPod] = {}
        self._stale: dict[str, None] = {}
        self._dirty: dict[str, None] = {}
        self._rolling: dict[str, None] = {}
        self._rescan = False
        self._instant = False
        self._timers: list[tuple[float, int, SimPod]] = []
        self._seq = itertools.count()

    # -- operations -------------------------------------------------------------------------

    def apply(self, graph: Graph, *, now: float, instant: bool = False) -> None:
        state = self.graphs.get(graph.key)
        if state is None:
            state = self.graphs[graph.key] = GraphState(graph)
        elif not self._update(state, graph):
            return
        self._touch()
        self._stale[graph.key] = None
        self._dirty[graph.key] = None
        self._instant = instant
        try:
            self._settle(now)
        finally:
            self._instant = False

    def delete(self, namespace: str, name: str, *, now: float) -> bool:
        key = f"{namespace}/{name}"
        state = self.graphs.pop(key, None)
        if state is None:
            return False
        for service in state.services.values():
            for pod in list(service.pods.values()):
                self._remove(pod)
        for marks in (self._stale, self._dirty, self._rolling):
            marks.pop(key, None)
        self._touch()
        self._settle(now)
        return True

    def advance(self, now: float) -> int:
        """Make ready every pod whose time has come, in time order; returns how many."""
        fired = 0
        while self._timers and self._timers[0][0] <= now:
            due = self._timers[0][0]
            batch = 0
            while self._timers and self._timers[0][0] == due:
                _, _, pod = heapq.heappop(self._timers)
                if self._awaits(pod, due):
                    self._make_ready(pod)
                    batch += 1
            if batch:
                # Settle at the due time, not at `now`: the outcome must not depend on how
                # coarsely the driver steps.
                self._settle(due)
                fired += batch
        return fired

    def next_due(self) -> float | None:
        while self._timers and not self._awaits(self._timers[0][2], self._timers[0][0]):
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def has_timers(self) -> bool:
        return bool(self._timers)

    def fail_pod(self, namespace: str, name: str, *, reason: str, now: float) -> None:
        pod = self._pod(namespace, name)
        if not pod.live:
            return
        self._release(pod)
        self._pending.pop(pod.key, None)
        self._fresh.pop(pod.key, None)
        pod.phase, pod.ready, pod.ready_at, pod.reason = PHASE_FAILED, False, None, reason
        pod.owner.failure = f"pod {name} failed: {reason}"
        self._changed(pod)
        self._stale[pod.graph_key] = None
        self._settle(now)

    def delete_pod(self, namespace: str, name: str, *, now: float) -> None:
        pod = self._pod(namespace, name)
        self._remove(pod)
        self._stale[pod.graph_key] = None
        self._settle(now)

    def node_removed(self, node_name: str, *, now: float) -> None:
        # Kubernetes garbage-collects the pods of a deleted node; controllers replace them.
        for pod in [p for p in self.pods.values() if p.node_name == node_name]:
            self._remove(pod)
            self._stale[pod.graph_key] = None
        self.capacity_changed(now=now)

    def capacity_changed(self, *, now: float) -> None:
        self._rescan = True
        self._touch()
        self._settle(now)

    # -- views ------------------------------------------------------------------------------

    def pod_views(self) -> list[Pod]:
        return [pod.view() for pod in self.pods.values()]

    def graph_views(self) -> list[Dgd]:
        return [state.view() for state in self.graphs.values()]

    def pods_holding_devices(self, node_name: str) -> list[SimPod]:
        return [p for p in self.pods.values() if p.node_name == node_name and p.devices]

    # -- applying a new version of a graph ------------------------------------------------------

    def _update(self, state: GraphState, graph: Graph) -> bool:
        previous = state.graph
        if (graph.spec, graph.labels, graph.annotations) == (
            previous.spec,
            previous.labels,
            previous.annotations,
        ):
            return False
        if graph.spec != previous.spec:
            state.generation += 1
        if graph.worker_hash != previous.worker_hash and self._has_live_workers(state):
            state.rollout_started = True
        state.graph = graph
        wanted = {t.service: t for t in graph.templates}
        for name in [n for n in state.services if n not in wanted]:
            for pod in list(state.services[name].pods.values()):
                self._remove(pod)
        state.services = {
            t.service: self._retemplate(state.services.get(t.service), t) for t in graph.templates
        }
        return True

    @staticmethod
    def _retemplate(service: Service | None, template: Template) -> Service:
        if service is None:
            return Service(template)
        service.template = template
        return service

    @staticmethod
    def _has_live_workers(state: GraphState) -> bool:
        return any(
            pod.live and pod.template.is_worker
            for service in state.services.values()
            for pod in service.pods.values()
        )

    # -- settling ---------------------------------------------------------------------------

    def _settle(self, now: float) -> None:
        progressed = True
        while progressed:
            progressed = False
            while self._stale:
                key = next(iter(self._stale))
                del self._stale[key]
                state = self.graphs.get(key)
                if state is not None:
                    progressed |= self._reconcile(state, now)
            progressed |= self._schedule_pending(now)
            for key in list(self._rolling):
                progressed |= self._make_room(self.graphs[key], now)
            if progressed:
                # What moved may let a rollout retire more of its old pods.
                self._stale.update(dict.fromkeys(self._rolling))
        for key in self._dirty:
            state = self.graphs.get(key)
            if state is not None:
                self._refresh_status(state, now)
        self._dirty.clear()

    def _reconcile(self, state: GraphState, now: float) -> bool:
        changed = False
        for service in state.services.values():
            changed |= self._reconcile_service(state, service, now)
        if any(service.generations()[1] for service in state.services.values()):
            self._rolling[state.graph.key] = None
        else:
            self._rolling.pop(state.graph.key, None)
        return changed

    def _reconcile_service(self, state: GraphState, service: Service, now: float) -> bool:
        desired = service.template.replicas
        new, old = service.generations()
        changed = False
        for pod in [p for p in old if not p.scheduled]:
            # An outdated pod that has not started never will.
            self._remove(pod)
            changed = True
        old = [p for p in old if p.scheduled]
        if len(new) < desired:
            for _ in range(desired - len(new)):
                self._create(state, service, now)
            changed = True
        elif len(new) > desired:
            new.sort(key=SimPod.rank)
            for pod in new[: len(new) - desired]:
                self._remove(pod)
            new = new[len(new) - desired :]
            changed = True
        # Old pods that ready new ones have replaced go; while none are ready, all old stay.
        keep_old = max(0, desired - sum(1 for p in new if p.ready))
        if len(old) > keep_old:
            old.sort(key=SimPod.rank)
            for pod in old[: len(old) - keep_old]:
                self._remove(pod)
            changed = True
        return changed

    def _schedule_pending(self, now: float) -> bool:
        # Only pods never tried, unless devices were freed or nodes changed since the last try.
        candidates = list((self._pending if self._rescan else self._fresh).values())
        self._rescan = False
        self._fresh.clear()
        bound = False
        for pod in candidates:
            if pod.key not in self._pending:
                continue
            annotations = self.graphs[pod.graph_key].graph.annotations
            if pod.owner.surge_spent(annotations):
                self._set_reason(pod, pod.owner.surge_reason(annotations))
                continue
            node = self.hw.first_fit(pod.template.gpu_request, pod.template.selection)
            if node is None:
                self._set_reason(pod, self._unschedulable(pod.template))
            else:
                self._bind(pod, node, now)
                bound = True
        return bound

    def _make_room(self, state: GraphState, now: float) -> bool:
        progressed = False
        for service in state.services.values():
            progressed |= self._make_room_for(state, service, now)
        return progressed

    def _make_room_for(self, state: GraphState, service: Service, now: float) -> bool:
        """Retire old pods so waiting new ones get devices, within maxUnavailable.

        The budget is how many ready pods may go: ready - (desired - maxUnavailable). When it
        is spent, wait for starting pods to become ready. When nothing is starting either,
        waiting cannot help: one plan is carried out over budget if the whole new generation
        fits once the old is gone. This keeps a rollout whose new pods are larger than the
        old from deadlocking, without giving up old replicas for a generation that cannot run.
        """
        service.blocked = False
        new, old = service.generations()
        waiting = [p for p in new if not p.scheduled]
        if not waiting or not old:
            return False
        desired = service.template.replicas
        live = new + old
        budget = sum(1 for p in live if p.ready) - (desired - max_unavailable(desired))
        starting = any(p.scheduled and not p.ready for p in live)
        holders = {p.key: p for p in old if p.devices}
        progressed = False
        for pod in waiting:
            if service.surge_spent(state.graph.annotations):
                # No pod beyond replicas + surge may hold devices: an old one must go first.
                victim = service.retirable(budget)
                if victim is None:
                    service.blocked = not starting
                    break
                budget -= 1 if victim.ready else 0
                holders.pop(victim.key, None)
                self._remove(victim)
            node = self.hw.first_fit(pod.template.gpu_request, pod.template.selection)
            if node is None:
                plan = plan_room(
                    pod.template.gpu_request,
                    free_by_node={
                        n.name: len(n.free()) for n in self.hw.eligible(pod.template.selection)
                    },
                    holders=[self._holder(p) for p in holders.values()],
                )
                if plan is None:
                    service.blocked = True
                    break
                if plan.cost > budget and (starting or not self._could_finish(waiting, old)):
                    service.blocked = not starting
                    break
                for key in plan.victims:
                    self._remove(holders.pop(key))
                budget -= plan.cost
                node = self.hw.node(plan.node)
            self._bind(pod, node, now)
            progressed = True
            if pod.ready:
                budget += 1
            else:
                starting = True
        return progressed

    def _could_finish(self, waiting: list[SimPod], old: list[SimPod]) -> bool:
        selection = waiting[0].template.selection
        room = {n.name: len(n.free()) for n in self.hw.eligible(selection)}
        for pod in old:
            if pod.node_name in room:
                room[pod.node_name] += self.hw.allocatable_on(pod.node_name, pod.devices)
        pending = [p for p in waiting if not p.scheduled]
        need = waiting[0].template.gpu_request
        return fits_all(need, len(pending), room_by_node=room)

    def _holder(self, pod: SimPod) -> Holder:
        return Holder(
            key=pod.key,
            node=pod.node_name,
            frees=self.hw.allocatable_on(pod.node_name, pod.devices),
            ready=pod.ready,
            seq=pod.seq,
        )

    # -- pod lifecycle ----------------------------------------------------------------------

    def _create(self, state: GraphState, service: Service, now: float) -> None:
        prefix = f"{state.graph.name}-{service.name.lower()}-{service.template.key[:5]}"
        name = f"{prefix}-{service.counter}"
        while f"{state.graph.namespace}/{name}" in self.pods:
            service.counter += 1
            name = f"{prefix}-{service.counter}"
        service.counter += 1
        pod = SimPod(
            name=name,
            owner=service,
            graph=state.graph,
            seq=next(self._seq),
            created_unix=self.unix_offset + now,
            instant=self._instant,
        )
        self.pods[pod.key] = pod
        service.pods[pod.name] = pod
        self._pending[pod.key] = pod
        self._fresh[pod.key] = pod
        self._changed(pod)

    def _bind(self, pod: SimPod, node: SimNode, now: float) -> None:
        pod.devices = self.hw.allocate(node, need=pod.template.gpu_request, holder=pod.key)
        pod.node_name = node.name
        pod.phase = PHASE_RUNNING
        self._pending.pop(pod.key, None)
        self._fresh.pop(pod.key, None)
        delay = 0.0 if pod.instant else self.ready_after
        if delay > 0:
            pod.ready_at = now + delay
            pod.reason = REASON_STARTING
            heapq.heappush(self._timers, (pod.ready_at, next(self._seq), pod))
        else:
            self._make_ready(pod)
        self._changed(pod)

    def _make_ready(self, pod: SimPod) -> None:
        pod.ready, pod.ready_at, pod.reason = True, None, ""
        self._changed(pod)
        self._stale[pod.graph_key] = None

    def _awaits(self, pod: SimPod, due: float) -> bool:
        """Is this timer still the pod's? (Removed, failed or ready pods leave stale ones.)"""
        return self.pods.get(pod.key) is pod and pod.ready_at == due and pod.scheduled

    def _remove(self, pod: SimPod) -> None:
        self._release(pod)
        del self.pods[pod.key]
        pod.owner.pods.pop(pod.name, None)
        self._pending.pop(pod.key, None)
        self._fresh.pop(pod.key, None)
        self._touch()
        self._dirty[pod.graph_key] = None

    def _release(self, pod: SimPod) -> None:
        if pod.devices and self.hw.release(pod.devices):
            self._rescan = True
        pod.devices = ()

    def _set_reason(self, pod: SimPod, reason: str) -> None:
        if pod.reason != reason:
            pod.reason = reason
            self._changed(pod)

    def _unschedulable(self, template: Template) -> str:
        # The PodScheduled condition's reason and message, as kube-scheduler writes them.
        return "Unschedulable: " + self.hw.fit_error(template.gpu_request, template.selection)

    def _pod(self, namespace: str, name: str) -> SimPod:
        try:
            return self.pods[f"{namespace}/{name}"]
        except KeyError:
            raise KeyError(f"no pod {namespace}/{name} in the simulated cluster") from None

    def _changed(self, pod: SimPod) -> None:
        pod._view = None
        self._touch()
        self._dirty[pod.graph_key] = None

    def _touch(self) -> None:
        self.revision += 1

    # -- status -----------------------------------------------------------------------------

    def _refresh_status(self, state: GraphState, now: float) -> None:
        status = graph_status(
            generation=state.generation,
            services=[s.counts() for s in state.services.values()],
            rollout_started=state.rollout_started,
            previous=state.status,
            now_unix=self.unix_offset + now,
        )
        if status != state.status:
            state.status = status
            self._touch()
