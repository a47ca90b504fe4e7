"""A real `v1.PodResourcesLister` gRPC server on a unix socket, standing in for the kubelet.

The service is registered by hand under the literal name the kubelet serves
(`KUBELET_SERVICE`), not through our generated registration helper, so a client that reaches
this server reaches the kubelet's method paths, whatever our proto says. Every method path that
arrives is recorded (`calls`), as the wire carried it.

Faults a kubelet shows: RESOURCE_EXHAUSTED for the next N calls (`exhaust_next`), its own rate
budget (`limit`, on an injected clock), any status for the next N calls (`fail_next`), a call
that hangs until the server stops (`hang_next`), and a restart that deletes the socket and binds
a new socket file at the same path (`restart`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

from k8s.podresources.v1 import api_pb2

KUBELET_SERVICE = "v1.PodResourcesLister"


class FakeClock:
    """Monotonic time that moves only when someone sleeps on it. Shared by client and server."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now += seconds


class _Budget:
    """The kubelet's limiter: a non-blocking token bucket (100 QPS, burst 10 on a real one)."""

    def __init__(self, *, rate_per_s: float, burst: int, clock: Callable[[], float]) -> None:
        self._rate, self._burst, self._clock = rate_per_s, float(burst), clock
        self._tokens, self._stamp = float(burst), clock()

    def try_take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        # Float time: 0.1 s at 10/s may refill 0.9999999999 tokens; that is one token.
        if self._tokens < 1 - 1e-9:
            return False
        self._tokens = max(0.0, self._tokens - 1)
        return True


class _Recorder(grpc.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, calls: list[str]) -> None:
        self._calls = calls

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        self._calls.append(handler_call_details.method)
        return continuation(handler_call_details)


class FakeKubelet:
    def __init__(self, socket_path: str, *, service_name: str = KUBELET_SERVICE) -> None:
        self.socket_path = socket_path
        self.service_name = service_name
        self.pods: list[api_pb2.PodResources] = []
        self.allocatable: list[api_pb2.ContainerDevices] = []
        self.calls: list[str] = []
        self.rejected = 0
        self._lock = threading.Lock()
        self._exhausted = 0
        self._failures: list[grpc.StatusCode] = []
        self._hangs = 0
        self._budget: _Budget | None = None
        self._released = threading.Event()
        self._server: Any = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._released.clear()
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4), interceptors=[_Recorder(self.calls)]
        )
        server.add_generic_rpc_handlers((self._handlers(),))
        server.add_insecure_port(f"unix://{self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        # The kubelet removes its socket when it goes; so does this one, whatever grpc did.
        if os.path.lexists(self.socket_path):
            os.unlink(self.socket_path)

    def restart(self) -> None:
        self.stop()
        self.start()

    # -- faults -------------------------------------------------------------------------------

    def exhaust_next(self, calls: int) -> None:
        with self._lock:
            self._exhausted = calls

    def fail_next(self, calls: int, code: grpc.StatusCode) -> None:
        with self._lock:
            self._failures = [code] * calls

    def hang_next(self, calls: int) -> None:
        with self._lock:
            self._hangs = calls

    def limit(self, *, rate_per_s: float, burst: int, clock: Callable[[], float]) -> None:
        self._budget = _Budget(rate_per_s=rate_per_s, burst=burst, clock=clock)

    # -- the service --------------------------------------------------------------------------

    def _handlers(self) -> Any:
        def unary(handler: Any, request_type: Any, response_type: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                handler,
                request_deserializer=request_type.FromString,
                response_serializer=response_type.SerializeToString,
            )

        return grpc.method_handlers_generic_handler(
            self.service_name,
            {
                "List": unary(
                    self._list, api_pb2.ListPodResourcesRequest, api_pb2.ListPodResourcesResponse
                ),
                "GetAllocatableResources": unary(
                    self._allocatable,
                    api_pb2.AllocatableResourcesRequest,
                    api_pb2.AllocatableResourcesResponse,
                ),
                "Get": unary(
                    self._get, api_pb2.GetPodResourcesRequest, api_pb2.GetPodResourcesResponse
                ),
            },
        )

    def _admit(self, context: Any) -> None:
        with self._lock:
            hang = self._hangs > 0
            self._hangs -= hang
            failure = self._failures.pop(0) if self._failures else None
            exhausted = self._exhausted > 0
            self._exhausted -= exhausted
            over_budget = self._budget is not None and not self._budget.try_take()
            self.rejected += exhausted or over_budget
        if hang:
            self._released.wait()
        if failure is not None:
            context.abort(failure, "injected by the fake kubelet")
        if exhausted or over_budget:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by the rate limiter")

    def _list(self, request: api_pb2.ListPodResourcesRequest, context: Any) -> Any:
        self._admit(context)
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)

    def _allocatable(self, request: api_pb2.AllocatableResourcesRequest, context: Any) -> Any:
        self._admit(context)
        return api_pb2.AllocatableResourcesResponse(devices=self.allocatable)

    def _get(self, request: api_pb2.GetPodResourcesRequest, context: Any) -> Any:
        self._admit(context)
        for pod in self.pods:
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return api_pb2.GetPodResourcesResponse(pod_resources=pod)
        # The kubelet's Get answers an unknown pod with a plain error: UNKNOWN on the wire.
        context.abort(
            grpc.StatusCode.UNKNOWN,
            f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
        )
