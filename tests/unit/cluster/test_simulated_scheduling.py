"""Pods from DGDs: what they look like, where they go, when they are ready, how status follows."""

from __future__ import annotations

import re

import pytest

from agent.cluster import port
from agent.cluster.simulated.cluster import SimulatedCluster
from tests.unit.cluster import builders
from tests.unit.cluster.conftest import MakeCluster
from tests.unit.cluster.helpers import FakeClock, gpus_in_use, pods_of


def status(cluster: SimulatedCluster, name: str = "llama") -> dict:
    return next(d for d in cluster.list_dgds() if d.name == name).status


def ready_condition(cluster: SimulatedCluster, name: str = "llama") -> dict:
    return status(cluster, name)["conditions"][0]


def test_apply_creates_one_pod_per_replica_of_every_service(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(builders.aggregated(replicas=3))

    assert len(pods_of(cluster, "Frontend")) == 1
    assert len(pods_of(cluster, "VllmWorker")) == 3


def test_pods_carry_dynamo_labels_merged_over_the_services_labels(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    manifest = builders.dgd(
        services={
            "VllmWorker": builders.service(
                component="worker",
                gpus=1,
                labels={port.LABEL_DEPLOYMENT_ID: "dep_1", "team": "a"},
                pod_labels={port.LABEL_SERVING_DIGEST: "svg_1", "team": "b"},
            )
        }
    )

    cluster.apply_dgd(manifest)

    (pod,) = cluster.list_pods()
    assert pod.labels[port.LABEL_DEPLOYMENT_ID] == "dep_1"
    assert pod.labels[port.LABEL_SERVING_DIGEST] == "svg_1"
    assert pod.labels["team"] == "b"
    assert pod.labels[port.DYNAMO_GRAPH] == "llama"
    assert pod.labels[port.DYNAMO_COMPONENT] == "VllmWorker"
    assert pod.labels[port.DYNAMO_COMPONENT_TYPE] == "worker"
    assert pod.labels[port.DYNAMO_SELECTOR] == "llama-vllmworker"
    worker_hash = pod.labels[port.DYNAMO_WORKER_HASH]
    assert pod.labels[port.DYNAMO_NAMESPACE] == f"default-llama-{worker_hash}"
    assert port.DYNAMO_SUB_COMPONENT_TYPE not in pod.labels


def test_frontend_pods_have_no_worker_hash_and_the_base_dynamo_namespace(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(builders.aggregated())

    (frontend,) = pods_of(cluster, "Frontend")
    assert frontend.labels[port.DYNAMO_COMPONENT_TYPE] == "frontend"
    assert frontend.labels[port.DYNAMO_NAMESPACE] == "default-llama"
    assert port.DYNAMO_WORKER_HASH not in frontend.labels


def test_disaggregated_workers_carry_their_sub_component_type(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(builders.disaggregated(prefill=2, decode=1))

    subs = sorted(p.labels.get(port.DYNAMO_SUB_COMPONENT_TYPE, "") for p in cluster.list_pods())
    assert subs == ["", "decode", "prefill", "prefill"]


def test_a_pod_takes_gpu_request_argv_and_image_from_its_service(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(
        builders.aggregated(gpus=4, args=("--model", "m", "--tensor-parallel-size", "4"))
    )

    (worker,) = pods_of(cluster, "VllmWorker")
    assert worker.gpu_request == 4
    assert worker.argv == (
        "python3",
        "-m",
        "dynamo.vllm",
        "--model",
        "m",
        "--tensor-parallel-size",
        "4",
    )
    assert worker.image == builders.IMAGE
    assert worker.namespace == "default"


def test_gpu_request_falls_back_to_requests_when_limits_have_none(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    worker = builders.service(component="worker")
    worker["resources"] = {"requests": {"gpu": 2}}

    cluster.apply_dgd(builders.dgd(services={"W": worker}))

    assert [p.gpu_request for p in cluster.list_pods()] == [2]


def test_pod_names_say_graph_service_template_and_ordinal(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    cluster.apply_dgd(builders.aggregated(replicas=2))

    names = sorted(p.name for p in pods_of(cluster, "VllmWorker"))
    assert all(re.fullmatch(r"llama-vllmworker-[0-9a-f]{5}-[0-9]+", n) for n in names)
    assert [n.rsplit("-", 1)[1] for n in names] == ["0", "1"]


def test_pods_take_devices_first_fit_on_one_node_each(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8")

    cluster.apply_dgd(builders.aggregated(replicas=3, gpus=4))

    nodes = [p.node_name for p in sorted(pods_of(cluster, "VllmWorker"), key=lambda p: p.name)]
    assert nodes == ["sim-a-node-0", "sim-a-node-0", "sim-a-node-1"]


def test_a_pod_that_fits_no_node_waits_pending_with_the_schedulers_reason(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster("nodes=2,gpus=4")

    cluster.apply_dgd(builders.aggregated(gpus=8))

    (worker,) = pods_of(cluster, "VllmWorker")
    assert (worker.phase, worker.node_name, worker.ready) == ("Pending", "", False)
    assert worker.reason == (
        "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption:"
        " 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert status(cluster)["state"] == "pending"
    assert ready_condition(cluster)["status"] == "False"
    assert ready_condition(cluster)["reason"] == "InsufficientDevices"
    assert "Unschedulable" in ready_condition(cluster)["message"]


def test_a_waiting_pod_schedules_as_soon_as_devices_are_freed(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated("first", gpus=8))
    cluster.apply_dgd(builders.aggregated("second", gpus=4))
    assert status(cluster, "second")["state"] == "pending"

    cluster.delete_dgd("default", "first")

    (worker,) = [p for p in pods_of(cluster, "VllmWorker")]
    assert (worker.phase, worker.node_name) == ("Running", "sim-a-node-0")
    assert status(cluster, "second")["state"] != "pending"


def test_a_smaller_pod_is_not_blocked_by_a_larger_one_waiting_before_it(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated("holder", gpus=6))
    cluster.apply_dgd(builders.aggregated("large", gpus=4))

    cluster.apply_dgd(builders.aggregated("small", gpus=2))

    by_graph = {p.labels[port.DYNAMO_GRAPH]: p for p in pods_of(cluster, "VllmWorker")}
    assert by_graph["large"].phase == "Pending"
    assert by_graph["small"].phase == "Running"


def test_frontend_pods_schedule_at_once_even_when_every_gpu_is_taken(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated("full", gpus=8))

    cluster.apply_dgd(builders.aggregated("late", gpus=8))

    late_frontend = next(
        p for p in pods_of(cluster, "Frontend") if p.labels[port.DYNAMO_GRAPH] == "late"
    )
    assert (late_frontend.phase, late_frontend.gpu_request) == ("Running", 0)


def test_a_scheduled_pod_becomes_ready_ready_after_later_not_before(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated())
    (worker,) = pods_of(cluster, "VllmWorker")
    assert (worker.phase, worker.ready, worker.reason) == ("Running", False, "ContainersNotReady")

    clock.tick(1.999)
    cluster.advance()
    assert not pods_of(cluster, "VllmWorker")[0].ready

    clock.tick(0.001)
    cluster.advance()
    assert pods_of(cluster, "VllmWorker")[0].ready
    assert pods_of(cluster, "VllmWorker")[0].reason == ""


def test_ready_after_counts_from_scheduling_not_from_creation(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated("first", gpus=8))
    cluster.apply_dgd(builders.aggregated("second", gpus=8))
    clock.tick(10)
    cluster.advance()

    cluster.delete_dgd("default", "first")

    assert cluster.next_due() == clock.now + 2


def test_with_ready_after_zero_pods_are_ready_when_scheduled(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8")

    cluster.apply_dgd(builders.aggregated(replicas=2))

    assert all(p.ready for p in cluster.list_pods())
    assert status(cluster)["state"] == "successful"
    assert cluster.next_due() is None


@pytest.mark.parametrize(
    ("after", "state", "ready", "reason"),
    [
        (0.0, "initializing", "False", "some_resources_are_not_ready"),
        (1.0, "initializing", "False", "some_resources_are_not_ready"),
        (2.0, "successful", "True", "all_resources_are_ready"),
    ],
)
def test_dgd_status_moves_from_initializing_to_successful(
    make_cluster: MakeCluster, clock: FakeClock, after: float, state: str, ready: str, reason: str
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated(replicas=2))

    clock.tick(after)
    cluster.advance()

    assert status(cluster)["state"] == state
    assert (ready_condition(cluster)["status"], ready_condition(cluster)["reason"]) == (
        ready,
        reason,
    )


def test_dgd_status_counts_replicas_per_service_and_the_observed_generation(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated(replicas=3, gpus=2))
    clock.tick(2)
    cluster.advance()

    worker = status(cluster)["services"]["VllmWorker"]

    assert worker == {
        "componentKind": "Deployment",
        "componentNames": ["llama-vllmworker"],
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
    }
    assert status(cluster)["observedGeneration"] == 1
    assert "rollingUpdate" not in status(cluster)


def test_the_ready_condition_keeps_its_transition_time_until_it_flips(
    clock: FakeClock,
) -> None:
    cluster = SimulatedCluster(
        "nodes=1,gpus=8,ready_after=2s", cluster_id="c", clock=clock, unix_offset=0.0
    )
    cluster.apply_dgd(builders.aggregated(replicas=2))
    first = ready_condition(cluster)["lastTransitionTime"]
    clock.tick(1)
    cluster.apply_dgd(builders.scaled(builders.aggregated(), "VllmWorker", 3))
    assert ready_condition(cluster)["lastTransitionTime"] == first

    clock.tick(2)
    cluster.advance()

    assert ready_condition(cluster)["status"] == "True"
    assert ready_condition(cluster)["lastTransitionTime"] == "1970-01-01T00:16:43Z"


def test_delete_removes_the_pods_and_releases_their_devices_at_once(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated(replicas=2, gpus=4))
    assert gpus_in_use(cluster) == 8

    cluster.delete_dgd("default", "llama")

    assert cluster.list_pods() == []
    assert cluster.list_dgds() == []
    assert gpus_in_use(cluster) == 0


def test_deleting_a_dgd_that_is_not_there_is_not_an_error(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    before = cluster.revision()

    cluster.delete_dgd("default", "nothing")

    assert cluster.revision() == before


def test_removing_a_service_from_the_spec_removes_its_pods(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    manifest = builders.aggregated()
    cluster.apply_dgd(manifest)
    del manifest["spec"]["services"]["Frontend"]

    cluster.apply_dgd(manifest)

    assert pods_of(cluster, "Frontend") == []
    assert list(status(cluster)["services"]) == ["VllmWorker"]
