"""Wiring of the agent (hangar): the only module that knows every part of it.

An `Agent` joins a cluster backend (the simulated cluster, or Kubernetes), the node device
sources, the stream client, the reconciler and the observer, and runs four loops:
- the stream (agent/sync/client.py), which hands desired state to `handle_desired`;
- reconcile: on every desired change, and every `resync_s` to repair drift;
- observe: whenever the cluster changed (its revision moved) and every `node_poll_s`, send
  what changed as one batch;
- for the simulated cluster, its clock: advance it exactly when something is due.

Read-only mode (HANGAR_OPERATOR_READ_ONLY=true) still syncs and stores desired state and
reports everything, but the reconciler's plan is only logged, never executed, and the cluster
backend itself is opened read-only, so a mutating call cannot even be attempted.

Leadership (a DaemonSet: one agent per node, docs/daemonset.md): a node agent leads while it
holds the cluster's Lease (agent/kubernetes.py calls `set_leadership`) or, read-only, while it
holds the hub's grant; the hub fences a stale term. The leader also reports the nodes that left
the cluster (agent/departed.py), from the node list the hub sends with every grant.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import grpc
from opentelemetry import trace

from agent import __version__, execute, reconcile, tracing
from agent.backoff import Backoff
from agent.cluster import port
from agent.departed import DepartedNodes
from agent.desired import DesiredState
from agent.metrics import AgentMetrics
from agent.observe import NodeObservation, NodeSource, Observer
from agent.sync import convert
from agent.sync.client import StreamClient
from wingsmith.v1 import sync_pb2

log = logging.getLogger("wingsmith.agent")
T = TypeVar("T")
# How often the simulated cluster's clock looks for changes made from outside the agent (fault
# injection by tests and tools) when no timer is due: its own writes wake it at once.
SIM_IDLE_POLL_S = 5.0
# How soon a DGD deleted to be recreated is looked at again (until the old one is gone).
RECREATE_RETRY_S = 0.5
# A resync request after this long without one starts the resend backoff afresh.
RESYNC_QUIET_S = 60.0


@dataclass(frozen=True)
class AgentConfig:
    hub: str
    cluster_id: str
    token: str
    namespace: str = "wingsmith"
    read_only: bool = False
    images: Mapping[str, str] = field(default_factory=dict)
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    resync_s: float = 30.0
    node_poll_s: float = 10.0
    observe_min_interval_s: float = 0.05
    # The node this agent reports (a DaemonSet pod); empty: the whole cluster, which it also
    # reconciles without a Lease (the simulated cluster).
    node_name: str = ""
    # Cluster calls block (the Kubernetes client, NVML, the kubelet): run them in a thread.
    blocking_io: bool = False
    # The leader reports a node absent once its Node object has been gone this long.
    node_gone_grace_s: float = 30.0
    # NVML name -> device class, where the built-in table is not what the operator wants
    # (agent/devices/classes.py); also read off nodes' GPU labels for workers' node affinity.
    class_overrides: Mapping[str, str] = field(default_factory=dict)
    # HOST:PORT to serve /metrics on (agent/metrics.py); empty: none.
    metrics_listen: str = ""


class SimClock(Protocol):
    """What the agent needs of a simulated cluster to drive its time."""

    def advance(self) -> int: ...

    def next_due(self) -> float | None: ...


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        *,
        cluster: port.ClusterPort,
        nodes: Callable[[], Sequence[NodeSource]],
        channel: grpc.aio.Channel,
        sim: SimClock | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
        on_grant: Callable[[int], None] | None = None,
        on_fence: Callable[[int], None] | None = None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        """`on_grant(term)` and `on_fence(term)`, when given, hear of the hub's leadership
        grants and fences after the agent itself (the Kubernetes wiring: it brings up the
        watches before a grant is taken, and moves a fenced Lease on). Without `on_grant`, a
        read-only node agent leads as soon as the hub grants it."""
        self.config = config
        self.cluster = cluster
        self.desired = DesiredState()
        # The trace context of the last traced apply and the deployments it changed, until an
        # observation batch reporting on one of them carries it to the hub.
        self._trace_pending: tuple[tracing.Carrier, set[str]] | None = None
        # Measured calls (agent/metrics.py: --metrics-listen), when asked for.
        if metrics is None and config.metrics_listen:
            metrics = AgentMetrics(__version__)
        self.metrics = metrics
        self.metrics_port = 0
        if metrics is not None:
            nodes = metrics.node_sources(nodes)
        self.observer = Observer(cluster=cluster, nodes=nodes)
        self._sim = sim
        self._monotonic = monotonic
        # Set when the cluster may have changed: wakes the observer.
        self._changed = asyncio.Event()
        # Set after our own writes: the simulated cluster must react at once.
        self._sim_wake = asyncio.Event()
        self._reconcile_lock = asyncio.Lock()
        self.reconciles = 0
        self.applied = 0
        self.deleted = 0
        # An agent of a whole cluster leads; a node agent leads while it holds the Lease and
        # the hub has not fenced its term.
        self.leading = not config.node_name
        self.term = 0
        # The Lease term the last Hello announced (0: none); see `_on_connected`.
        self._hello_term = 0
        self._fenced_term = 0
        self._on_grant = on_grant
        self._on_fence = on_fence
        # Resending the full state when the hub asks (ResyncRequest): first within half a
        # second, up to 30 s apart while it keeps asking.
        self._resync_backoff = Backoff(base_s=0.5, cap_s=30.0)
        self._resync_due: asyncio.TimerHandle | None = None
        self._last_resync = -RESYNC_QUIET_S
        self.departed = DepartedNodes(own_node=config.node_name, grace_s=config.node_gone_grace_s)
        # Deployments whose DGD was deleted to be created again -> why (shown on them).
        self.recreating: dict[str, str] = {}
        # The DGD version last reported in a ClusterInfo on this stream ("": not yet).
        self._sent_dgd_version = ""
        self.client = StreamClient(
            channel=channel,
            token=config.token,
            hello=self._hello,
            on_desired=self.handle_desired,
            on_connected=self._on_connected,
            on_fence=self._fenced,
            on_grant=self._granted,
            on_resync=self._resync,
            backoff=backoff,
        )
        if metrics is not None:
            watch_stats = getattr(cluster, "watch_stats", None)
            if watch_stats is not None:  # the Kubernetes adapter's watch loops
                metrics.watch(watch_stats)
            metrics.connected.set_function(lambda: int(self.client.connected.is_set()))
            metrics.leading.set_function(lambda: int(self.leading))
            metrics.revision.set_function(lambda: self.desired.revision)

    async def run(self) -> None:
        mode = "read-only" if self.config.read_only else "managing"
        log.info(
            "agent %s for cluster %s (%s) -> %s",
            __version__,
            self.config.cluster_id,
            mode,
            self.config.hub,
        )
        server = None
        if self.metrics is not None and self.config.metrics_listen:
            host, _, port_text = self.config.metrics_listen.rpartition(":")
            server = self.metrics.serve(host.strip("[]") or "0.0.0.0", int(port_text))
            self.metrics_port = server.server_port
            log.info("metrics on %s:%d/metrics", host, self.metrics_port)
        tasks = [
            asyncio.create_task(self.client.run(), name="stream"),
            asyncio.create_task(self._resync_loop(), name="resync"),
            asyncio.create_task(self._observe_loop(), name="observe"),
        ]
        if self._sim is not None:
            tasks.append(asyncio.create_task(self._sim_loop(), name="sim-clock"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if server is not None:
                server.shutdown()
                server.server_close()

    # -- desired state ------------------------------------------------------------------------

    def _hello(self) -> sync_pb2.Hello:
        self._hello_term = self._leader_term()
        return sync_pb2.Hello(
            cluster_id=self.config.cluster_id,
            agent_version=__version__,
            store_epoch=self.desired.epoch,
            applied_revision=self.desired.revision,
            agent_instance=self.config.instance,
            read_only=self.config.read_only,
            node_name=self.config.node_name,
            leader_term=self._hello_term,
        )

    def _leader_term(self) -> int:
        """The Lease term a node agent leads with now; 0 when it does not lead."""
        return self.term if self.leading and self.config.node_name else 0

    def _on_connected(self, welcome: sync_pb2.Welcome) -> None:
        if self._leader_term() != self._hello_term:
            # The Lease was won or lost after the Hello was written and before the Welcome:
            # `set_leadership` could not tell the hub then (no stream), so tell it now, or
            # the hub would fence this leader's cluster state, or keep a lost lead.
            leadership = sync_pb2.Leadership(leading=self._leader_term() > 0, term=self.term)
            self.client.send(sync_pb2.AgentMessage(leadership=leadership))
        # Resend only what the hub does not hold as last sent (docs/stream.md).
        self.observer.resume(convert.held_observations(welcome))
        self._sent_dgd_version = ""
        self._changed.set()

    def _resync(self) -> None:
        """The hub could not store a batch of ours (its disk is full, its database unavailable):
        report everything again. Soon, but on a jittered backoff that grows while the hub keeps
        asking: a fleet must not resend its full state in a tight loop at a hub that cannot
        write."""
        if self._resync_due is not None:
            return  # one resend is already on its way: it carries everything
        now = self._monotonic()
        if now - self._last_resync > RESYNC_QUIET_S:
            self._resync_backoff.reset()
        self._last_resync = now
        delay = self._resync_backoff.next_delay()
        self._resync_due = asyncio.get_running_loop().call_later(delay, self._resend_everything)

    def _resend_everything(self) -> None:
        self._resync_due = None
        self.observer.reset()
        self._changed.set()

    async def handle_desired(self, message: sync_pb2.DesiredState) -> list[sync_pb2.Reject]:
        if not message.trace_context:
            return await self._handle_desired(message)
        # A traced change (agent/tracing.py): this delta's render and applies continue its
        # trace, and so does the first observation batch that reports on what it changed.
        with tracing.tracer().start_as_current_span(
            "apply desired",
            context=tracing.extracted(message.trace_context),
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "wingsmith.cluster": self.config.cluster_id,
                "wingsmith.revision": message.revision,
            },
        ):
            rejects = await self._handle_desired(message)
            carrier = tracing.current_carrier()
        ids = {spec.deployment_id for spec in message.upserts} | set(message.removals)
        if carrier is not None and ids:
            self._trace_pending = (carrier, ids)
        return rejects

    async def _handle_desired(self, message: sync_pb2.DesiredState) -> list[sync_pb2.Reject]:
        specs = [convert.deployment(spec) for spec in message.upserts]
        if message.snapshot:
            self.desired.replace(
                epoch=message.store_epoch,
                revision=message.revision,
                specs=specs,
                releases=message.releases,
            )
        else:
            self.desired.apply_delta(
                epoch=message.store_epoch,
                from_revision=message.from_revision,
                revision=message.revision,
                upserts=specs,
                removals=message.removals,
                releases=message.releases,
            )
        plan = await self.reconcile()
        changed = {spec.deployment_id for spec in specs}
        return [
            sync_pb2.Reject(
                revision=message.revision,
                deployment_id=failure.deployment_id,
                generation=failure.generation,
                error=failure.error,
            )
            for failure in plan.failures
            if message.snapshot or failure.deployment_id in changed
        ]

    # -- reconcile ----------------------------------------------------------------------------

    # -- leadership (DaemonSet: one pod reconciles) ------------------------------------------

    def set_leadership(self, leading: bool, term: int) -> None:
        """From the Lease elector (on the loop thread). A term the hub fenced never leads."""
        leading = leading and term > self._fenced_term
        if (leading, term) == (self.leading, self.term):
            return
        was_leading = self.leading
        self.leading, self.term = leading, term
        log.info("leadership: leading=%s term=%d", leading, term)
        self.client.send(
            sync_pb2.AgentMessage(leadership=sync_pb2.Leadership(leading=leading, term=term))
        )
        if leading and not was_leading:
            self._sent_dgd_version = ""
            self._changed.set()
            asyncio.get_running_loop().create_task(self.reconcile())
        if was_leading and not leading:
            self.observer.forget_cluster_level()
            self.departed.forget()

    def fence(self, term: int, reason: str) -> None:
        """The hub saw a newer leader: stop reconciling until this pod leads a newer term."""
        if not self.config.node_name:
            log.error("fenced as the whole-cluster agent (%s): another agent runs for it", reason)
        self._fenced_term = max(self._fenced_term, term)
        self.leading = False
        self.observer.forget_cluster_level()
        self.departed.forget()

    def _fenced(self, term: int, reason: str) -> None:
        self.fence(term, reason)
        if self._on_fence is not None:
            self._on_fence(term)

    def _granted(self, term: int, node_ids: Sequence[str]) -> None:
        """The hub made this session the leader (read-only: no Lease), or confirmed the Lease
        term it claimed; either way it named the nodes it holds for the cluster."""
        self.departed.learn(node_ids)
        if self._on_grant is not None:
            self._on_grant(term)
        elif self.config.read_only and self.config.node_name:
            self.set_leadership(True, term)

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self) -> reconcile.Plan:
        if not self.leading:
            return reconcile.Plan()
        async with self._reconcile_lock:
            self.reconciles += 1
            if self.metrics is not None:
                self.metrics.reconciles.inc()
            live = await self._io(self.cluster.list_dgds)
            nodes = await self._io(self.cluster.list_nodes)
            self.desired.settle(d.labels.get(port.LABEL_DEPLOYMENT_ID, "") for d in live)
            adapters = await self._io(self.cluster.list_scaling_adapters)
            with tracing.child("render"):
                plan = reconcile.plan(
                    self.desired.deployments,
                    live,
                    namespace=self.config.namespace,
                    images=self.config.images,
                    released=self.desired.released,
                    removed=self.desired.removed,
                    nodes=nodes,
                    class_overrides=self.config.class_overrides,
                    dgd_version=self.cluster.dgd_version,
                    adapters=adapters,
                )
            if self.config.read_only:
                execute.log_only(plan)
                return plan
            outcome = await execute.execute(plan, self.cluster, self._io, self.recreating)
            self.applied += outcome.applied
            self.deleted += outcome.deleted
            # Only what the hub still declares can be waiting to be created again.
            for deployment_id in [d for d in self.recreating if d not in self.desired.deployments]:
                del self.recreating[deployment_id]
            if any(d.recreate for d in plan.deletes):
                # Create it again as soon as the old one is gone (not at the next resync).
                loop = asyncio.get_running_loop()
                loop.call_later(RECREATE_RETRY_S, lambda: loop.create_task(self.reconcile()))
            if not plan.empty:
                self._changed.set()
                self._sim_wake.set()
            return reconcile.Plan(plan.applies, plan.deletes, tuple(outcome.failures), plan.scales)

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.resync_s)
            await self.reconcile()

    # -- observe ------------------------------------------------------------------------------

    async def _observe_loop(self) -> None:
        seen_revision = -1
        last_nodes = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=self.config.node_poll_s / 4)
            self._changed.clear()
            if not self.client.connected.is_set():
                continue
            revision = self.cluster.revision()
            now = self._monotonic()
            if revision == seen_revision and now - last_nodes < self.config.node_poll_s:
                continue
            seen_revision, last_nodes = revision, now
            await self._send_observations()
            # Coalesce bursts of cluster changes into one batch per interval.
            await asyncio.sleep(self.config.observe_min_interval_s)

    def _send_cluster_info(self) -> None:
        """The reconciling agent tells the hub which DGD version it writes, once per stream
        and leadership, and again when discovery finds it changed (docs/kubernetes.md)."""
        if not self.leading:
            return
        version = self.cluster.dgd_version
        if not version or version == self._sent_dgd_version:
            return
        info = sync_pb2.ClusterInfo(dgd_version=version)
        if self.client.send(sync_pb2.AgentMessage(cluster_info=info)):
            self._sent_dgd_version = version

    async def _send_observations(self) -> None:
        self._send_cluster_info()
        observations = await self._io(
            self.observer.collect,
            self.desired.deployments,
            cluster_level=self.leading,
            recreating=dict(self.recreating),
        )
        departed = self._departed_nodes()
        if departed:
            gone = tuple(
                NodeObservation(n, devices=(), allocations=(), absent=True) for n in departed
            )
            observations = replace(observations, nodes=(*observations.nodes, *gone))
        if observations.empty:
            return
        now_ns = time.time_ns()
        batch = convert.observation_batch(observations, seq=self.client.next_seq(), now_ns=now_ns)
        pending = self._trace_pending
        confirms = pending is not None and any(
            d.deployment_id in pending[1] for d in batch.deployments
        )
        if pending is not None and confirms:
            # The first report on a traced apply carries its trace back (agent/tracing.py).
            batch.trace_context.update(pending[0])
        if self.client.send(sync_pb2.AgentMessage(observations=batch)):
            self.observer.mark_sent(observations, at_ns=now_ns)
            if confirms:
                self._trace_pending = None
        else:
            self.observer.reset()  # not delivered: send everything once connected again
            self.departed.undelivered(departed)

    def _departed_nodes(self) -> list[str]:
        """A DaemonSet's leader: the nodes that left the cluster (agent/departed.py)."""
        if not (self.leading and self.config.node_name):
            return []
        present = [node.name for node in self.cluster.list_nodes()]
        return self.departed.collect(present, now=self._monotonic())

    async def _io(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a cluster call; in a worker thread when it may block (Kubernetes, NVML)."""
        if self.metrics is not None and getattr(call, "__self__", None) is self.cluster:
            with self.metrics.cluster_call(call.__name__):
                return await self._run(call, *args, **kwargs)
        return await self._run(call, *args, **kwargs)

    async def _run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.config.blocking_io:
            return await asyncio.to_thread(call, *args, **kwargs)
        return call(*args, **kwargs)

    def cluster_changed(self) -> None:
        """Something outside the agent's own calls changed the cluster (the sim's clock)."""
        self._changed.set()

    # -- the simulated cluster's clock --------------------------------------------------------

    async def _sim_loop(self) -> None:
        assert self._sim is not None
        while True:
            if self._sim.advance():
                self.cluster_changed()
            due = self._sim.next_due()
            delay = SIM_IDLE_POLL_S if due is None else max(0.0, due - self._monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(delay, SIM_IDLE_POLL_S)):
                    await self._sim_wake.wait()
            self._sim_wake.clear()
