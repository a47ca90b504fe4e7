"""DGD versions: discovery of what the API server serves, writing v1beta1 where it is served,
reading either version into the internal form, and following a change of served versions.

The emulator plays Dynamo's CRD by the reference (tests/fake_kube/dynamo.py): its own
conversion, 404 for an unserved version, the deprecation Warning on v1alpha1, and the
operator's webhook rules on v1beta1 objects.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from agent import discover
from agent.cluster import dgd_versions
from agent.cluster.kube import mapping
from agent.cluster.port import ClusterError
from agent.main import main as agent_main
from agent.manifests import rendered
from tests.fake_kube import KubeEmulator
from tests.unit.cluster.builders import aggregated
from tests.unit.kube import builders
from tests.unit.kube.conftest import Connect, StartEmulator, eventually, write_kubeconfig
from tests.unit.render.builders import make_deployment, make_serving

BOTH = ("v1alpha1", "v1beta1")
BETA_PATH = "/apis/nvidia.com/v1beta1/namespaces/default/dynamographdeployments/llama"


def manifest(**kwargs: object) -> dict[str, object]:
    return aggregated(labels=builders.ours(), **kwargs)


def disaggregated_render() -> dict[str, object]:
    spec = make_deployment(serving=make_serving(mode="disaggregated", tensor_parallel=2))
    return rendered(spec, namespace="default")


# -- the pure part -------------------------------------------------------------------------------


def test_choose_prefers_v1beta1_then_v1alpha1_and_says_none_when_neither_is_served() -> None:
    assert dgd_versions.choose(["v1alpha1", "v1beta1"]) == "v1beta1"
    assert dgd_versions.choose(["v1alpha1"]) == "v1alpha1"
    assert dgd_versions.choose(["v2"]) == ""
    assert "install or upgrade" in dgd_versions.no_version_message(["v2"])


def test_a_rendered_dgd_in_v1beta1_has_a_sorted_components_list_with_a_main_container() -> None:
    internal = disaggregated_render()
    beta = dgd_versions.to_served(internal, "v1beta1")

    assert beta["apiVersion"] == "nvidia.com/v1beta1"
    components = beta["spec"]["components"]
    assert [c["name"] for c in components] == [
        "Frontend",
        "VllmDecodeWorker",
        "VllmPrefillWorker",
    ]
    assert [c["type"] for c in components] == ["frontend", "decode", "prefill"]
    decode = components[1]
    [main] = decode["podTemplate"]["spec"]["containers"]
    assert main["name"] == "main"
    assert main["resources"] == {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    assert "--disaggregation-mode" in main["args"]
    # Our labels reach the pods through the template; v1beta1 has no service-level labels.
    assert decode["podTemplate"]["metadata"]["labels"]["wingsmith.dev/deployment-id"]
    assert "labels" not in decode and "services" not in beta["spec"]
    assert "runtimeVersionOverride" not in decode  # the image tag is a version


def test_an_image_without_a_version_tag_gets_the_runtime_version_the_workload_names() -> None:
    spec = make_deployment(
        serving=make_serving(image="registry.local/vllm:latest", runtime_version="1.4.2")
    )
    alpha = rendered(spec, namespace="default", operator_version="1.5.0")
    beta = dgd_versions.to_served(alpha, "v1beta1")
    # On both versions' writes: Dynamo 1.5's webhook asks it of v1alpha1 objects too.
    for service in alpha["spec"]["services"].values():
        assert service["runtimeVersionOverride"] == "1.4.2"
    for component in beta["spec"]["components"]:
        assert component["runtimeVersionOverride"] == "1.4.2"


def test_v1beta1_read_into_the_internal_form_and_written_back_is_unchanged() -> None:
    beta = dgd_versions.to_served(disaggregated_render(), "v1beta1")
    # What the agent has no name for must survive a read and a write.
    beta["spec"]["components"][1]["modelRef"] = {"name": "qwen", "revision": "main"}
    beta["spec"]["components"][1]["sharedMemorySize"] = "16Gi"
    beta["spec"]["components"][1]["podTemplate"]["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists"}
    ]
    beta["spec"]["components"][1]["podTemplate"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "busybox:1.36"}
    )
    beta["metadata"]["annotations"] = {"nvidia.com/dgd-spec": "{}", "team": "search"}

    internal = dgd_versions.to_internal(beta)
    decode = internal["spec"]["services"]["VllmDecodeWorker"]
    assert decode["componentType"] == "worker" and decode["subComponentType"] == "decode"
    assert decode["resources"]["limits"]["gpu"] == "2"
    # The operator's private conversion annotations are never ours to diff or write back.
    assert internal["metadata"]["annotations"] == {"team": "search"}

    again = dgd_versions.to_served(internal, "v1beta1")
    expected = copy.deepcopy(beta)
    expected["metadata"]["annotations"] = {"team": "search"}
    assert again == expected


def test_recreate_reason_names_what_v1beta1_forbids_in_place() -> None:
    aggregated_spec = rendered(make_deployment(), namespace="default")["spec"]
    disaggregated_spec = disaggregated_render()["spec"]
    scaled = copy.deepcopy(aggregated_spec)
    scaled["services"]["VllmDecodeWorker"]["replicas"] = 5

    assert dgd_versions.recreate_reason(aggregated_spec, scaled) == ""
    assert "components change" in dgd_versions.recreate_reason(aggregated_spec, disaggregated_spec)
    other_engine = copy.deepcopy(aggregated_spec)
    other_engine["backendFramework"] = "sglang"
    assert "backendFramework" in dgd_versions.recreate_reason(aggregated_spec, other_engine)


# -- against the API server ---------------------------------------------------------------------


def test_where_v1beta1_is_served_the_agent_writes_it_and_gets_no_deprecation_warning(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=BOTH)
    cluster = connect(emulator)
    assert cluster.dgd_version == "v1beta1"
    assert cluster.served_dgd_versions == ("v1beta1", "v1alpha1")

    cluster.apply_dgd(manifest())

    [patch] = emulator.requests(method="PATCH")
    assert patch.path == BETA_PATH
    assert emulator.warnings == []
    stored = emulator.get_dgd("default", "llama", version="v1beta1")
    assert stored is not None
    assert [c["name"] for c in stored["spec"]["components"]] == ["Frontend", "VllmWorker"]
    # Read back through the watch, in the internal form.
    [dgd] = eventually(cluster.list_dgds, what="the DGD in the cache")
    assert dgd.spec["services"]["VllmWorker"]["replicas"] == 1
    assert dgd.spec["services"]["VllmWorker"]["resources"]["limits"]["gpu"] == "1"
    # A client still on v1alpha1 reads the same object as a services map.
    alpha = emulator.get_dgd("default", "llama", version="v1alpha1")
    assert alpha is not None and set(alpha["spec"]["services"]) == {"Frontend", "VllmWorker"}


def test_a_v1alpha1_writer_gets_the_deprecation_warning_and_the_agent_reads_its_dgd(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=BOTH)
    cluster = connect(emulator)
    # Someone else applies a v1alpha1 DGD with service-level labels (alpha-only data).
    legacy = aggregated(name="legacy", labels={"team": "lab"})
    legacy["spec"]["services"]["VllmWorker"]["labels"] = {"tier": "gold"}
    api = cluster.api_client
    from kubernetes.client import CustomObjectsApi

    CustomObjectsApi(api).patch_namespaced_custom_object(
        "nvidia.com",
        "v1alpha1",
        "default",
        "dynamographdeployments",
        "legacy",
        legacy,
        field_manager="helm",
        _content_type="application/apply-patch+yaml",
    )
    assert [r.path for r in emulator.warnings] == [
        "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeployments/legacy"
    ]
    stored = emulator.get_dgd("default", "legacy", version="v1beta1")
    assert stored is not None and "nvidia.com/dgd-spec" in stored["metadata"]["annotations"]

    [dgd] = eventually(cluster.list_dgds, what="the legacy DGD")
    assert not any(k.startswith("nvidia.com/dgd-") for k in dgd.annotations)
    assert dgd.spec["services"]["VllmWorker"]["componentType"] == "worker"


def test_against_a_v1alpha1_only_server_the_agent_writes_v1alpha1_as_before(
    emulator: KubeEmulator, connect: Connect
) -> None:
    cluster = connect(emulator)
    assert cluster.dgd_version == "v1alpha1"
    cluster.apply_dgd(manifest())
    [patch] = emulator.requests(method="PATCH")
    assert patch.path == BETA_PATH.replace("v1beta1", "v1alpha1")


def test_a_server_serving_no_dgd_version_syncs_and_refuses_writes_with_a_clear_reason(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=())
    cluster = connect(emulator)
    assert cluster.dgd_version == "none"
    assert cluster.list_dgds() == []
    with pytest.raises(ClusterError, match="serves no DynamoGraphDeployment version"):
        cluster.apply_dgd(manifest())
    assert emulator.requests(method="PATCH") == []


def test_when_v1alpha1_stops_being_served_a_404_switches_the_agent_to_v1beta1(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=("v1alpha1",))
    cluster = connect(emulator)
    cluster.apply_dgd(manifest())
    eventually(cluster.list_dgds, what="the DGD")

    emulator.serve_dynamo(("v1beta1",))  # an upgrade that dropped v1alpha1
    cluster.apply_dgd(manifest(replicas=2))

    assert cluster.dgd_version == "v1beta1"
    patches = [r.path for r in emulator.requests(method="PATCH")]
    assert patches[-2:] == [BETA_PATH.replace("v1beta1", "v1alpha1"), BETA_PATH]

    def scaled() -> bool:
        dgds = cluster.list_dgds()
        return bool(dgds) and dgds[0].spec["services"]["VllmWorker"]["replicas"] == 2

    eventually(scaled, what="the DGD read back through a v1beta1 watch")


def test_served_versions_are_asked_again_periodically(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=("v1alpha1",))
    cluster = connect(emulator, rediscover_s=0.2)
    emulator.serve_dynamo(BOTH)  # Dynamo upgraded to a release serving v1beta1
    eventually(lambda: cluster.dgd_version == "v1beta1", what="the periodic discovery")
    assert cluster.wait_synced(5.0)
    cluster.apply_dgd(manifest())
    assert emulator.requests(method="PATCH")[-1].path == BETA_PATH


def test_the_operator_webhook_refuses_a_component_set_change_in_v1beta1(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=BOTH)
    cluster = connect(emulator)
    cluster.apply_dgd(rendered(make_deployment(), namespace="default"))
    with pytest.raises(ClusterError, match="component topology is immutable"):
        cluster.apply_dgd(disaggregated_render())


# -- the diagnostic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "writes", "status"),
    [(BOTH, "v1beta1", 0), (("v1alpha1",), "v1alpha1", 0), ((), "none", 1)],
)
def test_the_dgd_versions_diagnostic_prints_what_is_served_and_what_the_agent_writes(
    start_emulator: StartEmulator,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    served: tuple[str, ...],
    writes: str,
    status: int,
) -> None:
    emulator = start_emulator(dynamo=served)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=emulator.url)
    with pytest.raises(SystemExit) as exited:
        agent_main(["dgd-versions", "--kubeconfig", str(kubeconfig)])
    assert exited.value.code == status
    report = json.loads(capsys.readouterr().out)
    assert report["writes"] == writes
    assert sorted(report["served"]) == sorted(served)
    assert ("problem" in report) == (writes == "none")
    assert emulator.mutating_requests() == []


def test_discovery_describes_a_v1beta1_dgd_as_it_describes_the_same_v1alpha1_one() -> None:
    """Adoption reads a v1beta1 DGD's components and args as a v1alpha1 DGD's services."""
    internal = disaggregated_render()
    beta = dgd_versions.to_served(internal, "v1beta1")
    as_alpha = mapping.dgd(internal)
    as_beta = mapping.dgd(beta)
    described, expected = discover.describe(as_beta, [], {}), discover.describe(as_alpha, [], {})
    # The same, but for the order of services: v1beta1 keeps components sorted by name.
    by_name = sorted(expected.services, key=lambda s: s.name)
    assert described == dataclasses.replace(expected, services=tuple(by_name))
    assert described.imported_args and "--disaggregation-mode" not in described.imported_args[:2]


def test_the_gpu_operators_nvidia_com_v1alpha1_is_not_taken_for_dynamos(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    """NVIDIA's GPU Operator serves nvidia.com/v1alpha1 (ClusterPolicy, NVIDIADriver): the
    group version answers, but holds no DGD. Beside a Dynamo serving v1beta1 only the agent
    writes v1beta1; with no Dynamo at all it says none is served, and sends no DGD request to
    the GPU Operator's group version."""
    emulator = start_emulator(dynamo=("v1beta1",), other_operators=True)
    cluster = connect(emulator)
    assert cluster.dgd_version == "v1beta1"
    assert cluster.served_dgd_versions == ("v1beta1",)
    cluster.apply_dgd(manifest())
    [patch] = emulator.requests(method="PATCH")
    assert patch.path == BETA_PATH

    alone = start_emulator(dynamo=(), other_operators=True)
    cluster = connect(alone)
    assert cluster.dgd_version == "none"
    with pytest.raises(ClusterError, match="serves no DynamoGraphDeployment version"):
        cluster.apply_dgd(manifest())
    dgd_paths = [r for r in alone.requests() if "dynamographdeployments" in r.path]
    assert dgd_paths == []
