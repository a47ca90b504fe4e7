"""Fixtures: a fake kubelet on a short-lived unix socket, a fake clock, clients bound to both.

Unix socket paths are limited to 107 bytes, so sockets live in a short /tmp directory rather
than under pytest's long tmp_path. Every server and client stops in its fixture's finalizer.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.kubelet.client import PodResourcesClient
from tests.unit.kubelet.fake_kubelet import FakeClock, FakeKubelet

MakeClient = Callable[..., PodResourcesClient]
MakeKubelet = Callable[..., FakeKubelet]


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kl-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def socket_path(socket_dir: Path) -> str:
    return str(socket_dir / "kubelet.sock")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_kubelet(socket_path: str) -> Iterator[MakeKubelet]:
    """Fake kubelets on the test's socket path, not started; all stopped at teardown."""
    servers: list[FakeKubelet] = []

    def make(**options: Any) -> FakeKubelet:
        server = FakeKubelet(socket_path, **options)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def kubelet(make_kubelet: MakeKubelet) -> FakeKubelet:
    server = make_kubelet()
    server.start()
    return server


@pytest.fixture
def make_client(socket_path: str, clock: FakeClock) -> Iterator[MakeClient]:
    clients: list[PodResourcesClient] = []

    def make(path: str | None = None, **overrides: Any) -> PodResourcesClient:
        options: dict[str, Any] = {
            "clock": clock,
            "sleep": clock.sleep,
            "rng": random.Random(7),
            **overrides,
        }
        client = PodResourcesClient(path or socket_path, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
