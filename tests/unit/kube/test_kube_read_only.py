"""Read-only mode: no mutating request ever reaches the API server.

The `guarded` fixture fails any test after which the emulator's request log holds a request
that is not a GET; every read-only test here uses it, so a leak fails the suite, not only
the assertion that looks for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import CoreV1Api, CustomObjectsApi

from agent.cluster.kube.readonly import ReadOnlyApiClient
from agent.cluster.port import ReadOnlyViolation
from tests.fake_kube import DGDS, PODS, KubeEmulator
from tests.unit.cluster.builders import aggregated
from tests.unit.kube import builders
from tests.unit.kube.conftest import MakeCluster, eventually


@pytest.fixture
def guarded(emulator: KubeEmulator) -> Iterator[KubeEmulator]:
    yield emulator
    leaked = emulator.mutating_requests()
    assert leaked == [], f"mutating requests reached the API server: {leaked}"


def test_apply_and_delete_are_refused_before_any_request(
    guarded: KubeEmulator, make_cluster: MakeCluster
) -> None:
    guarded.store.apply(DGDS, "default", "llama", aggregated(), manager="helm", force=False)
    cluster = make_cluster(read_only=True)

    with pytest.raises(ReadOnlyViolation):
        cluster.apply_dgd(aggregated(labels=builders.ours()))
    with pytest.raises(ReadOnlyViolation):
        cluster.delete_dgd("default", "llama")

    assert cluster.mutations_refused == 2
    assert [d.name for d in cluster.list_dgds()] == ["llama"], "reads still work"
    assert {r.verb for r in guarded.requests()} <= {"get", "list", "watch"}


def test_reads_and_watches_work_in_read_only_mode(
    guarded: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster(read_only=True)
    guarded.store.update(PODS, builders.pod(), manager="kubelet")
    eventually(lambda: cluster.list_pods(), what="the watched pod")
    assert {r.verb for r in guarded.requests()} == {"list", "watch"}


def test_with_the_first_lock_off_the_client_still_refuses(
    guarded: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster(read_only=True)
    cluster.read_only = False  # as if a bug skipped the adapter's own check

    with pytest.raises(ReadOnlyViolation) as raised:
        cluster.apply_dgd(aggregated(labels=builders.ours()))
    assert "PATCH /apis/nvidia.com/v1alpha1/" in str(raised.value)
    with pytest.raises(ReadOnlyViolation):
        cluster.delete_dgd("default", "llama")


@pytest.mark.parametrize(
    "call",
    [
        lambda core, custom: custom.patch_namespaced_custom_object(
            "nvidia.com", "v1alpha1", "default", "dynamographdeployments", "x", {}
        ),
        lambda core, custom: custom.create_namespaced_custom_object(
            "nvidia.com", "v1alpha1", "default", "dynamographdeployments", {}
        ),
        lambda core, custom: core.delete_namespaced_pod("p", "default"),
        lambda core, custom: core.delete_collection_namespaced_pod("default"),
        lambda core, custom: core.create_namespace({"metadata": {"name": "x"}}),
        lambda core, custom: core.patch_node("n", {"metadata": {"labels": {"a": "b"}}}),
        lambda core, custom: core.replace_namespaced_pod("p", "default", {}),
    ],
    ids=["patch", "create", "delete", "delete-collection", "create-ns", "patch-node", "put"],
)
def test_every_mutating_api_call_is_refused_by_the_wrapped_client(
    guarded: KubeEmulator, api_client: Any, call: Any
) -> None:
    client = ReadOnlyApiClient(api_client)
    with pytest.raises(ReadOnlyViolation):
        call(CoreV1Api(client), CustomObjectsApi(client))
    assert CoreV1Api(client).list_node().items == [], "GETs pass"


def test_the_rest_layer_refuses_on_its_own(guarded: KubeEmulator, api_client: Any) -> None:
    client = ReadOnlyApiClient(api_client)
    for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"):
        with pytest.raises(ReadOnlyViolation):
            client.rest_client.request(method, f"{guarded.url}/api/v1/nodes")


def test_the_shared_client_stays_writable_for_others(
    emulator: KubeEmulator, api_client: Any
) -> None:
    # The Lease elector will share the client: wrapping a view must not lock it too. This
    # also shows that the request log sees a mutating request when one is sent.
    ReadOnlyApiClient(api_client).close()
    CustomObjectsApi(api_client).patch_namespaced_custom_object(
        "nvidia.com",
        "v1alpha1",
        "default",
        "dynamographdeployments",
        "llama",
        aggregated(),
        field_manager="someone-else",
        _content_type="application/apply-patch+yaml",
    )
    assert [r.method for r in emulator.mutating_requests()] == ["PATCH"]
    assert emulator.store.get(DGDS, "default", "llama") is not None
