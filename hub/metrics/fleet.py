"""The gauges read from the store, per scrape but not at each: deployments by phase, and the
per-cluster and per-project series of one read of the fleet (hub/service/fleet.py), cached
for an interval and rendered once per read and format (what a scrape of a large fleet would
otherwise cost the event loop).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hub.metrics.registry import _Collected
from hub.service.fleet import FleetState

DEVICE_STATES = ("verified", "allocated", "reserved", "free", "unusable")


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
