"""Rate limits: the client stays under the kubelet's budget and rides out RESOURCE_EXHAUSTED.

The fake kubelet's limiter and the client's token bucket run on one fake clock that moves only
when the client sleeps, so "how fast" is counted, never timed.
"""

from __future__ import annotations

import pytest

from agent.kubelet.client import Limits, TokenBucket
from agent.kubelet.errors import KubeletRateLimited
from tests.unit.kubelet.conftest import MakeClient
from tests.unit.kubelet.fake_kubelet import FakeClock, FakeKubelet


@pytest.mark.parametrize(
    ("server_rate", "server_burst"),
    [(100.0, 10), (10.0, 5)],
    ids=["the kubelet's budget", "a budget as tight as the client's own limit"],
)
def test_a_burst_of_calls_never_exceeds_the_kubelets_budget(
    kubelet: FakeKubelet,
    make_client: MakeClient,
    clock: FakeClock,
    server_rate: float,
    server_burst: int,
) -> None:
    kubelet.limit(rate_per_s=server_rate, burst=server_burst, clock=clock)
    client = make_client(limits=Limits(rate_per_s=10.0, burst=5, retries=0))

    for _ in range(60):
        client.list()

    assert kubelet.rejected == 0
    assert len(kubelet.calls) == 60


def test_without_the_clients_own_limit_the_same_burst_is_rejected(
    kubelet: FakeKubelet, make_client: MakeClient, clock: FakeClock
) -> None:
    kubelet.limit(rate_per_s=100.0, burst=10, clock=clock)
    client = make_client(limits=Limits(rate_per_s=1e9, burst=1000, retries=0))

    with pytest.raises(KubeletRateLimited):
        for _ in range(60):
            client.list()

    assert kubelet.rejected == 1


def test_resource_exhausted_is_retried_with_growing_backoff_until_it_passes(
    kubelet: FakeKubelet, make_client: MakeClient, clock: FakeClock
) -> None:
    kubelet.exhaust_next(3)
    client = make_client(limits=Limits(backoff_base_s=0.1, backoff_cap_s=10.0, retries=4))

    assert client.list() == []

    assert len(kubelet.calls) == 4
    assert len(clock.sleeps) == 3
    for attempt, delay in enumerate(clock.sleeps):
        ceiling = 0.1 * 2**attempt
        assert ceiling / 2 <= delay <= ceiling


def test_persistent_resource_exhausted_raises_rate_limited_after_bounded_attempts(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    kubelet.exhaust_next(100)
    client = make_client(limits=Limits(retries=3))

    with pytest.raises(KubeletRateLimited) as raised:
        client.allocatable()

    assert (raised.value.method, raised.value.attempts) == ("GetAllocatableResources", 4)
    assert len(kubelet.calls) == 4


def test_backoff_is_capped(kubelet: FakeKubelet, make_client: MakeClient, clock: FakeClock) -> None:
    kubelet.exhaust_next(100)
    client = make_client(limits=Limits(backoff_base_s=0.5, backoff_cap_s=1.0, retries=6))

    with pytest.raises(KubeletRateLimited):
        client.list()

    assert max(clock.sleeps) <= 1.0


def test_the_token_bucket_allows_a_burst_then_the_rate(clock: FakeClock) -> None:
    bucket = TokenBucket(rate_per_s=10.0, burst=3, clock=clock, sleep=clock.sleep)

    for _ in range(3):
        bucket.take()
    assert clock.sleeps == []

    bucket.take()
    assert clock.sleeps == [pytest.approx(0.1)]

    clock.sleep(100.0)
    clock.sleeps.clear()
    for _ in range(4):
        bucket.take()
    assert clock.sleeps == [pytest.approx(0.1)], "idle time buys at most one burst"
