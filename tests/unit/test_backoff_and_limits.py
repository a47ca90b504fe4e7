"""Reconnect backoff (agent) and the handshake token bucket (hub)."""

from __future__ import annotations

import random

import grpc

from agent.sync.client import Backoff, lost_status_note
from hub.sync.ratelimit import TokenBucket


def test_backoff_is_full_jitter_exponential_capped_and_resets() -> None:
    backoff = Backoff(base_s=0.5, cap_s=4.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(12)]
    ceilings = [min(4.0, 0.5 * 2**n) for n in range(12)]
    assert all(0 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert max(delays[6:]) <= 4.0
    assert len(set(delays)) == len(delays), "jittered, not a fixed schedule"
    backoff.reset()
    assert backoff.next_delay() <= 0.5


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
