"""The agent's Prometheus metrics (`wingsmith agent --metrics-listen HOST:PORT`; off unless
given), on a registry of its own:

- wingsmith_agent_cluster_calls_total{call, outcome} and
  wingsmith_agent_cluster_call_seconds{call}: every call to the cluster's API through the
  agent's port (list, apply, delete, scale; the Kubernetes adapter or the simulated cluster),
  `call` one of the port's methods, outcome ok | error;
- wingsmith_agent_node_reads_total{source, outcome} and wingsmith_agent_node_read_seconds
  {source}: this node's NVML inventory reads (source nvml; error: a degraded reading) and
  kubelet PodResources calls (source kubelet);
- wingsmith_agent_watch_lists_total, _relists_total, _watches_total, _failures_total{watch}
  and wingsmith_agent_watch_events_total{watch, type}: the Kubernetes adapter's list-then-watch
  loops (agent/cluster/kube/watch.py), `watch` naming the kind (and version, namespace);
- wingsmith_agent_connected (1 while its stream to the hub is up), wingsmith_agent_leading (1
  while it reconciles the cluster), wingsmith_agent_desired_revision (the revision it holds),
  wingsmith_agent_reconciles_total;
- process and Python runtime collectors, wingsmith_agent_build_info{version, python_version}.

Labels are bounded by the code (the port's methods, two sources, two outcomes). No
`*_created` samples. The same exposition rules as the hub's (docs/operations.md
"Monitoring"): text 0.0.4, OpenMetrics when asked.
"""

from __future__ import annotations

import builtins
import platform
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from agent.cluster import port
from agent.cluster.kube.watch import WatchStats
from agent.devices.model import DeviceInventory, Inventory
from agent.kubelet.model import Allocatable, PodDevices, PodResourcesSource
from agent.observe import NodeSource

disable_created_metrics()  # type: ignore[no-untyped-call]

T = TypeVar("T")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# The cluster port's methods: the only values of the `call` label.
CALLS = frozenset(name for name in vars(port.ClusterPort) if not name.startswith("_"))


class AgentMetrics:
    def __init__(self, version: str = "") -> None:
        self.registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        Gauge(
            "wingsmith_agent_build_info",
            "The agent's version and Python's (always 1)",
            ["version", "python_version"],
            registry=self.registry,
        ).labels(version=version, python_version=platform.python_version()).set(1)
        self.calls = Counter(
            "wingsmith_agent_cluster_calls",
            "Calls to the cluster's API by the port's method and outcome",
            ["call", "outcome"],
            registry=self.registry,
        )
        self.call_seconds = Histogram(
            "wingsmith_agent_cluster_call_seconds",
            "Latency of calls to the cluster's API by the port's method",
            ["call"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.node_reads = Counter(
            "wingsmith_agent_node_reads",
            "Reads of this node's devices: NVML inventory and kubelet PodResources, by outcome",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.node_read_seconds = Histogram(
            "wingsmith_agent_node_read_seconds",
            "Latency of reads of this node's devices by source",
            ["source"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.connected = Gauge(
            "wingsmith_agent_connected",
            "1 while the stream to the hub is up",
            registry=self.registry,
        )
        self.leading = Gauge(
            "wingsmith_agent_leading",
            "1 while this agent reconciles the cluster",
            registry=self.registry,
        )
        self.revision = Gauge(
            "wingsmith_agent_desired_revision",
            "The desired-state revision the agent holds",
            registry=self.registry,
        )
        self.reconciles = Counter(
            "wingsmith_agent_reconciles", "Reconcile passes", registry=self.registry
        )

    @contextmanager
    def cluster_call(self, name: str) -> Iterator[None]:
        call = name if name in CALLS else "other"
        start = time.perf_counter()
        outcome = "error"
        try:
            yield
            outcome = "ok"
        finally:
            self.calls.labels(call=call, outcome=outcome).inc()
            self.call_seconds.labels(call=call).observe(time.perf_counter() - start)

    def node_sources(
        self, nodes: Callable[[], Sequence[NodeSource]]
    ) -> Callable[[], list[NodeSource]]:
        """`nodes`, each source's NVML and kubelet reads measured."""

        def measured() -> list[NodeSource]:
            return [
                replace(
                    s,
                    inventory=_Inventory(s.inventory, self),
                    kubelet=_Kubelet(s.kubelet, self),
                )
                for s in nodes()
            ]

        return measured

    def read(self, source: str, call: Callable[[], T], failed: Callable[[T], bool]) -> T:
        start = time.perf_counter()
        outcome = "error"
        try:
            result = call()
            outcome = "error" if failed(result) else "ok"
            return result
        finally:
            self.node_reads.labels(source=source, outcome=outcome).inc()
            self.node_read_seconds.labels(source=source).observe(time.perf_counter() - start)

    def watch(self, stats: Callable[[], Mapping[str, WatchStats]]) -> None:
        """Export the watchers' counts that `stats` reads (the Kubernetes adapter's)."""
        self.registry.register(_WatchCollector(stats))

    def serve(self, host: str, port_number: int) -> Any:
        """Serve /metrics on HOST:PORT in a thread of its own; returns the server (its
        `server_port` the bound port, `shutdown()` stops it)."""
        server, _ = start_http_server(port_number, addr=host, registry=self.registry)
        return server


class _Inventory:
    def __init__(self, inner: DeviceInventory, metrics: AgentMetrics) -> None:
        self._inner, self._metrics = inner, metrics

    def read(self) -> Inventory:
        return self._metrics.read("nvml", self._inner.read, lambda i: bool(i.error))


class _Kubelet:
    def __init__(self, inner: PodResourcesSource, metrics: AgentMetrics) -> None:
        self._inner, self._metrics = inner, metrics

    def list(self) -> builtins.list[PodDevices]:
        return self._metrics.read("kubelet", self._inner.list, lambda _: False)

    def allocatable(self) -> builtins.list[Allocatable]:
        return self._metrics.read("kubelet", self._inner.allocatable, lambda _: False)


class _WatchCollector(Collector):
    def __init__(self, stats: Callable[[], Mapping[str, WatchStats]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily]:
        found = sorted(self._stats().items())
        for field in ("lists", "relists", "watches", "failures"):
            family = CounterMetricFamily(
                f"wingsmith_agent_watch_{field}",
                f"Kubernetes watch loops: {field}",
                labels=["watch"],
            )
            for name, stats in found:
                family.add_metric([name], getattr(stats, field))
            yield family
        events = CounterMetricFamily(
            "wingsmith_agent_watch_events",
            "Kubernetes watch events by type",
            labels=["watch", "type"],
        )
        for name, stats in found:
            for kind, n in sorted(stats.events.items()):
                events.add_metric([name, kind], n)
        yield events
