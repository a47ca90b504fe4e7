"""A hand-driven sync stream (synchronous gRPC), for protocol tests the real agent never does."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import grpc

from wingsmith.v1 import sync_pb2, sync_pb2_grpc

_END = object()


class RawStream:
    def __init__(self, target: str, token: str) -> None:
        self.channel = grpc.insecure_channel(target)
        self._outgoing: queue.Queue[Any] = queue.Queue()
        stub = sync_pb2_grpc.ClusterSyncStub(self.channel)
        self._responses = stub.Sync(
            self._requests(), metadata=(("authorization", f"Bearer {token}"),)
        )

    def _requests(self) -> Iterator[sync_pb2.AgentMessage]:
        while True:
            item = self._outgoing.get()
            if item is _END:
                return
            yield item

    def send(self, **kind: Any) -> None:
        self._outgoing.put(sync_pb2.AgentMessage(**kind))

    def hello(self, cluster_id: str, **fields: Any) -> None:
        self.send(hello=sync_pb2.Hello(cluster_id=cluster_id, agent_version="raw", **fields))

    def receive(self) -> sync_pb2.HubMessage:
        return next(self._responses)

    def receive_kind(self, kind: str, limit: int = 10) -> sync_pb2.HubMessage:
        for _ in range(limit):
            message = self.receive()
            if message.WhichOneof("kind") == kind:
                return message
        raise AssertionError(f"no {kind} message in {limit}")

    def close(self) -> None:
        self._outgoing.put(_END)
        self.channel.close()


def now_ns() -> int:
    return time.time_ns()
