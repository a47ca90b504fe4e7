"""Dynamo as it ships today, end to end: a real hub, a `--kubernetes` agent (DaemonSet pod)
against an API server serving the DGD CRD in v1beta1 and v1alpha1 (tests/fake_kube/dynamo.py:
conversion, the deprecation Warning on v1alpha1, the operator's webhook rules), one serving
none, and a simulated cluster running `dynamo=v1beta1`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests import fake_nvml
from tests.fake_kube import NODES, KubeEmulator
from tests.harness import Hub, LoopThread, SimAgent, wait_until, workload
from tests.integration.kube_pods import GPU, KubePod, leader
from tests.unit.kube import builders as kube

BOTH = ("v1alpha1", "v1beta1")
TWO = (GPU.format(0), GPU.format(1))


@pytest.fixture(scope="module")
def nvml_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_nvml.build(tmp_path_factory.mktemp("nvml"))


@pytest.fixture(autouse=True)
def node_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    config = tmp_path / "nvml.conf"
    gpus = (
        {"uuid": GPU.format(i), "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
        for i in range(2)
    )
    fake_nvml.write_config(config, fake_nvml.node(*gpus, driver_version="550.54.15"))
    monkeypatch.setenv(fake_nvml.CONFIG_ENV, str(config))
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()
    yield
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()


StartPod = Callable[..., KubePod]


@pytest.fixture
def pods(env: tuple[LoopThread, Hub], nvml_library: Path) -> Iterator[Callable[..., KubePod]]:
    loop, hub = env
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    started: list[KubePod] = []

    def start(emulator: KubeEmulator) -> KubePod:
        emulator.store.update(NODES, kube.node("n1"), manager="kubelet")
        pod = KubePod(
            loop,
            hub,
            emulator,
            token=token,
            node="n1",
            pod="hangar-1",
            nvml_library=str(nvml_library),
            allocatable=TWO,
        )
        started.append(pod)
        wait_until(lambda: leader(hub) == "hangar-1", what="the pod leads")
        return pod

    yield start
    for pod in started:
        pod.stop()


def _dgd(emulator: KubeEmulator, version: str) -> Any:
    return emulator.get_dgd("wingsmith", "chat", version=version)


def _components(dgd: Any) -> dict[str, Any]:
    return {c["name"]: c for c in dgd["spec"]["components"]}


def test_against_v1beta1_the_agent_creates_scales_rolls_and_deletes_without_warnings(
    hub: Hub, pods: StartPod
) -> None:
    with KubeEmulator(lifetime_s=120, dynamo=BOTH) as emulator:
        pods(emulator)
        wait_until(
            lambda: hub.get("/v1/clusters/east")["dgd_version"] == "v1beta1",
            what="the cluster reports the DGD version its agent writes",
        )

        hub.post("/v1/workloads", workload("chat", replicas=1, tp=1, clusters=("east",)))
        dgd = wait_until(lambda: _dgd(emulator, "v1beta1"), what="the DGD, created")
        worker = _components(dgd)["VllmDecodeWorker"]
        assert worker["type"] == "worker" and worker["replicas"] == 1
        [main] = worker["podTemplate"]["spec"]["containers"]
        assert main["name"] == "main" and main["resources"]["limits"]["nvidia.com/gpu"] == "1"

        # What the hub shows as applied is the object as the cluster holds it: v1beta1.
        applied = wait_until(
            lambda: hub.get("/v1/deployments/chat.east").get("applied", {}).get("api_version"),
            what="the applied object reported",
        )
        assert applied == "nvidia.com/v1beta1"
        hub.patch("/v1/workloads/chat", {"replicas": 2})
        wait_until(
            lambda: _components(_dgd(emulator, "v1beta1"))["VllmDecodeWorker"]["replicas"] == 2,
            what="scaled in place",
        )
        hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
        wait_until(
            lambda: (
                "0.11.1"
                in str(_components(_dgd(emulator, "v1beta1"))["VllmDecodeWorker"]["podTemplate"])
            ),
            what="the new engine version rendered (a rollout)",
        )
        hub.rest("DELETE", "/v1/workloads/chat")
        wait_until(lambda: _dgd(emulator, "v1beta1") is None, what="the DGD, deleted")

        dgd_requests = [r for r in emulator.requests() if "nvidia.com" in r.path]
        assert dgd_requests and not any("/v1alpha1/" in r.path for r in dgd_requests)
        assert emulator.warnings == [], "no deprecated version was used"


def test_against_v1beta1_an_engine_change_recreates_the_dgd_instead_of_being_refused(
    hub: Hub, pods: StartPod
) -> None:
    with KubeEmulator(lifetime_s=120, dynamo=BOTH) as emulator:
        pods(emulator)
        hub.post("/v1/workloads", workload("chat", replicas=1, tp=1, clusters=("east",)))
        first = wait_until(lambda: _dgd(emulator, "v1beta1"), what="the vLLM DGD")

        # Another engine: other components and backendFramework, which the operator's
        # webhook refuses to change in place.
        hub.patch(
            "/v1/workloads/chat", {"serving": {"engine": "sglang", "engine_version": "0.5.3"}}
        )
        second = wait_until(
            lambda: (
                (d := _dgd(emulator, "v1beta1")) and d["spec"]["backendFramework"] == "sglang" and d
            ),
            what="the SGLang DGD, created anew",
        )
        assert second["metadata"]["uid"] != first["metadata"]["uid"]
        assert set(_components(second)) == {"Frontend", "SGLangDecodeWorker"}
        assert any(r.method == "DELETE" for r in emulator.requests())
        assert not hub.get("/v1/deployments/chat.east")["sync"]["rejected_error"]


def test_a_cluster_serving_no_dgd_version_says_so_and_its_deployments_carry_the_reason(
    hub: Hub, pods: StartPod
) -> None:
    with KubeEmulator(lifetime_s=120, dynamo=()) as emulator:
        pods(emulator)
        wait_until(
            lambda: hub.get("/v1/clusters/east")["dgd_version"] == "none",
            what="the cluster says no DGD version is served",
        )
        hub.post("/v1/workloads", workload("chat", replicas=1, tp=1, clusters=("east",)))
        rejected = wait_until(
            lambda: hub.get("/v1/deployments/chat.east")["sync"]["rejected_error"],
            what="the deployment rejected with the reason",
        )
        assert "serves no DynamoGraphDeployment version" in rejected
        assert emulator.requests(method="PATCH") == [], "no apply loop against a 404"


def test_a_simulated_cluster_running_dynamo_v1beta1_reports_it_and_runs_deployments(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("lab")
    hub.create_project("search", H100_80GB=16)
    agents(cluster_id="lab", token=token, spec="nodes=1,gpus=8,ready_after=0.1s,dynamo=v1beta1")
    wait_until(lambda: hub.get("/v1/clusters/lab")["dgd_version"] == "v1beta1", what="reported")
    hub.post("/v1/workloads", workload("chat", replicas=2, tp=2, clusters=("lab",)))
    wait_until(lambda: hub.get("/v1/workloads/chat")["phase"] == "running", what="running")
