"""Fixtures: a Kubernetes API emulator on 127.0.0.1:0, a kubeconfig file pointing at it, the
real client loaded from that file, and started `KubernetesCluster`s that stop at teardown.

Tuning is fast (short watches, short backoffs) so the tests are quick, and small enough that
two cores shared with other work are not loaded.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cluster.kube.cluster import KubernetesCluster, WatchTuning
from agent.cluster.kube.config import load_api_client
from tests.fake_kube import KubeEmulator

FAST = WatchTuning(
    watch_timeout_s=5,
    read_grace_s=2.0,
    connect_timeout_s=2.0,
    list_timeout_s=5.0,
    page_size=500,
    backoff_initial_s=0.05,
    backoff_max_s=0.4,
    min_cycle_s=0.2,
)

MakeCluster = Callable[..., KubernetesCluster]


def eventually(check: Callable[[], Any], *, timeout: float = 5.0, what: str = "") -> Any:
    """Poll `check` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what or check}")
        time.sleep(0.01)


def write_kubeconfig(
    path: Path, *, server: str, context: str = "fake", token: str | None = None
) -> Path:
    """A kubeconfig for `server`; with `token`, the client sends it as a bearer token (so an
    emulator's request log tells clients apart)."""
    user = {"token": token} if token else {}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "nobody", "user": user}],
                "contexts": [{"name": context, "context": {"cluster": "fake", "user": "nobody"}}],
                "current-context": context,
            }
        )
    )
    return path


StartEmulator = Callable[..., KubeEmulator]
Connect = Callable[..., KubernetesCluster]


@pytest.fixture
def start_emulator() -> Iterator[StartEmulator]:
    """Start an emulator with non-default settings; closed at teardown."""
    servers: list[KubeEmulator] = []

    def start(**kwargs: Any) -> KubeEmulator:
        kwargs.setdefault("lifetime_s", 60.0)
        servers.append(KubeEmulator(**kwargs).start())
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def emulator(start_emulator: StartEmulator) -> KubeEmulator:
    return start_emulator()


@pytest.fixture
def kubeconfig(tmp_path: Path, emulator: KubeEmulator) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", server=emulator.url)


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[Any]:
    client = load_api_client(kubeconfig=kubeconfig)
    yield client
    client.close()


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Connect]:
    """A started KubernetesCluster on `server`, through a kubeconfig file of its own; stopped
    (and its watch threads checked gone) at teardown."""
    started: list[tuple[KubernetesCluster, Any]] = []

    def make(server: KubeEmulator, *, sync: bool = True, **kwargs: Any) -> KubernetesCluster:
        path = write_kubeconfig(tmp_path / f"kubeconfig-{len(started)}", server=server.url)
        client = load_api_client(kubeconfig=path)
        kwargs.setdefault("tuning", FAST)
        kwargs.setdefault("rng", random.Random(7))
        cluster = KubernetesCluster(client, **kwargs)
        started.append((cluster, client))
        cluster.start()
        if sync:
            assert cluster.wait_synced(5.0), "the cluster did not list within 5 s"
        return cluster

    yield make
    for cluster, client in started:
        assert cluster.stop(timeout=5.0), "watch threads outlived stop()"
        client.close()


@pytest.fixture
def make_cluster(emulator: KubeEmulator, connect: Connect) -> MakeCluster:
    return lambda **kwargs: connect(emulator, **kwargs)
