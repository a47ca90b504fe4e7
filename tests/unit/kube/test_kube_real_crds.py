"""The agent against the fake API server held to Dynamo's real CRDs (tests/fake_kube/crd_schema.py).

Two Dynamo releases, each from its own CRD files (shared/reference/dynamo-crds/): 1.5 (v1beta1
stored, v1alpha1 served and converted) and 1.3 (v1alpha1 stored, v1beta1 served without
`runtimeVersionOverride`, so that field is pruned). What a real cluster does and the hand-made
fake did not: pruning, schema validation with 422 Invalid and the field path, defaults, the
operator's webhooks (annotations and `replicas` on create, an immutable provider annotation,
422 denials), and list-map merging (the `kubectl edit` drift case below).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from agent.cluster import dgd_versions
from agent.cluster.kube.cluster import FIELD_MANAGER
from agent.manifests import rendered
from agent.render import dgd
from tests.fake_kube import KubeEmulator, crd_schema
from tests.fake_kube import dynamo as fake_dynamo
from tests.unit.kube.conftest import Connect, StartEmulator, eventually
from tests.unit.render.builders import make_deployment, make_serving

pytestmark = pytest.mark.skipif(bool(crd_schema.missing()), reason=crd_schema.missing() or "-")

NAMESPACE = "default"
ENGINE_MODES = [
    (e, m) for e in ("vllm", "sglang", "trtllm") for m in ("aggregated", "disaggregated")
]


def raw_apply(emulator: KubeEmulator, version: str, body: dict[str, Any], manager: str) -> Any:
    """A server-side apply by someone else than the agent (a person, a tool)."""
    config = kubernetes.client.Configuration()
    config.host = emulator.url
    with kubernetes.client.ApiClient(config) as client:
        return CustomObjectsApi(client).patch_namespaced_custom_object(
            "nvidia.com",
            version,
            NAMESPACE,
            "dynamographdeployments",
            body["metadata"]["name"],
            body,
            field_manager=manager,
            _content_type="application/apply-patch+yaml",
        )


def beta_manifest(**serving: Any) -> dict[str, Any]:
    spec = make_deployment(serving=make_serving(**serving)) if serving else make_deployment()
    manifest = dgd_versions.to_served(rendered(spec, namespace=NAMESPACE), "v1beta1")
    return manifest


@pytest.mark.parametrize("release", ["1.5", "1.3"])
@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_what_the_agent_writes_is_admitted_unchanged_by_either_release(
    start_emulator: StartEmulator, connect: Connect, release: str, engine: str, mode: str
) -> None:
    emulator = start_emulator(dynamo_release=release)
    cluster = connect(emulator)
    spec = make_deployment(serving=make_serving(engine=engine, mode=mode))
    manifest = rendered(spec, namespace=NAMESPACE)
    cluster.apply_dgd(manifest)
    assert not emulator.refused()
    for version in ("v1alpha1", "v1beta1"):
        back = emulator.get_dgd(NAMESPACE, manifest["metadata"]["name"], version=version)
        assert back is not None
        annotations = back["metadata"]["annotations"]
        assert annotations[fake_dynamo.ORIGIN_VERSION] == f"{release}.0"
        assert fake_dynamo.PROVIDER in annotations
    # Nothing the agent wrote (v1beta1, served by both) was pruned or changed.
    back = emulator.get_dgd(NAMESPACE, manifest["metadata"]["name"], version="v1beta1")
    assert back is not None
    assert back["spec"] == dgd_versions.to_served(manifest, "v1beta1")["spec"]


@pytest.mark.parametrize("release", ["1.5", "1.3"])
def test_a_schema_violation_is_422_invalid_naming_the_field(
    start_emulator: StartEmulator, release: str
) -> None:
    emulator = start_emulator(dynamo_release=release)
    body = beta_manifest()
    body["spec"]["components"][1]["replicas"] = "two"
    body["spec"]["components"][0]["type"] = "router"
    with pytest.raises(ApiException) as refused:
        raw_apply(emulator, "v1beta1", body, "someone")
    assert refused.value.status == 422
    status = json.loads(refused.value.body)
    assert status["reason"] == "Invalid"
    fields = {c["field"] for c in status["details"]["causes"]}
    assert fields == {"spec.components[1].replicas", "spec.components[0].type"}
    assert emulator.get_dgd(NAMESPACE, "qwen-chat", version="v1beta1") is None


def test_unknown_fields_are_pruned_not_refused(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(dynamo_release="1.5")
    body = beta_manifest()
    body["spec"]["components"][1]["bogus"] = {"x": 1}
    body["spec"]["notAField"] = True
    raw_apply(emulator, "v1beta1", body, "someone")
    back = emulator.get_dgd(NAMESPACE, "qwen-chat", version="v1beta1")
    assert back is not None
    assert "notAField" not in back["spec"] and "bogus" not in back["spec"]["components"][1]


def test_dynamo_1_3_prunes_runtime_version_override_from_v1beta1_writes(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(dynamo_release="1.3")
    body = beta_manifest(image="mirror.local/vllm:dev", runtime_version="1.3.0")
    assert all(c["runtimeVersionOverride"] == "1.3.0" for c in body["spec"]["components"])
    raw_apply(emulator, "v1beta1", body, "someone")  # 1.3 has no tag rule: admitted
    back = emulator.get_dgd(NAMESPACE, "qwen-chat", version="v1beta1")
    assert back is not None
    assert all("runtimeVersionOverride" not in c for c in back["spec"]["components"])


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("tag", ["1.3.1.post1", "01.3.1", "1.3.1-rc.01", "latest"])
def test_dynamo_1_5_denies_an_unparseable_tag_without_override_on_either_version(
    start_emulator: StartEmulator, version: str, tag: str
) -> None:
    emulator = start_emulator(dynamo_release="1.5")
    spec = make_deployment(serving=make_serving(image=f"mirror.local/vllm:{tag}"))
    internal = dgd.render_dgd(spec, namespace=NAMESPACE, operator_version="1.5.0")
    for service in internal["spec"]["services"].values():
        del service["runtimeVersionOverride"]  # what the agent used to write for these tags
    with pytest.raises(ApiException) as refused:
        raw_apply(emulator, version, dgd_versions.to_served(internal, version), "someone")
    assert refused.value.status == 422
    assert "runtimeVersionOverride: Required value" in json.loads(refused.value.body)["message"]
    # As the agent renders it now: admitted.
    fixed = dgd.render_dgd(spec, namespace=NAMESPACE, operator_version="1.5.0")
    raw_apply(emulator, version, dgd_versions.to_served(fixed, version), "someone")


def test_the_webhook_defaults_replicas_and_keeps_the_provider(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(dynamo_release="1.5")
    body = beta_manifest()
    for component in body["spec"]["components"]:
        component.pop("replicas", None)
    raw_apply(emulator, "v1beta1", body, "someone")
    back = emulator.get_dgd(NAMESPACE, "qwen-chat", version="v1beta1")
    assert back is not None
    assert {c["replicas"] for c in back["spec"]["components"]} == {1}
    changed = copy.deepcopy(back)
    changed["metadata"]["annotations"][fake_dynamo.PROVIDER] = "grove"
    changed["metadata"].pop("managedFields", None)
    config = kubernetes.client.Configuration()
    config.host = emulator.url
    with kubernetes.client.ApiClient(config) as client, pytest.raises(ApiException) as refused:
        CustomObjectsApi(client).replace_namespaced_custom_object(
            "nvidia.com", "v1beta1", NAMESPACE, "dynamographdeployments", "qwen-chat", changed
        )
    assert refused.value.status == 422
    assert "immutable" in json.loads(refused.value.body)["message"]


def add_env(obj: dict[str, Any]) -> None:
    """`kubectl edit`: one more env var in the decode worker's main container."""
    for component in obj["spec"]["components"]:
        if component["name"] == "VllmDecodeWorker":
            [main] = [c for c in component["podTemplate"]["spec"]["containers"]]
            main.setdefault("env", []).append({"name": "DEBUG_LEVEL", "value": "3"})


@pytest.mark.parametrize("real", [True, False])
def test_a_kubectl_edit_of_an_env_var_merges_silently_on_a_real_server(
    start_emulator: StartEmulator, connect: Connect, real: bool
) -> None:
    """A real server merges the env list per name (list-map): the user's variable is theirs,
    the agent's next apply of the same manifest succeeds, and the variable stays. The
    hand-made fake treated env as atomic and answered 409: the drift the agent must see on
    a real cluster was a conflict in tests."""
    emulator = start_emulator(
        **({"dynamo_release": "1.5"} if real else {"dynamo": ("v1alpha1", "v1beta1")})
    )
    cluster = connect(emulator)
    spec = make_deployment(replicas=1)
    manifest = rendered(spec, namespace=NAMESPACE)
    manifest["spec"]["services"]["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]["env"] = [
        {"name": "HF_HOME", "value": "/models"}
    ]
    cluster.apply_dgd(manifest)
    emulator.store.edit(emulator.dgd_kind, NAMESPACE, "qwen-chat", add_env, manager="kubectl-edit")
    if not real:
        with pytest.raises(Exception, match="kubectl-edit"):
            cluster.apply_dgd(manifest)
        return
    cluster.apply_dgd(manifest)
    back = emulator.get_dgd(NAMESPACE, "qwen-chat", version="v1beta1")
    assert back is not None
    [worker] = [c for c in back["spec"]["components"] if c["name"] == "VllmDecodeWorker"]
    env = worker["podTemplate"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "HF_HOME", "value": "/models"}, {"name": "DEBUG_LEVEL", "value": "3"}]
    owners = {m["manager"]: m["fieldsV1"] for m in back["metadata"]["managedFields"]}
    element = 'k:{"name":"DEBUG_LEVEL"}'
    assert element in _keys(owners["kubectl-edit"]) and element not in _keys(owners[FIELD_MANAGER])
    eventually(lambda: cluster.list_dgds(), what="the DGD in the cache")


def _keys(tree: Any) -> set[str]:
    """Every key of a managedFields (FieldsV1) tree."""
    if not isinstance(tree, dict):
        return set()
    return set(tree) | {k for v in tree.values() for k in _keys(v)}


def test_the_agent_says_who_else_set_fields_of_its_dgd(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    """The decision on such drift: the agent does not fight the user's change (a forced apply
    would take the variable; the next unforced one would remove it, and the user's tool would
    put it back), and it does not hide it: the deployment's status message names the other
    field managers until their fields are gone."""
    from agent.dgd_status import status as _status

    emulator = start_emulator(dynamo_release="1.5")
    cluster = connect(emulator)
    spec = make_deployment(replicas=1)
    cluster.apply_dgd(rendered(spec, namespace=NAMESPACE))
    [mine] = eventually(lambda: cluster.list_dgds(), what="our DGD")
    assert mine.foreign_managers == ()
    emulator.store.edit(emulator.dgd_kind, NAMESPACE, "qwen-chat", add_env, manager="kubectl-edit")
    [edited] = eventually(
        lambda: [d for d in cluster.list_dgds() if d.foreign_managers], what="the edit"
    )
    assert edited.foreign_managers == ("kubectl-edit",)
    message = _status(spec, edited, []).message
    assert "drift" in message and "kubectl-edit" in message
