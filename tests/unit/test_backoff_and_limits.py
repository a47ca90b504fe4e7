"""The one backoff rule of every retry loop (agent, kubelet client, CLI), and the handshake
token bucket (hub)."""

from __future__ import annotations

import random
from collections.abc import Callable

import grpc
import pytest

from agent.backoff import Backoff
from agent.kubelet.client import Limits, PodResourcesClient
from agent.sync.client import lost_status_note
from cli import client as cli_client
from hub.sync.ratelimit import TokenBucket


def _agent_backoff(base_s: float, cap_s: float) -> Callable[[int], float]:
    backoff = Backoff(base_s=base_s, cap_s=cap_s, rng=random.Random(7))
    return lambda n: backoff.next_delay()


def _kubelet_client(base_s: float, cap_s: float) -> Callable[[int], float]:
    limits = Limits(backoff_base_s=base_s, backoff_cap_s=cap_s)
    client = PodResourcesClient("/nonexistent/kubelet.sock", limits=limits, rng=random.Random(7))
    return client._backoff_delay


def _cli(base_s: float, cap_s: float) -> Callable[[int], float]:
    return lambda n: cli_client.jittered(min(cap_s, base_s * 2**n))


@pytest.mark.parametrize(
    "waits", [_agent_backoff, _kubelet_client, _cli], ids=["agent", "kubelet", "cli"]
)
def test_every_retry_loop_waits_by_one_rule_half_certain_half_jittered(
    waits: Callable[[float, float], Callable[[int], float]],
) -> None:
    delay = waits(0.5, 4.0)
    delays = [delay(n) for n in range(12)]
    ceilings = [min(4.0, 0.5 * 2**n) for n in range(12)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert len(set(delays)) == len(delays), "jittered, not a fixed schedule"


def test_the_backoff_grows_to_its_cap_and_starts_over_after_a_success() -> None:
    backoff = Backoff(base_s=0.5, cap_s=4.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(40)]
    assert min(delays[3:]) >= 2.0 and max(delays) <= 4.0
    backoff.reset()
    assert 0.25 <= backoff.next_delay() <= 0.5


def test_a_backoff_needs_a_base_within_its_cap() -> None:
    with pytest.raises(ValueError, match="0 < base"):
        Backoff(base_s=5.0, cap_s=1.0)


def test_the_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate_per_s=10, burst=3, clock=lambda: now[0])
    assert [bucket.try_take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.1
    assert bucket.try_take() is True
    assert bucket.try_take() is False
    now[0] += 100
    assert sum(bucket.try_take() for _ in range(10)) == 3, "never more than the burst"


def test_a_status_grpc_made_up_itself_is_not_logged_as_the_hubs() -> None:
    def error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)

    made_up = lost_status_note(error(grpc.StatusCode.INTERNAL, "Internal error from Core"))
    assert "grpc's own status" in made_up and "the next attempt shows it" in made_up
    assert lost_status_note(error(grpc.StatusCode.INTERNAL, "the hub failed")) == ""
    assert lost_status_note(error(grpc.StatusCode.UNAUTHENTICATED, "invalid cluster token")) == ""
