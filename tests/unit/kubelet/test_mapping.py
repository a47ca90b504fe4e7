"""What the client makes of the kubelet's answers: List, GetAllocatableResources and Get."""

from __future__ import annotations

import pytest

from agent.devices.verify import allocations
from agent.kubelet.errors import KubeletCallFailed
from agent.kubelet.model import Allocatable, PodDevices
from tests.unit.kubelet.builders import GPU, MIG_1G, SHARED_GPU, container, devices, dra_claim, pod
from tests.unit.kubelet.conftest import MakeClient
from tests.unit.kubelet.fake_kubelet import FakeKubelet

G0 = "GPU-0b8e5a52-1c7e-4f55-9c3d-6a0d2c1f0000"
G1 = "GPU-0b8e5a52-1c7e-4f55-9c3d-6a0d2c1f0001"
G2 = "GPU-0b8e5a52-1c7e-4f55-9c3d-6a0d2c1f0002"
MIG_NEW = "MIG-5e4e8a7c-3b1d-5c2e-9f7a-2d3c4b5a6f70"
MIG_OLD = f"MIG-{G2}/7/0"


def a_busy_node(kubelet: FakeKubelet) -> None:
    kubelet.pods = [
        pod(
            "llama-prefill-0",
            # GPUs on two NUMA nodes: the kubelet sends one entry per device per NUMA node.
            container("engine", devices(GPU, G0, numa=0), devices(GPU, G1, numa=1)),
            container("sidecar"),
        ),
        pod(
            "chat-0",
            container(
                "engine",
                devices(SHARED_GPU, f"{G2}::0", f"{G2}::3"),
                devices("rdma/hca_shared_devices_a", "hca-0"),
            ),
        ),
        pod(
            "embed-0",
            container("engine", devices(MIG_1G, MIG_NEW, MIG_OLD)),
            container("warmup", devices(MIG_1G, MIG_NEW)),
        ),
        pod("router-0", container("router"), namespace="gateway"),
        pod("dra-0", container("engine", claims=[dra_claim("gpu-claim", "gpu-3")])),
    ]


def test_list_gives_one_entry_per_pod_container_and_resource_with_ids_as_reported(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    a_busy_node(kubelet)

    entries = make_client().list()

    assert entries == [
        PodDevices("serving", "llama-prefill-0", "engine", GPU, (G0, G1)),
        PodDevices("serving", "chat-0", "engine", SHARED_GPU, (f"{G2}::0", f"{G2}::3")),
        PodDevices("serving", "chat-0", "engine", "rdma/hca_shared_devices_a", ("hca-0",)),
        PodDevices("serving", "embed-0", "engine", MIG_1G, (MIG_NEW, MIG_OLD)),
        PodDevices("serving", "embed-0", "warmup", MIG_1G, (MIG_NEW,)),
    ]


def test_pods_without_devices_and_dra_claims_yield_no_entries(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    kubelet.pods = [
        pod("router-0", container("router")),
        pod("dra-0", container("engine", claims=[dra_claim("gpu-claim", "gpu-3")])),
    ]

    assert make_client().list() == []


def test_a_device_on_two_numa_nodes_is_listed_once(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    kubelet.pods = [pod("p", container("c", devices(GPU, G0, numa=0), devices(GPU, G0, numa=1)))]

    assert [e.device_ids for e in make_client().list()] == [(G0,)]


def test_what_the_client_lists_is_what_verification_normalizes(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    a_busy_node(kubelet)

    merged = {
        (a.pod_name, a.resource_name): a.device_ids for a in allocations(make_client().list())
    }

    assert merged[("chat-0", SHARED_GPU)] == (G2,)
    assert merged[("embed-0", MIG_1G)] == (MIG_NEW, MIG_OLD)
    assert ("chat-0", "rdma/hca_shared_devices_a") not in merged


def test_allocatable_is_one_entry_per_resource_in_the_kubelets_order(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    kubelet.allocatable = [
        *devices(GPU, G0, numa=0),
        *devices(GPU, G1, numa=1),
        *devices(GPU, G1, numa=0),
        *devices(MIG_1G, MIG_NEW, MIG_OLD),
        *devices(SHARED_GPU, f"{G2}::0", f"{G2}::1", f"{G2}::2"),
        *devices("rdma/hca_shared_devices_a", "hca-0"),
    ]

    assert make_client().allocatable() == [
        Allocatable(GPU, (G0, G1)),
        Allocatable(MIG_1G, (MIG_NEW, MIG_OLD)),
        Allocatable(SHARED_GPU, (f"{G2}::0", f"{G2}::1", f"{G2}::2")),
        Allocatable("rdma/hca_shared_devices_a", ("hca-0",)),
    ]


def test_a_node_without_device_plugins_has_nothing_allocatable(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    assert make_client().allocatable() == []


def test_get_gives_one_pods_devices(kubelet: FakeKubelet, make_client: MakeClient) -> None:
    a_busy_node(kubelet)

    entries = make_client().get(namespace="serving", pod_name="embed-0")

    assert [(e.container, e.device_ids) for e in entries] == [
        ("engine", (MIG_NEW, MIG_OLD)),
        ("warmup", (MIG_NEW,)),
    ]


def test_get_of_an_unknown_pod_fails_with_the_kubelets_code(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    with pytest.raises(KubeletCallFailed) as raised:
        make_client().get(namespace="serving", pod_name="nope")

    assert (raised.value.method, raised.value.code) == ("Get", "UNKNOWN")
