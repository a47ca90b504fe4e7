"""Replicas owned by someone else: Dynamo's scaling adapter (DGDSA) and the autoscalers that
drive it, against the API emulator's Dynamo (its adapter controller and webhook,
tests/fake_kube/dynamo.py), through the Kubernetes adapter and the reconciler's plan.

An adopted v1beta1 DGD whose worker opted into the adapter: the agent never writes the DGD's
replicas there (the webhook would refuse the whole update); it scales through the adapter's
/scale subresource, and not at all once an autoscaler (here an HPA) owns that field.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from agent.cluster import dgd_versions
from agent.cluster.kube.cluster import KubernetesCluster
from agent.dgd_status import replicas_owner
from agent.manifests import rendered
from agent.reconcile import plan
from tests.fake_kube import KubeEmulator
from tests.unit.kube.conftest import Connect, StartEmulator, eventually
from tests.unit.render.builders import make_deployment

BOTH = ("v1alpha1", "v1beta1")
ADAPTER = "qwen-chat-vllmdecodeworker"
NAMESPACE = "default"


def with_adapter(emulator: KubeEmulator) -> None:
    """Someone else's v1beta1 DGD whose worker opts into the scaling adapter (2 replicas)."""
    manifest = dgd_versions.to_served(rendered(make_deployment(), namespace=NAMESPACE), "v1beta1")
    manifest["metadata"]["labels"] = {"team": "search"}
    manifest["metadata"].pop("annotations", None)
    for component in manifest["spec"]["components"]:
        if component["type"] == "worker":
            component["scalingAdapter"] = {}
    emulator.put_dgd(manifest, manager="helm")


def adopted(replicas: int) -> Any:
    return make_deployment(
        replicas=replicas, dgd_namespace=NAMESPACE, dgd_name="qwen-chat", adopted=True
    )


def worker_replicas(emulator: KubeEmulator) -> int:
    dgd = emulator.get_dgd(NAMESPACE, "qwen-chat", version="v1beta1")
    assert dgd is not None
    [worker] = [c for c in dgd["spec"]["components"] if c["name"] == "VllmDecodeWorker"]
    return int(worker["replicas"])


def reconcile(cluster: KubernetesCluster, replicas: int) -> Any:
    """One pass as the agent makes it: plan, then apply and scale."""
    spec = adopted(replicas)
    result = plan(
        {spec.deployment_id: spec},
        cluster.list_dgds(),
        namespace=NAMESPACE,
        dgd_version=cluster.dgd_version,
        adapters=cluster.list_scaling_adapters(),
    )
    assert result.failures == ()
    for apply in result.applies:
        cluster.apply_dgd(apply.manifest)
    for scale in result.scales:
        cluster.scale_adapter(scale.namespace, scale.name, scale.replicas)
    return result


def hpa_scales(emulator: KubeEmulator, replicas: int) -> None:
    """An HPA sets the adapter's replicas through /scale, as its controller does."""
    request = urllib.request.Request(
        f"{emulator.url}/apis/nvidia.com/v1beta1/namespaces/{NAMESPACE}/"
        f"dynamographdeploymentscalingadapters/{ADAPTER}/scale"
        "?fieldManager=horizontal-pod-autoscaler",
        data=json.dumps({"spec": {"replicas": replicas}}).encode(),
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 200


def test_the_adapter_is_listed_and_our_own_scaling_does_not_make_it_an_autoscaler(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=BOTH)
    with_adapter(emulator)
    cluster = connect(emulator)
    [adapter] = eventually(cluster.list_scaling_adapters, what="the adapter")
    assert (adapter.name, adapter.dgd_name, adapter.component) == (
        ADAPTER,
        "qwen-chat",
        "VllmDecodeWorker",
    )
    assert adapter.replicas == 2 and adapter.autoscaler == ""

    cluster.scale_adapter(NAMESPACE, ADAPTER, 3)
    assert worker_replicas(emulator) == 3, "the operator wrote the adapter's replicas"
    eventually(lambda: cluster.list_scaling_adapters()[0].replicas == 3, what="watched")
    assert cluster.list_scaling_adapters()[0].autoscaler == ""


def test_the_agent_scales_an_adapter_component_through_the_adapter_never_the_dgd(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=BOTH)
    with_adapter(emulator)
    cluster = connect(emulator)
    eventually(cluster.list_scaling_adapters, what="the adapter")
    eventually(cluster.list_dgds, what="the DGD")

    first = reconcile(cluster, replicas=4)
    # The DGD is taken over (labels), its replicas left as they are; the adapter says 4.
    [apply] = first.applies
    services = apply.manifest["spec"]["services"]
    assert services["VllmDecodeWorker"]["replicas"] == 2
    assert [(s.name, s.replicas) for s in first.scales] == [(ADAPTER, 4)]
    assert worker_replicas(emulator) == 4
    [dgd] = cluster.list_dgds()
    assert replicas_owner(dgd, cluster.list_scaling_adapters()) == "adapter"


def test_an_autoscaler_owning_the_adapter_is_left_alone_and_named_as_the_owner(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    emulator = start_emulator(dynamo=BOTH)
    with_adapter(emulator)
    cluster = connect(emulator)
    eventually(cluster.list_scaling_adapters, what="the adapter")
    reconcile(cluster, replicas=2)

    hpa_scales(emulator, 6)
    eventually(
        lambda: cluster.list_scaling_adapters()[0].autoscaler == "horizontal-pod-autoscaler",
        what="the HPA seen as the owner of replicas",
    )
    eventually(lambda: cluster.list_dgds()[0].spec["services"]["VllmDecodeWorker"]["replicas"] == 6)

    # The hub declares 3: the agent writes nothing that would fight the HPA, and what it
    # applies carries the HPA's 6 (so the webhook accepts it).
    result = reconcile(cluster, replicas=3)
    assert result.scales == ()
    for apply in result.applies:
        assert apply.manifest["spec"]["services"]["VllmDecodeWorker"]["replicas"] == 6
    assert worker_replicas(emulator) == 6
    [dgd] = cluster.list_dgds()
    owner = replicas_owner(dgd, cluster.list_scaling_adapters())
    assert owner == "autoscaler:horizontal-pod-autoscaler"


def test_writing_adapter_replicas_into_the_dgd_is_what_the_webhook_refuses(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    """The rule the agent keeps, shown failing when broken: a DGD write that changes an
    adapter component's replicas is refused with the operator's words, even forced."""
    emulator = start_emulator(dynamo=BOTH)
    with_adapter(emulator)
    cluster = connect(emulator)
    [dgd] = eventually(cluster.list_dgds, what="the DGD")
    manifest = dgd_versions.to_served(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": dgd.name, "namespace": dgd.namespace},
            "spec": json.loads(json.dumps(dgd.spec)),
        },
        "v1beta1",
    )
    for component in manifest["spec"]["components"]:
        if component["name"] == "VllmDecodeWorker":
            component["replicas"] = 5
    with pytest.raises(ApiException) as refused:
        CustomObjectsApi(cluster.api_client).patch_namespaced_custom_object(
            "nvidia.com",
            "v1beta1",
            NAMESPACE,
            "dynamographdeployments",
            dgd.name,
            manifest,
            field_manager="someone",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    assert refused.value.status == 422  # a webhook denial is Invalid
    assert "scaling adapter is enabled" in str(refused.value.body)
    assert worker_replicas(emulator) == 2
