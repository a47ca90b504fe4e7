from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.cluster.simulated.cluster import SimulatedCluster
from tests.unit.cluster.helpers import FakeClock

MakeCluster = Callable[..., SimulatedCluster]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_cluster(clock: FakeClock) -> MakeCluster:
    def make(
        spec: str = "nodes=2,gpus=8,class=H100-80GB", *, read_only: bool = False
    ) -> SimulatedCluster:
        return SimulatedCluster(
            spec, cluster_id="sim-a", clock=clock, read_only=read_only, unix_offset=0.0
        )

    return make
