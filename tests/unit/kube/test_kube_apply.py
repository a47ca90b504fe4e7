"""Writes: server-side apply of DGDs (create, update, conflicts with other managers), deletes,
and how failures surface as ClusterError."""

from __future__ import annotations

import copy
import json

import pytest

from agent.cluster.kube.cluster import APPLY_PATCH, FIELD_MANAGER
from agent.cluster.kube.errors import ApplyConflict
from agent.cluster.port import ClusterError
from tests.fake_kube import DGDS, KubeEmulator
from tests.unit.cluster.builders import aggregated, scaled
from tests.unit.kube import builders
from tests.unit.kube.conftest import MakeCluster, eventually

DGD_PATH = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeployments/llama"


def manifest(**kwargs: object) -> dict[str, object]:
    return aggregated(labels=builders.ours(), **kwargs)


def test_apply_creates_the_dgd_with_a_server_side_apply_patch(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(manifest())

    [patch] = emulator.requests(method="PATCH")
    assert patch.path == DGD_PATH
    assert patch.content_type == APPLY_PATCH
    assert patch.query["fieldManager"] == FIELD_MANAGER == "wingsmith-hangar"
    assert patch.query["force"] == "false"
    assert json.loads(patch.body)["spec"] == manifest()["spec"]
    stored = emulator.store.get(DGDS, "default", "llama")
    assert stored is not None and stored["spec"] == manifest()["spec"]
    managers = {m["manager"]: m["operation"] for m in stored["metadata"]["managedFields"]}
    assert managers == {FIELD_MANAGER: "Apply"}


def test_apply_updates_only_what_changed_and_the_watch_brings_it_back(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(manifest())
    eventually(lambda: cluster.list_dgds(), what="the DGD in the cache")
    cluster.apply_dgd(scaled(manifest(), "VllmWorker", 3))

    def replicas() -> object:
        [dgd] = cluster.list_dgds()
        return dgd.spec["services"]["VllmWorker"]["replicas"] == 3 and dgd

    dgd = eventually(replicas, what="the scaled DGD")
    assert dgd.generation == 2
    assert dgd.labels == builders.ours()


def test_applying_the_same_manifest_twice_changes_nothing(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(manifest())
    first = emulator.store.get(DGDS, "default", "llama")
    cluster.apply_dgd(copy.deepcopy(manifest()))
    assert emulator.store.get(DGDS, "default", "llama") == first


def test_apply_drops_fields_we_applied_before_and_no_longer_do(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    with_env = manifest()
    with_env["spec"]["envs"] = [{"name": "DYN_LOG", "value": "debug"}]
    cluster.apply_dgd(with_env)
    cluster.apply_dgd(manifest())
    stored = emulator.store.get(DGDS, "default", "llama")
    assert stored is not None and "envs" not in stored["spec"]


def test_a_field_another_manager_owns_is_a_conflict_naming_that_manager(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(manifest())

    def kubectl_scales(obj: dict) -> None:
        obj["spec"]["services"]["VllmWorker"]["replicas"] = 5

    emulator.store.edit(DGDS, "default", "llama", kubectl_scales, manager="kubectl-edit")
    before = emulator.store.get(DGDS, "default", "llama")

    with pytest.raises(ApplyConflict) as raised:
        cluster.apply_dgd(scaled(manifest(), "VllmWorker", 2))

    assert raised.value.managers == ("kubectl-edit",)
    assert raised.value.fields == (".spec.services.VllmWorker.replicas",)
    assert raised.value.retryable is False
    assert "kubectl-edit" in str(raised.value)
    assert emulator.store.get(DGDS, "default", "llama") == before, "nothing may be clobbered"
    assert all(r.query.get("force") == "false" for r in emulator.requests(method="PATCH"))


def test_taking_over_an_adopted_dgd_takes_what_it_changes_at_the_version_it_read(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    # Someone else's DGD (kubectl owns every field), taken under management: the apply that
    # scales it takes the replicas (forced), conditional on the version it was made from.
    emulator.store.update(DGDS, aggregated(namespace="default"), manager="kubectl-create")
    cluster = make_cluster()
    [live] = eventually(lambda: cluster.list_dgds(), what="the DGD in the cache")
    assert live.resource_version

    with pytest.raises(ApplyConflict):
        cluster.apply_dgd(scaled(manifest(), "VllmWorker", 3))  # not taking over: refused
    cluster.apply_dgd(scaled(manifest(), "VllmWorker", 3), take_over=live.resource_version)
    # Back from the apply, the cache already holds the write: the next pass plans from it.
    [cached] = cluster.list_dgds()
    assert cached.resource_version != live.resource_version
    assert cached.spec["services"]["VllmWorker"]["replicas"] == 3

    stored = emulator.store.get(DGDS, "default", "llama")
    assert stored is not None and stored["spec"]["services"]["VllmWorker"]["replicas"] == 3
    taking = emulator.requests(method="PATCH")[-1]
    assert taking.query["force"] == "true"
    assert json.loads(taking.body)["metadata"]["resourceVersion"] == live.resource_version
    owners = {
        m["manager"]: m["fieldsV1"]["f:spec"]["f:services"]["f:VllmWorker"]
        for m in stored["metadata"]["managedFields"]
    }
    assert "f:replicas" in owners[FIELD_MANAGER] and "f:replicas" not in owners["kubectl-create"]
    assert "f:componentType" in owners["kubectl-create"], "what it did not change stays shared"


def test_taking_over_a_dgd_changed_since_it_was_read_clobbers_nothing(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.update(DGDS, aggregated(namespace="default"), manager="kubectl-create")
    cluster = make_cluster()
    [live] = eventually(lambda: cluster.list_dgds(), what="the DGD in the cache")

    def kubectl_scales(obj: dict) -> None:
        obj["spec"]["services"]["VllmWorker"]["replicas"] = 5

    emulator.store.edit(DGDS, "default", "llama", kubectl_scales, manager="kubectl-edit")
    before = emulator.store.get(DGDS, "default", "llama")

    with pytest.raises(ClusterError) as raised:
        cluster.apply_dgd(scaled(manifest(), "VllmWorker", 3), take_over=live.resource_version)

    assert raised.value.retryable and "has been modified" in str(raised.value)
    assert emulator.store.get(DGDS, "default", "llama") == before, "nothing may be clobbered"
    assert emulator.requests(method="PATCH")[-1].status == 409


def test_the_same_value_another_manager_set_is_no_conflict(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.apply(DGDS, "default", "llama", manifest(), manager="helm", force=False)
    cluster = make_cluster()
    cluster.apply_dgd(manifest())
    stored = emulator.store.get(DGDS, "default", "llama")
    assert stored is not None
    assert {m["manager"] for m in stored["metadata"]["managedFields"]} == {"helm", FIELD_MANAGER}


def test_delete_removes_the_dgd_and_the_watch_sees_it_go(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(manifest())
    eventually(lambda: cluster.list_dgds(), what="the DGD in the cache")
    cluster.delete_dgd("default", "llama")
    assert emulator.store.get(DGDS, "default", "llama") is None
    [delete] = emulator.requests(method="DELETE")
    assert delete.path == DGD_PATH
    assert delete.query["propagationPolicy"] == "Background"
    eventually(lambda: not cluster.list_dgds(), what="the DGD to leave the cache")


def test_deleting_what_is_not_there_is_not_an_error(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    cluster.delete_dgd("default", "nothing-here")
    assert len(emulator.requests(method="DELETE")) == 1


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(500, True), (503, True), (429, True), (422, False), (403, False), (400, False)],
)
def test_server_errors_are_retryable_and_validation_errors_are_not(
    emulator: KubeEmulator, make_cluster: MakeCluster, status: int, retryable: bool
) -> None:
    cluster = make_cluster()
    emulator.fail(status, method="PATCH", times=1)
    with pytest.raises(ClusterError) as raised:
        cluster.apply_dgd(manifest())
    assert raised.value.retryable is retryable
    assert f"HTTP {status}" in str(raised.value)
    assert "injected fault" in str(raised.value), "the server's message is kept"


def test_a_dropped_connection_is_a_retryable_error(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    emulator.fail(method="PATCH", drop=True, times=1)
    with pytest.raises(ClusterError) as raised:
        cluster.apply_dgd(manifest())
    assert raised.value.retryable is True
    assert raised.value.__cause__ is not None


def test_delete_failures_are_wrapped_too(emulator: KubeEmulator, make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    emulator.fail(503, method="DELETE")
    with pytest.raises(ClusterError) as raised:
        cluster.delete_dgd("default", "llama")
    assert raised.value.retryable is True


def test_a_manifest_without_a_namespace_is_refused_before_any_request(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    broken = manifest()
    del broken["metadata"]["namespace"]
    with pytest.raises(ClusterError) as raised:
        cluster.apply_dgd(broken)
    assert raised.value.retryable is False
    assert emulator.requests(method="PATCH") == []


def test_applying_into_a_namespace_nobody_watches_is_refused(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster(namespaces=("serving",))
    with pytest.raises(ClusterError) as raised:
        cluster.apply_dgd(manifest(namespace="default"))
    assert raised.value.retryable is False
    assert emulator.requests(method="PATCH") == []
