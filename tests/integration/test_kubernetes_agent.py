"""The agent in --kubernetes mode, end to end, through the real code paths: the official
Kubernetes client against the API emulator (tests/fake_kube), the PodResources client against a
real gRPC server on a unix socket (tests/unit/kubelet/fake_kubelet.py), nvidia-ml-py against the
fake libnvidia-ml.so.1 (tests/fake_nvml), and a real hub."""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from agent.app import AgentConfig
from agent.kubernetes import KubernetesOptions, kubernetes_agent
from agent.sync.channel import open_channel
from tests import fake_nvml
from tests.fake_kube import KubeEmulator
from tests.fake_kube.store import DGDS, LEASES
from tests.harness import Hub, LoopThread, wait_until, workload
from tests.unit.kube.conftest import write_kubeconfig
from tests.unit.kubelet import builders as kubelet_builders
from tests.unit.kubelet.fake_kubelet import FakeKubelet

GPU = "GPU-{:08d}-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def nvml_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_nvml.build(tmp_path_factory.mktemp("nvml"))


@pytest.fixture
def node_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    config = tmp_path / "nvml.conf"
    fake_nvml.write_config(
        config,
        fake_nvml.node(
            *(
                {"uuid": GPU.format(i), "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
                for i in range(3)
            ),
            driver_version="550.54.15",
        ),
    )
    monkeypatch.setenv(fake_nvml.CONFIG_ENV, str(config))
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()
    yield
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[FakeKubelet]:
    server = FakeKubelet(str(tmp_path / "kubelet.sock"))
    # The device plugin advertises two of NVML's three GPUs, and one id NVML does not know.
    server.allocatable = kubelet_builders.devices(
        "nvidia.com/gpu", GPU.format(0), GPU.format(1), "GPU-9a057000-0000-4000-8000-00000000dead"
    )
    server.start()
    yield server
    server.stop()


def test_a_daemonset_pod_elects_itself_reports_its_verified_node_and_applies_dgds(
    env: tuple[LoopThread, Hub],
    tmp_path: Path,
    nvml_library: Path,
    node_gpus: None,
    kubelet: FakeKubelet,
) -> None:
    loop, hub = env
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8)
    with KubeEmulator(lifetime_s=120) as emulator:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=emulator.url)
        config = AgentConfig(
            hub=hub.grpc_target, cluster_id="east", token=token, resync_s=1.0, node_poll_s=1.0
        )
        options = KubernetesOptions(
            node_name="gpu-node-1",
            pod_name="hangar-abcde",
            lease_namespace="wingsmith",
            kubeconfig=str(kubeconfig),
            pod_resources_socket=kubelet.socket_path,
            nvml_library=str(nvml_library),
        )
        running = loop.spawn(_run(config, options))
        try:
            node = wait_until(lambda: hub.get("/v1/clusters/east")["nodes"], what="node reported")
            devices = {d["uuid"]: d for d in node[0]["devices"]}
            assert node[0]["node_id"] == "gpu-node-1"
            assert devices[GPU.format(0)]["verified"] and devices[GPU.format(1)]["verified"]
            assert not devices[GPU.format(2)]["verified"], "NVML has it, the kubelet does not"
            assert not devices["GPU-9a057000-0000-4000-8000-00000000dead"]["verified"], (
                "the kubelet has it, NVML does not"
            )
            capacity = hub.get("/v1/clusters/east")["devices"]["H100-80GB"]
            assert capacity["total"] == 2, "only verified, healthy devices count"

            wait_until(lambda: _leader(hub) == "hangar-abcde", what="the pod leads")
            lease = emulator.store.get(LEASES, "wingsmith", "wingsmith-hangar")
            assert lease is not None and lease["spec"]["holderIdentity"] == "hangar-abcde"

            hub.post("/v1/workloads", workload("chat", replicas=1, tp=2, clusters=("east",)))
            dgd = wait_until(
                lambda: emulator.store.get(DGDS, "wingsmith", "chat"), what="DGD applied"
            )
            assert dgd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "wingsmith-hangar"
            applies = [
                r for r in emulator.requests(method="PATCH") if "dynamographdeployments" in r.path
            ]
            assert applies and applies[0].content_type.startswith("application/apply-patch+yaml")
        finally:
            loop.loop.call_soon_threadsafe(running.cancel)
            with contextlib.suppress(concurrent.futures.CancelledError, Exception):
                running.result(timeout=30)


def test_the_same_pod_read_only_sends_the_api_server_no_mutating_request(
    env: tuple[LoopThread, Hub],
    tmp_path: Path,
    nvml_library: Path,
    node_gpus: None,
    kubelet: FakeKubelet,
) -> None:
    loop, hub = env
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8)
    with KubeEmulator(lifetime_s=120) as emulator:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=emulator.url)
        config = AgentConfig(
            hub=hub.grpc_target,
            cluster_id="east",
            token=token,
            resync_s=1.0,
            node_poll_s=1.0,
            read_only=True,
        )
        options = KubernetesOptions(
            node_name="gpu-node-1",
            pod_name="hangar-abcde",
            lease_namespace="wingsmith",
            kubeconfig=str(kubeconfig),
            pod_resources_socket=kubelet.socket_path,
            nvml_library=str(nvml_library),
        )
        running = loop.spawn(_run(config, options))
        try:
            wait_until(lambda: _leader(hub) == "hangar-abcde", what="the hub grants the pod")
            hub.post("/v1/workloads", workload("chat", replicas=1, tp=2, clusters=("east",)))
            # The hub reserves nothing for replicas a read-only agent never creates: the
            # deployment waits saying why (docs/admission.md), and its desired state still
            # comes down to the agent, which must write nothing of it.
            wait_until(
                lambda: (
                    hub.get("/v1/deployments/chat.east")["admission_reason"] == "cluster_read_only"
                ),
                what="the deployment waits on the read-only cluster",
            )
            wait_until(lambda: any(r.watch for r in emulator.requests()), what="it watches")
            time.sleep(2.0)  # two resync periods: every reconcile pass has run and logged
            assert emulator.mutating_requests() == [], "read-only: no request may write"
            assert emulator.store.get(LEASES, "wingsmith", "wingsmith-hangar") is None
            assert emulator.store.get(DGDS, "wingsmith", "chat") is None
        finally:
            loop.loop.call_soon_threadsafe(running.cancel)
            with contextlib.suppress(concurrent.futures.CancelledError, Exception):
                running.result(timeout=30)


async def _run(config: AgentConfig, options: KubernetesOptions) -> Any:
    channel = open_channel(config.hub)
    try:
        async with kubernetes_agent(config, options, channel=channel) as agent:
            await agent.run()
    finally:
        await channel.close()


def _leader(hub: Hub) -> str:
    leaders = [a["instance"] for a in hub.get("/v1/clusters/east")["agents"] if a["leader"]]
    return leaders[0] if leaders else ""
