"""Fault injection: unhealthy devices, failed and deleted pods, nodes leaving and joining."""

from __future__ import annotations

import pytest

from agent.cluster.simulated.cluster import NodeGroup, SimulatedCluster
from agent.cluster.simulated.node import SimulatedKubelet, SimulatedNvml
from tests.unit.cluster import builders
from tests.unit.cluster.conftest import MakeCluster
from tests.unit.cluster.helpers import FakeClock, drive, pods_of


def state(cluster: SimulatedCluster) -> str:
    return str(cluster.list_dgds()[0].status["state"])


def test_an_unhealthy_device_is_not_given_to_new_pods(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    bad = cluster.node_gpus("sim-a-node-0")[0].uuid

    cluster.set_device_health(bad, healthy=False, reason="XID 79: GPU fell off the bus")
    cluster.apply_dgd(builders.aggregated(replicas=7))

    given = {
        d for entry in SimulatedKubelet(cluster, "sim-a-node-0").list() for d in entry.device_ids
    }
    assert len(given) == 7 and bad not in given
    assert cluster.list_nodes()[0].allocatable_gpus == 7


def test_with_the_last_healthy_device_taken_the_next_pod_waits(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=2")
    cluster.set_device_health(cluster.node_gpus("sim-a-node-0")[1].uuid, healthy=False)

    cluster.apply_dgd(builders.aggregated(replicas=2))

    assert sorted(p.phase for p in pods_of(cluster, "VllmWorker")) == ["Pending", "Running"]


def test_a_pod_keeps_a_device_that_turns_unhealthy_under_it(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated(gpus=1))
    (entry,) = SimulatedKubelet(cluster, "sim-a-node-0").list()

    cluster.set_device_health(entry.device_ids[0], healthy=False, reason="XID 48")

    (worker,) = pods_of(cluster, "VllmWorker")
    assert worker.ready and worker.phase == "Running"
    inventory = SimulatedNvml(cluster, "sim-a-node-0").read()
    sick = [g for g in inventory.devices if not g.healthy]
    assert [(g.uuid, g.health_reason) for g in sick] == [(entry.device_ids[0], "XID 48")]


def test_a_device_made_healthy_again_takes_a_waiting_pod(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=1")
    gpu = cluster.node_gpus("sim-a-node-0")[0].uuid
    cluster.set_device_health(gpu, healthy=False)
    cluster.apply_dgd(builders.aggregated())

    cluster.set_device_health(gpu, healthy=True)

    assert pods_of(cluster, "VllmWorker")[0].phase == "Running"
    assert all(g.healthy and g.health_reason == "" for g in cluster.node_gpus("sim-a-node-0"))


def test_an_unknown_device_is_a_key_error(make_cluster: MakeCluster) -> None:
    with pytest.raises(KeyError):
        make_cluster().set_device_health("GPU-nope", healthy=False)


def test_a_failed_pod_frees_its_devices_and_is_replaced(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    cluster.apply_dgd(builders.aggregated(gpus=8))
    drive(cluster, clock)
    (victim,) = pods_of(cluster, "VllmWorker")

    cluster.fail_pod("default", victim.name, reason="OOMKilled")

    failed = next(p for p in cluster.list_pods() if p.name == victim.name)
    assert (failed.phase, failed.ready, failed.reason) == ("Failed", False, "OOMKilled")
    (replacement,) = pods_of(cluster, "VllmWorker")
    assert replacement.name != victim.name and replacement.phase == "Running"
    assert state(cluster) == "initializing"
    assert cluster.list_dgds()[0].status["conditions"][0]["reason"] == "PodFailed"
    assert "OOMKilled" in cluster.list_dgds()[0].status["conditions"][0]["message"]

    drive(cluster, clock)

    assert state(cluster) == "successful"
    assert cluster.list_dgds()[0].status["services"]["VllmWorker"]["replicas"] == 1


def test_failing_a_failed_pod_changes_nothing(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(builders.aggregated())
    name = pods_of(cluster, "VllmWorker")[0].name
    cluster.fail_pod("default", name)
    before = cluster.revision()

    cluster.fail_pod("default", name)

    assert cluster.revision() == before


def test_a_deleted_pod_is_gone_at_once_and_replaced(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    cluster.apply_dgd(builders.aggregated())
    (victim,) = pods_of(cluster, "VllmWorker")

    cluster.delete_pod("default", victim.name)

    names = [p.name for p in cluster.list_pods()]
    assert victim.name not in names
    assert len(pods_of(cluster, "VllmWorker")) == 1


def test_deleting_an_unknown_pod_is_a_key_error(make_cluster: MakeCluster) -> None:
    with pytest.raises(KeyError):
        make_cluster().delete_pod("default", "nope")


def test_a_removed_nodes_pods_are_replaced_on_the_nodes_left(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8")
    cluster.apply_dgd(builders.aggregated(replicas=2, gpus=4))

    cluster.remove_node("sim-a-node-0")

    assert [n.name for n in cluster.list_nodes()] == ["sim-a-node-1"]
    assert {p.node_name for p in cluster.list_pods()} == {"sim-a-node-1"}
    assert len(pods_of(cluster, "VllmWorker")) == 2
    assert SimulatedNvml(cluster, "sim-a-node-0").read().error
    assert SimulatedKubelet(cluster, "sim-a-node-0").list() == []


def test_pods_with_nowhere_to_go_after_a_node_leaves_wait(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8")
    cluster.apply_dgd(builders.aggregated(replicas=2, gpus=8))

    cluster.remove_node("sim-a-node-1")

    waiting = [p for p in pods_of(cluster, "VllmWorker") if p.phase == "Pending"]
    assert [p.reason for p in waiting] == [
        (
            "Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption:"
            " 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    ]
    assert state(cluster) == "pending"


def test_a_node_that_joins_takes_waiting_pods(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated(replicas=2, gpus=8))

    name = cluster.add_node()

    assert name == "sim-a-node-1"
    assert {p.node_name for p in pods_of(cluster, "VllmWorker")} == {"sim-a-node-0", name}
    assert state(cluster) == "successful"


def test_a_joining_node_may_differ_from_the_others(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8")

    name = cluster.add_node(NodeGroup(gpus=4, device_class="A100-80GB", name_prefix="late"))

    assert name == "late-node-1"
    assert {g.device_class for g in cluster.node_gpus(name)} == {"A100-80GB"}
    assert len(cluster.node_gpus(name)) == 4


def test_removing_an_unknown_node_is_a_key_error(make_cluster: MakeCluster) -> None:
    with pytest.raises(KeyError):
        make_cluster().remove_node("nope")
