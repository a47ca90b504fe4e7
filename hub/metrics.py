"""The hub's Prometheus metrics, on a registry of its own (one per hub, so tests can run many).

- wingsmith_agents_connected: open agent streams;
- wingsmith_stream_messages_total{direction, type}: stream messages by type;
- wingsmith_desired_deployments_sent_total{kind}: deployment specs sent (kind: snapshot|delta),
  and wingsmith_desired_bytes_sent_total: their size, so a resend after a restart shows;
- wingsmith_admission_decisions_total{result, reason}: decisions that changed a deployment's
  outcome (admitted or surge replicas, or reason): result admitted | waiting | released. A
  deployment that keeps waiting for the same reason counts once, when it started waiting;
- wingsmith_admission_evaluations_total{result, reason}: every deployment an admission pass
  evaluated, changed or not (the work admission does; a waiting deployment counts once per
  pass that re-evaluates it);
- wingsmith_deployments{phase}: deployments by admission phase, computed at most every 15 s
  (a view of every deployment: at 10,000 of them that is seconds of the hub's loop);
- wingsmith_desired_delivery_seconds: from a commit that changed a cluster's desired state
  until a stream of that cluster was handed the delta and gRPC took it (the hub's share of
  how long an agent waits to hear of a change; a slow agent's coalesced delta counts from
  when it asked again);
- wingsmith_clusters_behind: clusters whose agent has not applied the latest revision;
- wingsmith_observation_records_total, wingsmith_observation_batches_total: persisted by ingest;
- wingsmith_observation_backlog: batches queued for ingest.

What an operator alerts on (docs/operations.md "Monitoring"; deploy/monitoring/ holds the rules):
- per cluster (label `cluster`), read from the store by hub/service/fleet.py at most every
  `fleet_interval_s`: wingsmith_cluster_connected, _stale, _last_seen_timestamp_seconds,
  _last_seen_age_seconds, _desired_revision, _applied_revision, _revision_lag, _leader_term,
  wingsmith_cluster_devices{cluster, device_class, state}; and counted by this hub:
  wingsmith_cluster_stream_opens_total{cluster};
- per project and class: wingsmith_project_quota_devices, _used_devices, _reserved_devices,
  wingsmith_pending_deployments / wingsmith_pending_devices / wingsmith_pending_oldest_age_seconds
  {project, device_class, reason} (Kueue's pending_workloads), and the histogram
  wingsmith_admission_wait_seconds{project, device_class} (Kueue's admission_wait_time_seconds);
- RED of the control API: wingsmith_http_requests_total{route, method, code},
  wingsmith_http_request_duration_seconds{route, method}, wingsmith_grpc_server_handled_total
  {grpc_service, grpc_method, grpc_code}, wingsmith_grpc_server_handling_seconds{grpc_service,
  grpc_method}; the store: wingsmith_store_transaction_seconds{kind},
  wingsmith_store_lock_wait_seconds;
- process and Python runtime collectors, wingsmith_build_info{version, python_version}.

Label values are bounded by the fleet, never by requests: cluster ids x device classes x 5
states; projects x classes x admission reasons; REST route templates (not paths) x methods x
codes; the ControlService's RPCs x gRPC codes. No `*_created` samples are exported.
"""

from __future__ import annotations

import contextlib
import platform
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from hub.admission import Decision
from hub.service.context import AdmissionWait
from hub.service.fleet import FleetState
from hub.store.port import Dialect, Listening, OnNotify, Store, Transaction

# Counters and histograms export no `*_created` sample: one series less per child, and
# promtool's conventions (a timestamp nobody alerts on).
disable_created_metrics()  # type: ignore[no-untyped-call]

DEVICE_STATES = ("verified", "allocated", "reserved", "free", "unusable")
# Admission waits run from seconds to days (Kueue's buckets, widened).
WAIT_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def exposition(registry: CollectorRegistry, accept: str) -> tuple[bytes, str]:
    """The registry's samples in the format the scraper asked for (`Accept`): OpenMetrics
    when it names application/openmetrics-text, else Prometheus text 0.0.4.

    A hub's registry serves its per-cluster series as text rendered once per read of the
    fleet (`_FleetCollector.rendered`): rendering them is what a scrape of a large fleet
    costs (13 series a cluster: 0.6 s of CPU at 10,000 clusters, holding the GIL the event
    loop needs), and they change only when the fleet is read again."""
    encode, content_type = choose_encoder(accept)
    if not isinstance(registry, _HubRegistry) or registry.fleet is None:
        return encode(registry), content_type
    pieces = [encode(_Collected(registry.own)), *registry.fleet.rendered(encode, content_type)]
    return _joined(pieces), content_type


_EOF = b"# EOF\n"


def _joined(pieces: Sequence[bytes]) -> bytes:
    """Expositions of disjoint families as one: OpenMetrics ends each with `# EOF`, which
    must come once, last."""
    if not pieces[-1].endswith(_EOF):
        return b"".join(pieces)
    return b"".join(p.removesuffix(_EOF) for p in pieces) + _EOF


class _Collected:
    """What an encoder needs of a registry: `collect`."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self.collect = collect


class _HubRegistry(CollectorRegistry):
    """The hub's registry: its own collectors, then the fleet's series (when watched), which
    `exposition` serves pre-rendered. `collect` yields all of them, as any registry's."""

    fleet: _FleetCollector | None = None

    def own(self) -> Iterable[Metric]:
        return super().collect()

    def collect(self) -> Iterator[Metric]:
        yield from super().collect()
        if self.fleet is not None:
            yield from self.fleet.collect()


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


class _PhaseCollector(Collector):
    """Deployments by phase; recomputed at most every `min_interval_s`, so scrapes stay cheap
    however large the fleet (phases are derived on read, hub/phases.py)."""

    def __init__(self, count: Callable[[], Mapping[str, int]], *, min_interval_s: float) -> None:
        self._count = count
        self._min_interval_s = min_interval_s
        self._cached: Mapping[str, int] = {}
        self._at = -float("inf")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = time.monotonic()
        if now - self._at >= self._min_interval_s:
            self._cached, self._at = self._count(), now
        family = GaugeMetricFamily(
            "wingsmith_deployments", "Deployments by admission phase", labels=["phase"]
        )
        for phase, n in sorted(self._cached.items()):
            family.add_metric([phase], n)
        yield family


class TimedStore:
    """A store whose transactions are timed (wingsmith_store_*): the service layer opens every
    transaction through `write` and `read`, so one place sees them all, on either store."""

    def __init__(self, store: Store, metrics: HubMetrics) -> None:
        self._store = store
        self._metrics = metrics
        self.url = store.url
        self.epoch = store.epoch
        self.schema_version = store.schema_version
        self.shared = store.shared

    @property
    def dialect(self) -> Dialect:
        return self._store.dialect

    @contextlib.contextmanager
    def write(self, clusters: Iterable[str] | None = None) -> Iterator[Transaction]:
        start = time.perf_counter()
        with self._timed("write", start), self._store.write(clusters) as conn:
            # Entered: SQLite's BEGIN IMMEDIATE (PostgreSQL's write locks) is held.
            self._metrics.lock_wait.observe(time.perf_counter() - start)
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Transaction]:
        with self._timed("read", time.perf_counter()), self._store.read() as conn:
            yield conn

    def listen(
        self, channels: Sequence[str], on_notify: OnNotify, on_reconnect: Callable[[], None]
    ) -> Listening:
        return self._store.listen(channels, on_notify, on_reconnect)

    def close(self) -> None:
        self._store.close()

    @contextlib.contextmanager
    def _timed(self, kind: str, start: float) -> Iterator[None]:
        try:
            yield
        finally:
            self._metrics.transaction_seconds.labels(kind=kind).observe(time.perf_counter() - start)


class _FleetCollector(Collector):
    """The per-cluster and per-project gauges, from one read of the fleet's state
    (hub/service/fleet.py) at most every `min_interval_s`, so scrapes stay cheap however large
    the fleet and however many scrapers. The ages (since a cluster was last heard, of the
    oldest waiting demand) are computed at each scrape from the last read (they overstate by
    at most the interval); everything else is rendered once per read and format."""

    def __init__(
        self, read: Callable[[], FleetState], *, clock: Callable[[], float], min_interval_s: float
    ) -> None:
        self._read = read
        self._clock = clock
        self._min_interval_s = min_interval_s
        self._cached: FleetState | None = None
        self._at = -float("inf")
        self._lock = threading.Lock()
        # content type -> the read's families but the ages, rendered (reset by a new read)
        self._rendered: dict[str, bytes] = {}

    def _state(self) -> FleetState:
        with self._lock:  # two scrapes at once read the store once
            now = time.monotonic()
            if self._cached is None or now - self._at >= self._min_interval_s:
                self._cached, self._at = self._read(), now
                self._rendered = {}
            return self._cached

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = self._state()
        yield from _cluster_families(state)
        yield from _project_families(state)
        yield from _age_families(state, now=self._clock())

    def rendered(self, encode: Callable[[Any], bytes], content_type: str) -> list[bytes]:
        """The fleet's families encoded: those of the last read as rendered for it (once per
        read and format), then the ages, rendered now."""
        state = self._state()
        with self._lock:
            static = self._rendered.get(content_type)
            if static is None or self._cached is not state:
                static = encode(
                    _Collected(lambda: (*_cluster_families(state), *_project_families(state)))
                )
                if self._cached is state:
                    self._rendered[content_type] = static
        ages = encode(_Collected(lambda: _age_families(state, now=self._clock())))
        return [static, ages]


def _family(name: str, documentation: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _cluster_families(state: FleetState) -> Iterator[GaugeMetricFamily]:
    c = ["cluster"]
    connected = _family("wingsmith_cluster_connected", "1 while an agent stream is open", c)
    stale = _family("wingsmith_cluster_stale", "1 when silent past the grace period", c)
    seen = _family(
        "wingsmith_cluster_last_seen_timestamp_seconds", "Unix time an agent was last heard", c
    )
    desired = _family("wingsmith_cluster_desired_revision", "Latest desired-state revision", c)
    applied = _family("wingsmith_cluster_applied_revision", "Revision its agent applied", c)
    lag = _family("wingsmith_cluster_revision_lag", "Desired minus applied revision", c)
    term = _family("wingsmith_cluster_leader_term", "Leader agent's term (Lease fencing)", c)
    devices = _family(
        "wingsmith_cluster_devices",
        "Devices by class and state: verified (healthy, NVML-verified) = allocated + reserved"
        " + free; unusable (unverified or unhealthy)",
        ["cluster", "device_class", "state"],
    )
    for cluster in state.clusters:
        key = [cluster.cluster_id]
        connected.add_metric(key, int(cluster.connected))
        stale.add_metric(key, int(cluster.stale))
        if cluster.last_seen is not None:
            seen.add_metric(key, cluster.last_seen)
        desired.add_metric(key, cluster.desired_revision)
        applied.add_metric(key, cluster.applied_revision)
        lag.add_metric(key, max(0, cluster.desired_revision - cluster.applied_revision))
        term.add_metric(key, cluster.leader_term)
        for device_class, cap in sorted(cluster.capacity.items()):
            counts = (cap.total, cap.allocated, cap.reserved, cap.free, cap.unusable)
            for name, n in zip(DEVICE_STATES, counts, strict=True):
                devices.add_metric([cluster.cluster_id, device_class, name], n)
    yield from (connected, stale, seen, desired, applied, lag, term, devices)


def _project_families(state: FleetState) -> Iterator[GaugeMetricFamily]:
    pc = ["project", "device_class"]
    pcr = [*pc, "reason"]
    quota = _family("wingsmith_project_quota_devices", "Quota of the class (devices)", pc)
    used = _family("wingsmith_project_used_devices", "Devices its pods hold", pc)
    reserved = _family(
        "wingsmith_project_reserved_devices", "Devices admitted but not yet held", pc
    )
    pending = _family(
        "wingsmith_pending_deployments", "Enabled deployments waiting for admission", pcr
    )
    wanted = _family("wingsmith_pending_devices", "Devices waiting deployments ask for", pcr)
    for p in state.projects:
        key = [p.project, p.device_class]
        quota.add_metric(key, p.usage.limit)
        used.add_metric(key, p.usage.used)
        reserved.add_metric(key, p.usage.reserved)
        for reason, waiting in sorted(p.waiting.items()):
            pending.add_metric([*key, reason], waiting.deployments)
            wanted.add_metric([*key, reason], waiting.devices)
    yield from (quota, used, reserved, pending, wanted)


def _age_families(state: FleetState, *, now: float) -> Iterator[GaugeMetricFamily]:
    """The families that move with the clock alone: computed at each scrape."""
    age = _family(
        "wingsmith_cluster_last_seen_age_seconds", "Seconds since last heard", ["cluster"]
    )
    for cluster in state.clusters:
        if cluster.last_seen is not None:
            age.add_metric([cluster.cluster_id], max(0.0, now - cluster.last_seen))
    oldest = _family(
        "wingsmith_pending_oldest_age_seconds",
        "How long the oldest waiting one has waited",
        ["project", "device_class", "reason"],
    )
    for p in state.projects:
        for reason, waiting in sorted(p.waiting.items()):
            oldest.add_metric(
                [p.project, p.device_class, reason], max(0.0, now - waiting.oldest_since)
            )
    yield from (age, oldest)
