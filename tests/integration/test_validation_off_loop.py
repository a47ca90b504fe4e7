"""Observation batches are validated off the event loop (docs/stream.md "Validation"), in order,
and answered as before.

The check is structural, not a timing: `convert.observations` is wrapped to record, at each
call, the thread it runs in and whether that thread runs an event loop. With a real hub, a real
agent's stream and a hand-driven one, every call must be in the hub's validation thread, where
no loop runs (on the old code every call was on the hub's loop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from hub.model import ObservationBatch
from hub.sync import convert, offloop
from tests.harness import Hub, SimAgent, wait_until
from tests.integration.rawstream import RawStream, now_ns
from wingsmith.v1 import resources_pb2, sync_pb2

UUID = "GPU-8f0c3a52-7e1d-4b6a-9c2e-5d4f3a2b1c0d"


class Calls:
    """Where `convert.observations` ran: (thread name, an event loop was running there)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []
        self._lock = threading.Lock()

    def record(self) -> None:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        with self._lock:
            self.seen.append((threading.current_thread().name, on_loop))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    recorded = Calls()
    original = convert.observations

    def observations(message: sync_pb2.ObservationBatch, check: Any) -> ObservationBatch:
        recorded.record()
        return original(message, check)

    monkeypatch.setattr(convert, "observations", observations)
    return recorded


def node_batch(seq: int, *, device_class: str = "H100-80GB") -> sync_pb2.ObservationBatch:
    device = resources_pb2.Device(uuid=UUID, device_class=device_class, healthy=True)
    node = sync_pb2.NodeObservation(node_id="node-a", observe_unix_nanos=now_ns(), devices=[device])
    return sync_pb2.ObservationBatch(seq=seq, nodes=[node])


def test_a_real_agents_batches_are_validated_off_the_loop(
    hub: Hub, agents: Callable[..., SimAgent], calls: Calls
) -> None:
    token = hub.register_cluster("east")
    agents(cluster_id="east", token=token, spec="nodes=2,gpus=2,class=H100-80GB")
    wait_until(lambda: len(hub.get("/v1/clusters/east")["nodes"]) == 2, what="both nodes stored")
    assert calls.seen, "the agent's batches were validated"
    assert all(not on_loop for _, on_loop in calls.seen), calls.seen
    assert {name for name, _ in calls.seen} == {offloop.THREAD_NAME}, calls.seen


def test_an_invalid_batch_is_answered_as_before_and_the_next_ones_keep_their_order(
    hub: Hub, calls: Calls
) -> None:
    token = hub.register_cluster("east")
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east")
    stream.receive_kind("welcome")
    stream.send(observations=node_batch(1, device_class="not a class!"))
    problem = stream.receive_kind("problem").problem
    assert (problem.seq, problem.code) == (1, "INVALID_ARGUMENT")
    assert "observations.nodes[0].devices[0].device_class" in problem.message, problem.message
    # A refused batch changed nothing, its seq included: 1 again is accepted, then 2..20 sent
    # at once; any of them taken out of order would be answered "must increase".
    for seq in range(1, 21):
        stream.send(observations=node_batch(seq))
    stream.send(observations=node_batch(20))  # one too many: refused, and answered last
    problem = stream.receive_kind("problem").problem
    assert problem.seq == 20 and "must increase: 20 after 20" in problem.message, problem
    assert [n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]] == ["node-a"]
    stream.close()
    assert len(calls.seen) == 22
    assert all(name == offloop.THREAD_NAME and not on_loop for name, on_loop in calls.seen)
