"""A fake clock and a driver loop for simulated clusters (not builders: they act, not build)."""

from __future__ import annotations

from collections.abc import Callable

from agent.cluster.port import Pod
from agent.cluster.simulated.cluster import SimulatedCluster


class FakeClock:
    """A monotonic clock that moves only when told; counts its reads."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


def drive(
    cluster: SimulatedCluster,
    clock: FakeClock,
    *,
    max_steps: int = 1000,
    each: Callable[[SimulatedCluster], None] = lambda _: None,
) -> int:
    """Jump the clock to each next_due() and advance until nothing is due; returns steps."""
    for step in range(max_steps):
        due = cluster.next_due()
        if due is None:
            return step
        assert due >= clock.now, "next_due() went back in time"
        clock.now = due
        cluster.advance()
        each(cluster)
    raise AssertionError(f"still busy after {max_steps} steps")


def pods_of(cluster: SimulatedCluster, service: str = "") -> list[Pod]:
    """Live pods (not Failed), optionally of one service (by its Dynamo component label)."""
    return [
        p
        for p in cluster.list_pods()
        if p.phase != "Failed"
        and (not service or p.labels.get("nvidia.com/dynamo-component") == service)
    ]


def gpus_in_use(cluster: SimulatedCluster) -> int:
    return sum(p.gpu_request for p in cluster.list_pods() if p.phase == "Running")
