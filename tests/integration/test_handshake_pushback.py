"""A herd of handshakes becomes a queue: refused agents are told when to come back.

The hub's handshake bucket refuses what is beyond its rate with RESOURCE_EXHAUSTED and a slot
(`wingsmith-retry-after-ms`), successive refusals getting successive slots; the agent's client
reads it and comes back then instead of backing off exponentially.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest

from agent.backoff import Backoff
from agent.sync.client import StreamClient
from hub.app import HubConfig, HubServer
from hub.service import clusters
from hub.sync.ratelimit import TokenBucket
from tests.harness import ADMIN_TOKEN, LoopThread
from tests.integration.rawstream import RawStream
from wingsmith.v1 import sync_pb2


async def no_rejects(message: sync_pb2.DesiredState) -> Sequence[sync_pb2.Reject]:
    return []


def test_refused_callers_get_successive_slots_at_the_bucket_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate_per_s=4, burst=1, clock=lambda: now[0])
    assert bucket.try_take() is True
    assert bucket.try_take() is False
    slots = [bucket.retry_after() for _ in range(4)]
    assert slots == pytest.approx([0.25, 0.5, 0.75, 1.0])
    now[0] = 0.5  # time passes: what is promised stays promised
    assert bucket.retry_after() == pytest.approx(0.75)


def test_a_refused_handshake_carries_its_slot_and_the_client_reads_it(tmp_path: Path) -> None:
    loop = LoopThread()
    server = HubServer(
        HubConfig(
            db_path=str(tmp_path / "hub.db"),
            grpc_listen="127.0.0.1:0",
            http_listen="127.0.0.1:0",
            admin_token=ADMIN_TOKEN,
            handshakes_per_s=2.0,
            handshake_burst=1,
        )
    )
    loop.run(server.start())
    streams: list[RawStream] = []
    try:
        assert server.ctx is not None
        _, token = clusters.create(server.ctx, cluster_id="east", labels={})
        target = f"127.0.0.1:{server.grpc_port}"
        first = RawStream(target, token)
        streams.append(first)
        first.hello("east")
        assert first.receive_kind("welcome").welcome.session_id

        waits = []
        for _ in range(2):
            refused = RawStream(target, token)
            streams.append(refused)
            refused.hello("east")
            with pytest.raises(grpc.RpcError) as caught:
                refused.receive()
            error = caught.value
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "retry in" in (error.details() or "")
            metadata = dict(error.trailing_metadata() or ())
            waits.append(int(metadata["wingsmith-retry-after-ms"]))
        # Successive slots, half a second apart at 2 handshakes per second.
        assert 0 < waits[0] <= 500 and 400 <= waits[1] - waits[0] <= 600

        # The agent's own client, refused next: it must come back at its slot, not on its
        # backoff (30 s at least here, so a client ignoring the slot fails the wait below).
        async def connect_with_client() -> tuple[StreamClient, float]:
            channel = grpc.aio.insecure_channel(target)
            client = StreamClient(
                channel=channel,
                token=token,
                hello=lambda: sync_pb2.Hello(cluster_id="east", agent_instance="pushed-back"),
                on_desired=no_rejects,
                backoff=Backoff(base_s=60.0, cap_s=60.0),  # 30 s at least
            )
            started = time.monotonic()
            task = asyncio.create_task(client.run())
            try:
                await asyncio.wait_for(client.connected.wait(), 10)
                return client, time.monotonic() - started
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await channel.close()

        client, took = loop.run(connect_with_client())
        assert client.stats.last_code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert client.stats.sessions == 1
        assert 0.3 <= took <= 5.0, took
    finally:
        for stream in streams:
            stream.close()
        loop.run(server.stop(grace_s=0.1))
        loop.close()
