"""SimulatedCluster as a ClusterPort: validation, generations, revisions, time, read-only, seeds."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from agent.cluster.port import ClusterError, ClusterPort, ReadOnlyViolation
from agent.cluster.simulated.cluster import (
    InvalidManifest,
    SeedFileError,
    SimulatedCluster,
    load_seed_file,
)
from tests.unit.cluster import builders
from tests.unit.cluster.conftest import MakeCluster
from tests.unit.cluster.helpers import FakeClock, drive, pods_of


def test_it_is_a_cluster_port(make_cluster: MakeCluster) -> None:
    cluster: ClusterPort = make_cluster()

    assert cluster.list_dgds() == []


def test_nodes_are_named_after_the_cluster_or_their_group_prefix(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8;nodes=1,gpus=4,class=A100-40GB,name_prefix=a100")

    nodes = cluster.list_nodes()

    assert [(n.name, n.allocatable_gpus) for n in nodes] == [
        ("sim-a-node-0", 8),
        ("sim-a-node-1", 8),
        ("a100-node-2", 4),
    ]
    assert nodes[2].labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert nodes[0].labels["kubernetes.io/hostname"] == "sim-a-node-0"


def edited(change: Any) -> dict[str, Any]:
    manifest = builders.aggregated()
    change(manifest)
    return manifest


def set_in(*path: str, value: object) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        target = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        (
            edited(set_in("apiVersion", value="nvidia.com/v1beta2")),
            "apiVersion must be nvidia.com/v1alpha1",
        ),
        (edited(set_in("kind", value="Deployment")), "kind must be DynamoGraphDeployment"),
        (edited(lambda m: m.pop("metadata")), "metadata must be a mapping"),
        (edited(set_in("metadata", "name", value="")), "metadata.name must be a non-empty string"),
        (
            edited(lambda m: m["metadata"].pop("namespace")),
            "metadata.namespace must be a non-empty",
        ),
        (edited(set_in("spec", value=[])), "spec must be a mapping, got list"),
        (edited(set_in("spec", "services", value=["Frontend"])), "spec.services must be a mapping"),
        (
            edited(set_in("spec", "services", "Frontend", value="x")),
            "spec.services.Frontend must be a mapping",
        ),
        (
            edited(set_in("spec", "services", "VllmWorker", "replicas", value=-1)),
            "spec.services.VllmWorker.replicas must be a non-negative whole number",
        ),
        (
            edited(
                set_in("spec", "services", "VllmWorker", "resources", "limits", "gpu", value="two")
            ),
            ".resources.limits.gpu must be a non-negative whole number",
        ),
        (
            edited(
                set_in(
                    "spec",
                    "services",
                    "VllmWorker",
                    "extraPodSpec",
                    "mainContainer",
                    "args",
                    value="--model m",
                )
            ),
            ".mainContainer.args must be a list",
        ),
        (
            edited(set_in("metadata", "labels", value={"a": 1})),
            "metadata.labels.a must map strings to strings",
        ),
        (
            edited(set_in("metadata", "annotations", value=[])),
            "metadata.annotations must be a mapping",
        ),
        ("not a manifest", "manifest must be a mapping"),
    ],
)
def test_apply_refuses_a_manifest_it_cannot_act_on_with_a_permanent_error(
    make_cluster: MakeCluster, manifest: Any, says: str
) -> None:
    cluster = make_cluster()

    with pytest.raises(ClusterError) as caught:
        cluster.apply_dgd(manifest)

    assert caught.value.retryable is False
    assert says in str(caught.value)
    assert cluster.list_dgds() == []


def test_the_error_names_the_dgd(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    with pytest.raises(ClusterError, match=r"^DGD default/llama: spec\.services"):
        cluster.apply_dgd(edited(set_in("spec", "services", value=None)))


def test_apply_creates_a_dgd_at_generation_one_with_its_labels(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(builders.aggregated(labels={"wingsmith.dev/deployment-id": "dep_1"}))

    (dgd,) = cluster.list_dgds()
    assert (dgd.namespace, dgd.name, dgd.generation) == ("default", "llama", 1)
    assert dgd.labels == {"wingsmith.dev/deployment-id": "dep_1"}
    assert dgd.spec == builders.aggregated(labels={"wingsmith.dev/deployment-id": "dep_1"})["spec"]


METADATA = {"name": "llama", "namespace": "default"}


@pytest.mark.parametrize(
    ("second", "generation"),
    [
        (builders.aggregated(), 1),
        ({**builders.aggregated(), "metadata": {**METADATA, "labels": {"team": "x"}}}, 1),
        ({**builders.aggregated(), "metadata": {**METADATA, "annotations": {"a": "1"}}}, 1),
        (builders.aggregated(replicas=2), 2),
        (builders.with_args(builders.aggregated(), "VllmWorker", ("--model", "x")), 2),
    ],
)
def test_generation_increments_only_when_the_spec_changes(
    make_cluster: MakeCluster, second: dict[str, Any], generation: int
) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(builders.aggregated())

    cluster.apply_dgd(second)

    assert cluster.list_dgds()[0].generation == generation
    assert cluster.list_dgds()[0].status["observedGeneration"] == generation


def test_metadata_annotations_are_kept_and_changing_them_restarts_nothing(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    manifest = builders.aggregated()
    cluster.apply_dgd(manifest)
    pods = {p.name for p in cluster.list_pods()}
    before = cluster.revision()

    manifest["metadata"]["annotations"] = {"wingsmith.dev/spec-hash": "abc"}
    cluster.apply_dgd(manifest)

    (dgd,) = cluster.list_dgds()
    assert dgd.annotations == {"wingsmith.dev/spec-hash": "abc"}
    assert dgd.generation == 1
    assert cluster.revision() > before
    assert {p.name for p in cluster.list_pods()} == pods


def test_what_the_caller_does_to_its_dicts_afterwards_does_not_reach_the_cluster(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    manifest = builders.aggregated()
    cluster.apply_dgd(manifest)

    manifest["spec"]["services"]["VllmWorker"]["replicas"] = 9
    cluster.list_dgds()[0].spec["services"].clear()
    cluster.list_dgds()[0].status.clear()

    (dgd,) = cluster.list_dgds()
    assert dgd.spec["services"]["VllmWorker"]["replicas"] == 1
    assert dgd.status["state"] == "successful"


# -- revision -----------------------------------------------------------------------------------


def test_revision_increases_on_every_observable_change(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    seen = [cluster.revision()]

    def step(action: Any) -> None:
        action()
        seen.append(cluster.revision())
        assert seen[-1] > seen[-2], action

    step(lambda: cluster.apply_dgd(builders.aggregated()))
    step(lambda: (clock.tick(2), cluster.advance()))
    step(lambda: cluster.apply_dgd(builders.aggregated(labels={"a": "b"})))
    step(lambda: cluster.apply_dgd(builders.aggregated(replicas=2)))
    step(
        lambda: cluster.set_device_health(cluster.node_gpus("sim-a-node-0")[7].uuid, healthy=False)
    )
    step(lambda: cluster.delete_dgd("default", "llama"))
    step(lambda: cluster.add_node())


def test_revision_does_not_move_on_no_ops(make_cluster: MakeCluster, clock: FakeClock) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated())
    drive(cluster, clock)
    before = cluster.revision()

    cluster.apply_dgd(builders.aggregated())
    cluster.delete_dgd("default", "absent")
    clock.tick(60)
    cluster.advance()
    cluster.list_pods()
    cluster.list_dgds()
    cluster.list_nodes()
    gpu = cluster.node_gpus("sim-a-node-0")[0]
    cluster.set_device_health(gpu.uuid, healthy=True)

    assert cluster.revision() == before


def test_listings_are_reused_while_nothing_changes(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(builders.aggregated())

    first, second = cluster.list_pods(), cluster.list_pods()

    assert first == second and first is not second
    assert all(a is b for a, b in zip(first, second, strict=True))


# -- time -------------------------------------------------------------------------------------


def test_next_due_is_exactly_when_the_next_pod_becomes_ready(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2.5s")
    assert cluster.next_due() is None
    cluster.apply_dgd(builders.aggregated("first"))
    clock.tick(1)
    cluster.apply_dgd(builders.aggregated("second"))

    assert cluster.next_due() == 1002.5
    clock.now = 1002.5
    assert cluster.advance() == 2  # the first graph's frontend and worker
    assert cluster.next_due() == 1003.5
    clock.now = 1003.5
    cluster.advance()
    assert cluster.next_due() is None


def test_next_due_forgets_pods_that_went_away(make_cluster: MakeCluster, clock: FakeClock) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated())

    cluster.delete_dgd("default", "llama")

    assert cluster.next_due() is None


def test_a_late_advance_gives_what_stepping_on_time_would_have(clock: FakeClock) -> None:
    def rolled(step_late: bool) -> list[tuple[str, bool]]:
        clock.now = 1000.0
        cluster = SimulatedCluster("nodes=2,gpus=8,ready_after=2s", cluster_id="c", clock=clock)
        manifest = builders.aggregated(replicas=4, gpus=4)
        cluster.apply_dgd(manifest)
        drive(cluster, clock)
        cluster.apply_dgd(builders.with_args(manifest, "VllmWorker", ("--model", "x")))
        if step_late:
            clock.tick(100)
            cluster.advance()
        else:
            drive(cluster, clock)
        return sorted((p.name, p.ready) for p in cluster.list_pods())

    assert rolled(step_late=True) == rolled(step_late=False)


def test_idle_clusters_do_no_work_when_stepped(clock: FakeClock) -> None:
    clusters = [
        SimulatedCluster("nodes=1,gpus=8,ready_after=1s", cluster_id=f"c{i}", clock=clock)
        for i in range(1000)
    ]
    for cluster in clusters:
        cluster.apply_dgd(builders.aggregated())
    clock.tick(1)
    for cluster in clusters:
        cluster.advance()
    revisions = [c.revision() for c in clusters]
    reads = clock.reads

    clock.tick(1)
    stepped = [c.advance() for c in clusters]

    assert stepped == [0] * 1000
    assert [c.revision() for c in clusters] == revisions
    assert [c.next_due() for c in clusters] == [None] * 1000
    assert clock.reads == reads  # nothing due: the clock is not even read


# -- read-only --------------------------------------------------------------------------------


def test_read_only_refuses_every_mutation_and_counts_the_attempts(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(read_only=True)
    cluster.seed([builders.aggregated()])
    before = cluster.revision()

    with pytest.raises(ReadOnlyViolation):
        cluster.apply_dgd(builders.aggregated(replicas=3))
    with pytest.raises(ReadOnlyViolation):
        cluster.delete_dgd("default", "llama")
    with pytest.raises(ReadOnlyViolation):
        cluster.apply_dgd({"not": "even valid"})

    assert cluster.mutations_refused == 3
    assert cluster.revision() == before
    assert len(pods_of(cluster, "VllmWorker")) == 1


def test_a_writable_cluster_counts_no_refusals(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(builders.aggregated())
    cluster.delete_dgd("default", "llama")

    assert cluster.mutations_refused == 0


# -- seeds ------------------------------------------------------------------------------------


def test_seeded_dgds_run_ready_pods_at_once(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=30s")

    cluster.seed([builders.aggregated("old-llama", replicas=2, gpus=4), builders.disaggregated()])

    assert {d.name for d in cluster.list_dgds()} == {"old-llama", "llama"}
    assert all(p.ready and p.phase == "Running" for p in cluster.list_pods())
    assert all(d.status["state"] == "successful" for d in cluster.list_dgds())
    assert cluster.next_due() is None


def test_pods_the_agent_adds_to_a_seeded_dgd_take_ready_after(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=30s")
    cluster.seed([builders.aggregated()])

    cluster.apply_dgd(builders.aggregated(replicas=2))

    assert sorted(p.ready for p in pods_of(cluster, "VllmWorker")) == [False, True]


def test_seed_checks_every_manifest_before_creating_any(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    bad = builders.aggregated("bad")
    bad["kind"] = "Deployment"

    with pytest.raises(InvalidManifest):
        cluster.seed([builders.aggregated(), bad])

    assert cluster.list_dgds() == []


SEED_DOCS = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: one, namespace: team-a}
spec:
  services:
    VllmWorker: {componentType: worker, replicas: 1, resources: {limits: {gpu: "2"}}}
---
---
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: two, namespace: team-a}
spec: {services: {}}
"""

SEED_LIST = """\
- apiVersion: nvidia.com/v1alpha1
  kind: DynamoGraphDeployment
  metadata: {name: one, namespace: ns}
  spec: {services: {}}
- apiVersion: nvidia.com/v1alpha1
  kind: DynamoGraphDeployment
  metadata: {name: two, namespace: ns}
  spec: {services: {}}
"""

SEED_KUBECTL = """\
apiVersion: v1
kind: List
items:
- apiVersion: nvidia.com/v1alpha1
  kind: DynamoGraphDeployment
  metadata: {name: one, namespace: ns, uid: abc, resourceVersion: "7"}
  spec: {services: {}}
  status: {state: successful}
"""


@pytest.mark.parametrize(
    ("text", "names"),
    [(SEED_DOCS, ["one", "two"]), (SEED_LIST, ["one", "two"]), (SEED_KUBECTL, ["one"])],
)
def test_a_seed_file_may_hold_documents_a_list_or_a_kubectl_list(
    tmp_path: Path, text: str, names: list[str]
) -> None:
    path = tmp_path / "seed.yaml"
    path.write_text(text)

    manifests = load_seed_file(path)

    assert [m["metadata"]["name"] for m in manifests] == names


def test_a_loaded_seed_file_seeds_a_cluster(tmp_path: Path, make_cluster: MakeCluster) -> None:
    path = tmp_path / "seed.yaml"
    path.write_text(SEED_DOCS)
    cluster = make_cluster()

    cluster.seed(load_seed_file(path))

    (pod,) = cluster.list_pods()
    assert (pod.namespace, pod.gpu_request, pod.ready) == ("team-a", 2, True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (SEED_DOCS.replace("name: two", "name: ''"), "document 3: metadata.name"),
        (
            SEED_DOCS.replace("kind: DynamoGraphDeployment", "kind: Pod", 1),
            "document 1: kind must be",
        ),
        (SEED_LIST.replace("name: two", "name: 2"), "document 1, item 2: metadata.name"),
        ("- just a string\n", "document 1, item 1: a DGD manifest is a mapping, got str"),
        ("key: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_bad_seed_file_names_the_file_and_the_document(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "seed.yaml"
    path.write_text(text)

    with pytest.raises(SeedFileError) as caught:
        load_seed_file(path)

    assert str(caught.value).startswith(str(path))
    assert says in str(caught.value)


def test_a_missing_seed_file_is_a_seed_file_error(tmp_path: Path) -> None:
    with pytest.raises(SeedFileError, match="cannot read"):
        load_seed_file(tmp_path / "absent.yaml")


def test_seeding_ignores_what_a_seed_file_says_about_status(make_cluster: MakeCluster) -> None:
    manifest = copy.deepcopy(builders.aggregated())
    manifest["status"] = {"state": "failed"}
    cluster = make_cluster()

    cluster.seed([manifest])

    assert cluster.list_dgds()[0].status["state"] == "successful"
