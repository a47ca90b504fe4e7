"""The hub's registry and its exposition: its own collectors' samples encoded at each scrape,
the fleet's per-cluster series served as rendered once per read of the fleet (fleet.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder

if TYPE_CHECKING:
    from hub.metrics.fleet import _FleetCollector


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
