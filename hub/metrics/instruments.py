"""The hub's own instruments: the counters, gauges and histograms fed per stream message, per
admission decision, per call of the edges and per store transaction (`HubMetrics`, the hooks
the service layer and the edges call), on the hub's registry (registry.py), with the fleet's
collectors (fleet.py) and the store timing (timing.py) attached.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Mapping, Sequence

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from hub.admission import Decision
from hub.metrics.fleet import _FleetCollector, _PhaseCollector
from hub.metrics.registry import _HubRegistry
from hub.metrics.timing import TimedStore
from hub.service.context import AdmissionWait
from hub.service.fleet import FleetState
from hub.store.port import Store

# Counters and histograms export no `*_created` sample: one series less per child, and
# promtool's conventions (a timestamp nobody alerts on).
disable_created_metrics()  # type: ignore[no-untyped-call]

# Admission waits run from seconds to days (Kueue's buckets, widened).
WAIT_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class HubMetrics:
    def __init__(self, version: str = "") -> None:
        self.registry = _HubRegistry()
        # The process (CPU, memory, open files) and the interpreter (GC, version), per hub.
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        Gauge(
            "wingsmith_build_info",
            "The hub's version and Python's (always 1)",
            ["version", "python_version"],
            registry=self.registry,
        ).labels(version=version, python_version=platform.python_version()).set(1)
        self.stream_opens = Counter(
            "wingsmith_cluster_stream_opens",
            "Agent streams this hub opened per cluster (reconnects: its rate)",
            ["cluster"],
            registry=self.registry,
        )
        self.admission_wait = Histogram(
            "wingsmith_admission_wait_seconds",
            "From when a deployment started waiting until admission gave it replicas",
            ["project", "device_class"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.http_requests = Counter(
            "wingsmith_http_requests",
            "HTTP requests by route template, method and status code",
            ["route", "method", "code"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "wingsmith_http_request_duration_seconds",
            "HTTP request latency by route template and method",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.grpc_handled = Counter(
            "wingsmith_grpc_server_handled",
            "gRPC calls completed by service, method and status code",
            ["grpc_service", "grpc_method", "grpc_code"],
            registry=self.registry,
        )
        self.grpc_handling = Histogram(
            "wingsmith_grpc_server_handling_seconds",
            "Latency of unary gRPC calls by service and method",
            ["grpc_service", "grpc_method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.transaction_seconds = Histogram(
            "wingsmith_store_transaction_seconds",
            "Store transactions from begin to commit or rollback, by kind (read or write)",
            ["kind"],
            buckets=STORE_BUCKETS,
            registry=self.registry,
        )
        self.lock_wait = Histogram(
            "wingsmith_store_lock_wait_seconds",
            "Time a write transaction waited for the store's write lock",
            buckets=STORE_BUCKETS,
            registry=self.registry,
        )
        self.agents_connected = Gauge(
            "wingsmith_agents_connected", "Open agent streams", registry=self.registry
        )
        self.messages = Counter(
            "wingsmith_stream_messages",
            "Stream messages by direction and type",
            ["direction", "type"],
            registry=self.registry,
        )
        self._message_children: dict[tuple[str, str], Counter] = {}
        self.desired_specs = Counter(
            "wingsmith_desired_deployments_sent",
            "Deployment specs sent to agents",
            ["kind"],
            registry=self.registry,
        )
        self.desired_bytes = Counter(
            "wingsmith_desired_bytes_sent", "Bytes of desired state sent", registry=self.registry
        )
        self.admission = Counter(
            "wingsmith_admission_decisions",
            "Admission decisions that changed a deployment's outcome, by result and reason",
            ["result", "reason"],
            registry=self.registry,
        )
        self.evaluations = Counter(
            "wingsmith_admission_evaluations",
            "Deployments evaluated by admission passes (changed or not), by result and reason",
            ["result", "reason"],
            registry=self.registry,
        )
        self.delivery = Histogram(
            "wingsmith_desired_delivery_seconds",
            "From a commit changing a cluster's desired state until its stream took the delta",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30),
            registry=self.registry,
        )
        self.backlog = Gauge(
            "wingsmith_observation_backlog", "Observation batches waiting", registry=self.registry
        )
        self.records = Counter(
            "wingsmith_observation_records",
            "Observation records persisted (reports, replicas, nodes, devices, allocations)",
            registry=self.registry,
        )
        self.batches = Counter(
            "wingsmith_observation_batches",
            "Observation batches ingested",
            registry=self.registry,
        )
        self.device_refusals = Counter(
            "wingsmith_device_reports_refused",
            "Reported devices and allocations not stored because they contradict what the hub"
            " knows, by cluster and kind (device_bound: a UUID another node verified first;"
            " foreign_allocation: a device id that is not one of the reporting node's)",
            ["cluster", "kind"],
            registry=self.registry,
        )
        self.clusters_behind = Gauge(
            "wingsmith_clusters_behind",
            "Clusters whose agent has not applied the latest desired revision",
            registry=self.registry,
        )

    # SyncMetrics
    def message(self, *, direction: str, kind: str) -> None:
        # Every stream message of every agent passes here, on the event loop: the child is
        # looked up once per (direction, type), not validated and locked at each message.
        child = self._message_children.get((direction, kind))
        if child is None:
            child = self._message_children[(direction, kind)] = self.messages.labels(
                direction=direction, type=kind
            )
        child.inc()

    def desired_sent(self, *, snapshot: bool, deployments: int, removals: int, size: int) -> None:
        kind = "snapshot" if snapshot else "delta"
        self.desired_specs.labels(kind=kind).inc(deployments + removals)
        self.desired_bytes.inc(size)

    def desired_delivered(self, seconds: float) -> None:
        self.delivery.observe(seconds)

    # service Hooks
    def admission_decided(self, decisions: Sequence[Decision]) -> None:
        for decision in decisions:
            if decision.waiting:
                result = "waiting"
            elif decision.admitted_replicas == 0:
                result = "released"
            else:
                result = "admitted"
            labels = {"result": result, "reason": decision.reason or "none"}
            self.evaluations.labels(**labels).inc()
            if decision.changed:
                self.admission.labels(**labels).inc()

    def admission_waited(self, waits: Sequence[AdmissionWait]) -> None:
        for wait in waits:
            self.admission_wait.labels(
                project=wait.project, device_class=wait.device_class
            ).observe(wait.seconds)

    def stream_opened(self, cluster_id: str) -> None:
        self.stream_opens.labels(cluster=cluster_id).inc()

    # edges
    def http_request(self, *, route: str, method: str, code: int, seconds: float) -> None:
        self.http_requests.labels(route=route, method=method, code=str(code)).inc()
        self.http_duration.labels(route=route, method=method).observe(seconds)

    def grpc_call(self, *, service: str, method: str, code: str, seconds: float | None) -> None:
        self.grpc_handled.labels(grpc_service=service, grpc_method=method, grpc_code=code).inc()
        if seconds is not None:
            self.grpc_handling.labels(grpc_service=service, grpc_method=method).observe(seconds)

    def timed(self, store: Store) -> Store:
        """`store`, its transactions timed."""
        return TimedStore(store, self)

    def watch_fleet(
        self,
        read: Callable[[], FleetState],
        *,
        clock: Callable[[], float],
        min_interval_s: float = 5.0,
    ) -> None:
        # Not registered: the registry yields it last and `exposition` renders it once a read.
        self.registry.fleet = _FleetCollector(read, clock=clock, min_interval_s=min_interval_s)

    def ingested(self, *, batches: int, records: int) -> None:
        self.batches.inc(batches)
        self.records.inc(records)

    def refused_devices(self, *, cluster_id: str, kind: str) -> None:
        self.device_refusals.labels(cluster=cluster_id, kind=kind).inc()

    def watch_phases(
        self, count: Callable[[], Mapping[str, int]], *, min_interval_s: float = 15.0
    ) -> None:
        self.registry.register(_PhaseCollector(count, min_interval_s=min_interval_s))
