"""Dynamo as it ships today, end to end: a real hub, a `--kubernetes` agent (DaemonSet pod)
against an API server serving the DGD CRD in v1beta1 and v1alpha1 (tests/fake_kube/dynamo.py:
conversion, the deprecation Warning on v1alpha1, the operator's webhook rules), one serving
none, and a simulated cluster running `dynamo=v1beta1`. Then DGDs someone else wrote (`kubectl`,
which owns their fields) walked from discovered to released: aggregated, with the scaling
adapter, with an HPA driving the adapter, and against a v1alpha1-only server; each step checks
the DGD the cluster holds, and that the API server refused no write and warned of nothing.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests import fake_nvml
from tests.fake_kube import NODES, PODS, KubeEmulator, crd_schema
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
            lambda: (hub.get("/v1/deployments/chat.east").get("applied") or {}).get("api_version"),
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


# -- adoption and release of a DGD someone else wrote in v1beta1 ----------------------------

LEGACY_ARGS = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "16384"]
LEGACY_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1"
# What `kubectl create` records as the field manager of everything it wrote.
KUBECTL = "kubectl-create"


def foreign_dgd(*, adapter: bool) -> dict[str, Any]:
    """An aggregated vLLM DGD as its owner wrote it, in v1beta1 (docs/kubernetes.md), with
    fields the agent has no name for (a toleration, an env var, a sidecar) that must survive
    adoption; its worker opts into the scaling adapter when `adapter`."""
    worker: dict[str, Any] = {
        "name": "VllmDecodeWorker",
        "type": "worker",
        "replicas": 1,
        "podTemplate": {
            "spec": {
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [
                    {
                        "name": "main",
                        "image": LEGACY_IMAGE,
                        "command": ["python3", "-m", "dynamo.vllm"],
                        "args": LEGACY_ARGS,
                        "env": [{"name": "HF_HOME", "value": "/cache"}],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    },
                    {"name": "log-shipper", "image": "fluent/fluent-bit:3.1.0"},
                ],
            }
        },
    }
    if adapter:
        worker["scalingAdapter"] = {}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {
            "name": "legacy",
            "namespace": "ml",
            "labels": {"team": "search", "app.kubernetes.io/managed-by": "helm"},
        },
        "spec": {
            "backendFramework": "vllm",
            "components": [
                {
                    "name": "Frontend",
                    "type": "frontend",
                    "replicas": 1,
                    "podTemplate": {
                        "spec": {"containers": [{"name": "main", "image": LEGACY_IMAGE}]}
                    },
                },
                worker,
            ],
        },
    }


def _legacy(emulator: KubeEmulator) -> Any:
    return emulator.get_dgd("ml", "legacy", version="v1beta1")


def _worker_replicas(dgd: Any) -> int:
    return int(_components(dgd)["VllmDecodeWorker"]["replicas"])


def _legacy_writes(emulator: KubeEmulator) -> list[Any]:
    """Mutating requests to anything of DGD `legacy` (the DGD itself or its adapter)."""
    return [r for r in emulator.mutating_requests() if "/namespaces/ml/" in r.path]


def _agent_applies(emulator: KubeEmulator) -> list[dict[str, Any]]:
    """The bodies the agent applied to DGD `legacy` (server-side apply: JSON)."""
    return [
        json.loads(r.body)
        for r in _legacy_writes(emulator)
        if r.method == "PATCH" and r.path.endswith("/dynamographdeployments/legacy")
    ]


def _adopt_and_release(hub: Hub, emulator: KubeEmulator, *, adapter: bool) -> dict[str, Any]:
    """Discover -> promote (observed) -> managed -> scale to 2 -> demote -> delete, checking
    the DGD the cluster holds at each step; returns the DGD as it is left."""
    original = emulator.put_dgd(foreign_dgd(adapter=adapter), manager=KUBECTL)
    # Its running worker pod, as Dynamo made it: the agent reads args and device class off it.
    emulator.store.update(
        PODS,
        kube.pod(
            "legacy-vllmdecodeworker-0",
            namespace="ml",
            graph="legacy",
            node="n1",
            containers=[kube.container(args=tuple(LEGACY_ARGS), image=LEGACY_IMAGE)],
        ),
        manager="kubelet",
    )

    # Discovered, read off its v1beta1 components as a v1alpha1 DGD's services are.
    found = wait_until(
        lambda: (
            (d := hub.get("/v1/discovered?cluster_id=east")["discovered"])
            and d[0]["device_class"]
            and d[0]
        ),
        what="the foreign DGD discovered",
    )
    assert (found["namespace"], found["dgd_name"], found["state"]) == ("ml", "legacy", "new")
    assert found["backend_framework"] == "vllm"
    assert found["replicas"] == 1 and found["devices_per_replica"] == 1
    assert found["imported_args"] == LEGACY_ARGS and found["engine_version"] == "1.2.1"
    roles = {s["name"]: s["component_type"] for s in found["services"]}
    assert roles == {"Frontend": "frontend", "VllmDecodeWorker": "worker"}

    # Promoted: an observed deployment. Nothing is written to the DGD, even when the hub
    # declares more replicas than it runs (that is drift, shown, not enforced).
    hub.post("/v1/discovered/east.ml.legacy/promote", {"project": "search"})
    assert hub.get("/v1/deployments/legacy.east")["authority"] == "observed"
    wait_until(lambda: hub.get("/v1/deployments/legacy.east")["status"], what="reported")
    hub.patch("/v1/workloads/legacy", {"replicas": 2})
    wait_until(
        lambda: any(
            d["field"] == "replicas" for d in hub.get("/v1/deployments/legacy.east")["drift"]
        ),
        what="replica drift shown",
    )
    hub.patch("/v1/workloads/legacy", {"replicas": 1})
    wait_until(lambda: not hub.get("/v1/deployments/legacy.east/review")["differences"])
    assert _legacy_writes(emulator) == [], "an observed DGD is never written"
    assert _legacy(emulator) == original

    # Managed: our labels on its metadata, its spec as it was (Dynamo rolls nothing).
    taken = hub.post("/v1/deployments/legacy.east/authority", {"authority": "managed"})
    assert taken["authority"] == "managed"
    managed = wait_until(
        lambda: (
            (d := _legacy(emulator))["metadata"]["labels"].get("app.kubernetes.io/managed-by")
            == "wingsmith-hangar"
            and d
        ),
        what="the agent took control",
    )
    assert managed["metadata"]["labels"]["wingsmith.dev/deployment-id"] == taken["deployment_id"]
    assert managed["metadata"]["labels"]["team"] == "search"
    assert managed["spec"] == original["spec"], "taking control changed nothing it runs"
    assert managed["metadata"]["generation"] == original["metadata"]["generation"]

    # Scaled: through the adapter where the worker has one, else in the DGD.
    hub.patch("/v1/workloads/legacy", {"replicas": 2})
    scaled = wait_until(
        lambda: (d := _legacy(emulator)) and _worker_replicas(d) == 2 and d,
        what="scaled to 2 workers",
    )
    assert scaled["spec"]["components"][0] == original["spec"]["components"][0]
    scales = [r for r in _legacy_writes(emulator) if r.path.endswith("/scale")]
    if adapter:
        assert [json.loads(r.body) for r in scales] == [{"spec": {"replicas": 2}}]
        assert emulator.get_adapter("ml", "legacy-vllmdecodeworker")["spec"]["replicas"] == 2
        assert all(_worker_replicas(body) == 1 for body in _agent_applies(emulator)), (
            "the DGD's replicas are the adapter's to write"
        )
        owner = wait_until(
            lambda: hub.get("/v1/deployments/legacy.east")["status"].get("replicas_owner"),
            what="the owner of the replicas reported",
        )
        assert owner == "adapter"
    else:
        assert scales == []

    # Released: demoted (our managed-by label off, the owner's back), then deleted while
    # observed (every label and annotation of ours off): the DGD runs on, as it is.
    hub.post("/v1/deployments/legacy.east/authority", {"authority": "observed"})
    wait_until(
        lambda: (
            _legacy(emulator)["metadata"]["labels"].get("app.kubernetes.io/managed-by")
            != "wingsmith-hangar"
        ),
        what="the agent let go",
    )
    hub.rest("DELETE", "/v1/workloads/legacy")
    left = wait_until(
        lambda: (
            (d := _legacy(emulator))
            and "wingsmith.dev/deployment-id" not in d["metadata"]["labels"]
            and d
        ),
        what="our labels off",
    )
    assert left["metadata"]["uid"] == original["metadata"]["uid"], "never deleted"
    assert left["metadata"]["labels"] == original["metadata"]["labels"]
    assert not any(k.startswith("wingsmith.dev/") for k in left["metadata"].get("annotations", {}))
    assert _worker_replicas(left) == 2
    wait_until(
        lambda: hub.get("/v1/discovered/east.ml.legacy")["state"] == "tracked",
        what="back in the inventory",
    )
    assert not any(r.method == "DELETE" for r in _legacy_writes(emulator))
    refused = [r for r in emulator.refused() if "nvidia.com" in r.path]
    assert refused == [], "no DGD request refused (webhook, conflict, validation)"
    assert emulator.warnings == [], "no deprecated version was used"
    assert not any("/v1alpha1/" in r.path for r in emulator.requests() if "nvidia.com" in r.path)
    return left


def test_against_v1beta1_a_foreign_dgd_is_adopted_scaled_and_released(
    hub: Hub, pods: StartPod
) -> None:
    with KubeEmulator(lifetime_s=120, dynamo=BOTH) as emulator:
        pods(emulator)
        left = _adopt_and_release(hub, emulator, adapter=False)
        assert "scalingAdapter" not in _components(left)["VllmDecodeWorker"]


def test_against_v1beta1_a_foreign_dgd_with_a_scaling_adapter_is_scaled_through_it(
    hub: Hub, pods: StartPod
) -> None:
    with KubeEmulator(lifetime_s=120, dynamo=BOTH) as emulator:
        pods(emulator)
        left = _adopt_and_release(hub, emulator, adapter=True)
        assert _components(left)["VllmDecodeWorker"]["scalingAdapter"] == {}
        assert emulator.get_adapter("ml", "legacy-vllmdecodeworker")["spec"]["replicas"] == 2


def test_against_v1alpha1_only_a_foreign_dgd_is_adopted_scaled_and_released_too(
    hub: Hub, pods: StartPod
) -> None:
    # A Dynamo before 1.3: the same hand-over from kubectl's fields, in v1alpha1.
    worker = {
        "componentType": "worker",
        "replicas": 1,
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {
            "mainContainer": {
                "image": LEGACY_IMAGE,
                "command": ["python3", "-m", "dynamo.vllm"],
                "args": LEGACY_ARGS,
            }
        },
    }
    foreign = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {
            "name": "legacy",
            "namespace": "ml",
            "labels": {"app.kubernetes.io/managed-by": "helm"},
        },
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": LEGACY_IMAGE}},
                },
                "VllmDecodeWorker": worker,
            },
        },
    }

    def legacy() -> Any:
        return emulator.get_dgd("ml", "legacy", version="v1alpha1")

    with KubeEmulator(lifetime_s=120, dynamo=("v1alpha1",)) as emulator:
        pods(emulator)
        original = emulator.put_dgd(foreign, manager=KUBECTL)
        wait_until(lambda: hub.get("/v1/discovered?cluster_id=east")["discovered"])
        hub.post(
            "/v1/discovered/east.ml.legacy/promote",
            {"project": "search", "device_class": "H100-80GB"},
        )
        wait_until(lambda: hub.get("/v1/deployments/legacy.east")["status"], what="reported")
        assert _legacy_writes(emulator) == [], "an observed DGD is never written"

        hub.post("/v1/deployments/legacy.east/authority", {"authority": "managed"})
        hub.patch("/v1/workloads/legacy", {"replicas": 2})
        scaled = wait_until(
            lambda: (d := legacy())["spec"]["services"]["VllmDecodeWorker"]["replicas"] == 2 and d,
            what="taken over and scaled",
        )
        assert scaled["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "wingsmith-hangar"
        assert scaled["spec"]["services"]["Frontend"] == original["spec"]["services"]["Frontend"]

        hub.post("/v1/deployments/legacy.east/authority", {"authority": "observed"})
        hub.rest("DELETE", "/v1/workloads/legacy")
        left = wait_until(
            lambda: (d := legacy())["metadata"]["labels"] == original["metadata"]["labels"] and d,
            what="let go, the owner's label back",
        )
        assert left["metadata"]["uid"] == original["metadata"]["uid"], "never deleted"
        # (Discovery's GET of v1beta1 is answered 404 here: not served.)
        assert [r for r in emulator.refused() if r.method != "GET"] == [], "no write refused"
        assert emulator.warnings == []


def _hpa_scales(emulator: KubeEmulator, replicas: int) -> None:
    """An HPA sets the adapter's replicas through /scale, as its controller does."""
    request = urllib.request.Request(
        f"{emulator.url}/apis/nvidia.com/v1beta1/namespaces/ml/"
        "dynamographdeploymentscalingadapters/legacy-vllmdecodeworker/scale"
        "?fieldManager=horizontal-pod-autoscaler",
        data=json.dumps({"spec": {"replicas": replicas}}).encode(),
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 200


def test_against_v1beta1_an_adopted_dgd_an_autoscaler_drives_is_never_scaled_by_the_agent(
    hub: Hub, pods: StartPod
) -> None:
    with KubeEmulator(lifetime_s=120, dynamo=BOTH) as emulator:
        pod = pods(emulator)
        emulator.put_dgd(foreign_dgd(adapter=True), manager=KUBECTL)
        # The node holds two GPUs: the HPA scales within them (a third replica could not be
        # scheduled, and the hub admits an observed deployment only as far as its replicas can
        # exist: docs/admission.md, so the hand-over below would wait for room).
        _hpa_scales(emulator, 2)
        wait_until(lambda: _worker_replicas(_legacy(emulator)) == 2, what="the HPA scaled it")
        wait_until(lambda: hub.get("/v1/discovered?cluster_id=east")["discovered"])
        hub.post(
            "/v1/discovered/east.ml.legacy/promote",
            {"project": "search", "device_class": "H100-80GB"},
        )
        owner = wait_until(
            lambda: (hub.get("/v1/deployments/legacy.east")["status"] or {}).get("replicas_owner"),
            what="the owner of the replicas reported",
        )
        assert owner == "autoscaler:horizontal-pod-autoscaler"
        hub.post("/v1/deployments/legacy.east/authority", {"authority": "managed"})
        wait_until(
            lambda: (
                _legacy(emulator)["metadata"]["labels"].get("app.kubernetes.io/managed-by")
                == "wingsmith-hangar"
            ),
            what="the agent took control",
        )

        # The HPA scales down and the hub asks for more: the autoscaler's call, no drift.
        _hpa_scales(emulator, 1)
        hub.patch("/v1/workloads/legacy", {"replicas": 4})
        settled = wait_until(
            lambda: (
                (d := hub.get("/v1/deployments/legacy.east"))["desired_replicas"] == 4
                and (d["status"] or {}).get("applied_replicas") == 1
                and d
            ),
            what="more declared, the HPA's replicas reported",
        )
        assert not [d for d in settled["drift"] if d["field"] == "replicas"], "not drift"
        rounds = pod.agent.reconciles
        wait_until(lambda: pod.agent.reconciles >= rounds + 2, what="two more reconciles")
        assert _worker_replicas(_legacy(emulator)) == 1
        assert emulator.get_adapter("ml", "legacy-vllmdecodeworker")["spec"]["replicas"] == 1
        by_agent = emulator.requests_by("Bearer token-hangar-1")
        assert not [r for r in by_agent if r.path.endswith("/scale")], "the HPA's to scale"
        assert [r for r in emulator.refused() if "nvidia.com" in r.path] == []
        assert emulator.warnings == []


@pytest.mark.skipif(bool(crd_schema.missing()), reason=crd_schema.missing() or "-")
def test_against_dynamo_1_5s_real_crds_long_names_and_untagged_images_are_admitted(
    hub: Hub, pods: StartPod
) -> None:
    """The whole system against the fake held to Dynamo 1.5's own CRDs and webhooks: a
    40-character workload with TRT-LLM prefill workers gets a DGD whose operator labels fit,
    and an image whose tag Dynamo cannot read runs with the workload's runtime version, which
    the deployment's applied object shows. Nothing is refused on the way."""
    long_name = "speculative-decoding-trtllm-eval-" + "x" * 7
    assert len(long_name) == 40
    with KubeEmulator(lifetime_s=120, dynamo_release="1.5") as emulator:
        pods(emulator)
        body = workload(long_name, replicas=1, tp=1, engine="trtllm", clusters=("east",))
        body["serving"]["mode"] = "disaggregated"
        hub.post("/v1/workloads", body)
        applied = wait_until(
            lambda: hub.get(f"/v1/deployments/{long_name}.east").get("applied"),
            what="the DGD applied and reported",
        )
        name = applied["name"]
        assert name != long_name and len(name) <= 63 - 10 - len("TRTLLMPrefillWorker")
        dgd = emulator.get_dgd("wingsmith", name, version="v1beta1")
        assert dgd is not None
        for component in dgd["spec"]["components"]:
            assert len(f"{name}-{component['name'].lower()}-0123abcd") <= 63
        assert len(f"wingsmith-{name}") <= 63
        hub.rest("DELETE", f"/v1/workloads/{long_name}")
        wait_until(lambda: emulator.get_dgd("wingsmith", name, version="v1beta1") is None)

        status, refused = hub.rest(
            "POST", "/v1/workloads", workload("chat", image="mirror/vllm:1.3.1.post1"), check=False
        )
        assert status == 400 and "serving.runtime_version" in refused["error"]["message"]
        hub.post(
            "/v1/workloads",
            workload(
                "chat",
                replicas=1,
                tp=1,
                clusters=("east",),
                image="mirror/vllm:1.3.1.post1",
                runtime_version="1.5.0",
            ),
        )
        dgd = wait_until(lambda: _dgd(emulator, "v1beta1"), what="the DGD, admitted")
        assert {c["runtimeVersionOverride"] for c in dgd["spec"]["components"]} == {"1.5.0"}
        wait_until(
            lambda: hub.get("/v1/deployments/chat.east").get("applied"), what="the applied object"
        )
        body = json.loads(hub.get("/v1/deployments/chat.east/applied")["body"])
        assert body["metadata"]["annotations"]["wingsmith.dev/runtime-version"] == (
            "1.5.0 (serving.runtime_version)"
        )
        assert [r for r in emulator.refused() if "nvidia.com" in r.path] == []
