"""The node adapters: what a simulated node's NVML and kubelet report."""

from __future__ import annotations

import uuid

from agent.cluster.port import GPU_RESOURCE
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.cluster.simulated.node import SimulatedKubelet, SimulatedNvml
from agent.devices.model import DeviceInventory
from agent.kubelet.model import PodResourcesSource
from tests.unit.cluster import builders
from tests.unit.cluster.conftest import MakeCluster
from tests.unit.cluster.helpers import FakeClock, pods_of

GIB = 1024**3


def test_nvml_reports_the_nodes_gpus_with_made_up_but_plausible_identities(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,class=H100-80GB")
    nvml: DeviceInventory = SimulatedNvml(cluster, "sim-a-node-1")

    inventory = nvml.read()

    assert inventory.error == "" and inventory.driver_version
    assert len(inventory.devices) == 8
    first = inventory.devices[0]
    assert first.name == "NVIDIA H100 80GB HBM3 (simulated)"
    assert (first.memory_bytes, first.device_class, first.index) == (80 * GIB, "H100-80GB", 0)
    assert first.uuid.startswith("GPU-") and uuid.UUID(first.uuid[4:]).version == 5
    assert first.pci_bus_id == "00000000:18:00.0"
    assert len({g.uuid for g in inventory.devices}) == 8
    assert len({g.pci_bus_id for g in inventory.devices}) == 8
    assert all(g.healthy for g in inventory.devices)


def test_gpu_uuids_are_the_same_for_the_same_cluster_and_differ_between_clusters(
    clock: FakeClock,
) -> None:
    def uuids(cluster_id: str) -> list[str]:
        cluster = SimulatedCluster("nodes=2,gpus=4", cluster_id=cluster_id, clock=clock)
        node = f"{cluster_id}-node-1"
        return [g.uuid for g in SimulatedNvml(cluster, node).read().devices]

    assert uuids("east") == uuids("east")
    assert not set(uuids("east")) & set(uuids("west"))


def test_kubelet_lists_the_gpu_devices_of_the_pods_on_its_node(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8")
    cluster.apply_dgd(builders.aggregated(replicas=3, gpus=4))
    kubelet: PodResourcesSource = SimulatedKubelet(cluster, "sim-a-node-0")

    entries = kubelet.list()

    on_node = {p.name for p in pods_of(cluster, "VllmWorker") if p.node_name == "sim-a-node-0"}
    assert {e.pod_name for e in entries} == on_node  # the frontend holds no device
    assert all(
        (e.namespace, e.container, e.resource_name, len(e.device_ids))
        == ("default", "main", GPU_RESOURCE, 4)
        for e in entries
    )
    node_uuids = {g.uuid for g in cluster.node_gpus("sim-a-node-0")}
    assert {d for e in entries for d in e.device_ids} == node_uuids


def test_no_device_is_given_to_two_pods(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=3,gpus=8")
    cluster.apply_dgd(builders.disaggregated(prefill=3, decode=4, gpus=3))
    assert all(p.phase == "Running" for p in cluster.list_pods()[:-1])

    given = [
        d
        for node in cluster.list_nodes()
        for e in SimulatedKubelet(cluster, node.name).list()
        for d in e.device_ids
    ]

    assert len(given) == len(set(given)) == 18  # 6 pods of 3; the 7th waits


def test_kubelet_allocatable_is_the_nodes_healthy_gpus(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=4")
    gpus = [g.uuid for g in cluster.node_gpus("sim-a-node-0")]
    cluster.set_device_health(gpus[2], healthy=False)

    (allocatable,) = SimulatedKubelet(cluster, "sim-a-node-0").allocatable()

    assert allocatable.resource_name == GPU_RESOURCE
    assert allocatable.device_ids == (gpus[0], gpus[1], gpus[3])


def test_a_node_without_gpus_has_nothing_allocatable(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=0")

    assert SimulatedKubelet(cluster, "sim-a-node-0").allocatable() == []
    assert SimulatedNvml(cluster, "sim-a-node-0").read().devices == ()


def test_a_failed_pod_no_longer_shows_in_the_kubelet(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8")
    cluster.apply_dgd(builders.aggregated(gpus=8))
    victim = pods_of(cluster, "VllmWorker")[0].name

    cluster.fail_pod("default", victim)

    assert victim not in {e.pod_name for e in SimulatedKubelet(cluster, "sim-a-node-0").list()}
