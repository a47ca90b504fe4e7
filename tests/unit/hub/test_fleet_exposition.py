"""The hub's /metrics body: the fleet's per-cluster series rendered once per read of the fleet
(hub/metrics/registry.py `exposition`), the same samples as the registry's own `collect` gives, in
both formats; the ages move with the clock at every scrape, the rest only with a new read."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from hub.metrics import HubMetrics, exposition
from hub.model import Capacity, QuotaUsage
from hub.service.fleet import ClusterState, FleetState, ProjectClassState, Waiting

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def _state(applied: int) -> FleetState:
    clusters = tuple(
        ClusterState(
            cluster_id=f"c{i}",
            connected=i % 2 == 0,
            last_seen=1000.0 + i if i % 3 else None,
            stale=i == 4,
            desired_revision=7,
            applied_revision=applied,
            leader_term=i,
            capacity={"H100": Capacity(64, 32, 1, 2), "A100": Capacity(8, 0, 0, 0)},
        )
        for i in range(6)
    )
    waiting = {"insufficient_quota": Waiting(deployments=2, devices=8, oldest_since=900.0)}
    projects = (ProjectClassState("p", "H100", QuotaUsage(1, 2, 3), waiting),)
    return FleetState(clusters=clusters, projects=projects, read_at=0.0)


class _Fleet:
    def __init__(self) -> None:
        self.reads = 0
        self.applied = 3
        self.now = 2000.0

    def read(self) -> FleetState:
        self.reads += 1
        return _state(self.applied)


def _wingsmith(body: bytes) -> list[str]:
    """The body's lines of the hub's own families (process and runtime samples move by
    themselves between two renderings)."""
    return sorted(
        line for line in body.decode().splitlines() if "wingsmith_" in line or line == "# EOF"
    )


@pytest.mark.parametrize(
    ("accept", "reference"), [("", generate_latest), (OPENMETRICS, generate_openmetrics)]
)
def test_exposition_is_what_the_registry_collects(accept: str, reference: object) -> None:
    fleet = _Fleet()
    metrics = HubMetrics("test")
    metrics.stream_opened("c1")
    metrics.watch_fleet(fleet.read, clock=lambda: fleet.now, min_interval_s=3600)

    body, content_type = exposition(metrics.registry, accept)
    assert callable(reference)
    assert _wingsmith(body) == _wingsmith(reference(metrics.registry))
    assert ("openmetrics" in content_type) == bool(accept)
    if accept:
        assert body.endswith(b"# EOF\n") and body.count(b"# EOF") == 1
    assert 'wingsmith_cluster_applied_revision{cluster="c2"} 3.0' in body.decode()
    assert 'wingsmith_cluster_last_seen_age_seconds{cluster="c2"} 998.0' in body.decode()


def test_ages_move_at_each_scrape_the_rest_with_a_new_read() -> None:
    fleet = _Fleet()
    metrics = HubMetrics("test")
    metrics.watch_fleet(fleet.read, clock=lambda: fleet.now, min_interval_s=3600)
    exposition(metrics.registry, "")
    fleet.applied, fleet.now = 6, 2010.0  # the store moved; no new read is due yet
    body = exposition(metrics.registry, "")[0].decode()
    assert fleet.reads == 1
    assert 'wingsmith_cluster_applied_revision{cluster="c2"} 3.0' in body
    assert 'wingsmith_cluster_last_seen_age_seconds{cluster="c2"} 1008.0' in body
    oldest = (
        'wingsmith_pending_oldest_age_seconds{device_class="H100",project="p",'
        'reason="insufficient_quota"} 1110.0'
    )
    assert oldest in body

    fresh = HubMetrics("test")
    fresh.watch_fleet(fleet.read, clock=lambda: fleet.now, min_interval_s=0)
    assert 'wingsmith_cluster_applied_revision{cluster="c2"} 6.0' in (
        exposition(fresh.registry, "")[0].decode()
    )


def test_the_fleet_is_rendered_once_per_read_not_per_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The per-cluster families are built once per read of the fleet (then served as the
    text rendered for it): a scrape of a large fleet otherwise costs O(clusters) of CPU in
    the GIL the event loop needs (0.6 s at 10,000 clusters, docs/benchmark.md)."""
    import hub.metrics.fleet as metrics_module

    built: list[int] = []
    original = metrics_module._cluster_families

    def counted(*args: object, **kwargs: object) -> object:
        built.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(metrics_module, "_cluster_families", counted)
    fleet = _Fleet()
    metrics = HubMetrics("test")
    metrics.watch_fleet(fleet.read, clock=lambda: fleet.now, min_interval_s=3600)
    for accept in ("", "", "", OPENMETRICS, OPENMETRICS):
        exposition(metrics.registry, accept)
    assert fleet.reads == 1
    assert len(built) == 2  # once per format
