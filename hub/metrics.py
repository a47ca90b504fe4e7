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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hub.admission import Decision


class HubMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.agents_connected = Gauge(
            "wingsmith_agents_connected", "Open agent streams", registry=self.registry
        )
        self.messages = Counter(
            "wingsmith_stream_messages",
            "Stream messages by direction and type",
            ["direction", "type"],
            registry=self.registry,
        )
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
        self.messages.labels(direction=direction, type=kind).inc()

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
