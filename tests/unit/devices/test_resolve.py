"""Every device id the kubelet reports, resolved through NVML (agent/devices/resolve.py), over
the real nvidia-ml-py and the fake libnvidia-ml.so.1: a lost GPU shows once, under its real
id; allocated ids are verified like allocatable ones; stand-in ids name their node."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

from agent.devices import verify
from agent.devices.model import Inventory
from agent.devices.nvml import GPU_IS_LOST, unknown_gpu_id
from agent.devices.resolve import KubeletDevices, ResolvedInventory
from agent.kubelet.model import Allocatable, PodDevices
from tests.fake_nvml import node
from tests.unit.devices.conftest import MakeInventory

H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
GPU = "nvidia.com/gpu"


def uuid(i: int) -> str:
    return f"GPU-{i:08d}-1111-2222-3333-444444444444"


@dataclass
class Kubelet:
    """The kubelet port, as the PodResources client answers it (our seam, not the wire)."""

    allocatable_ids: tuple[str, ...] = ()
    pods: dict[str, tuple[str, ...]] = field(default_factory=dict)
    calls: int = 0
    broken: bool = False

    def allocatable(self) -> builtins.list[Allocatable]:
        self.calls += 1
        if self.broken:
            raise ConnectionError("no kubelet")
        return [Allocatable(GPU, self.allocatable_ids)]

    def list(self) -> builtins.list[PodDevices]:
        self.calls += 1
        if self.broken:
            raise ConnectionError("no kubelet")
        return [PodDevices("serving", pod, "main", GPU, ids) for pod, ids in self.pods.items()]


def observe(inventory: Inventory, kubelet: KubeletDevices) -> dict[str, verify.VerifiedDevice]:
    """What the observer does with a node's two sources (agent/observe.py)."""
    return {d.gpu.uuid: d for d in verify.verify(inventory, kubelet.allocatable())}


def test_a_lost_gpu_whose_uuid_cannot_be_read_shows_once_under_the_kubelets_id(
    make_inventory: MakeInventory,
) -> None:
    nvml = make_inventory(
        node({**H100, "uuid": uuid(0)}, {**H100, "uuid": uuid(1), "lost": 1}), node_name="n1"
    )
    assert [g.uuid for g in nvml.read().devices] == [uuid(0), "unknown-gpu-1@n1"]
    kubelet = KubeletDevices(Kubelet(allocatable_ids=(uuid(0), uuid(1))))

    devices = observe(ResolvedInventory(nvml, kubelet).read(), kubelet)

    assert list(devices) == [uuid(0), uuid(1)], "no stand-in, no 'not found by NVML' stub"
    lost = devices[uuid(1)]
    assert lost.verified and not lost.gpu.healthy and lost.gpu.health_reason == GPU_IS_LOST
    assert lost.gpu.index == 1, "it took the place of the device NVML could not name"


def test_an_allocated_device_the_kubelet_no_longer_lists_as_allocatable_is_verified(
    make_inventory: MakeInventory,
) -> None:
    nvml = make_inventory(node({**H100, "uuid": uuid(0)}, {**H100, "uuid": uuid(1)}))
    kubelet = KubeletDevices(Kubelet(allocatable_ids=(uuid(0),), pods={"chat-0": (uuid(1),)}))

    devices = observe(ResolvedInventory(nvml, kubelet).read(), kubelet)

    assert devices[uuid(1)].verified and devices[uuid(1)].gpu.healthy


def test_an_id_nvml_does_not_know_is_still_reported_not_found(
    make_inventory: MakeInventory,
) -> None:
    nvml = make_inventory(node({**H100, "uuid": uuid(0)}))
    ghost = "GPU-ffffffff-0000-0000-0000-000000000000"
    kubelet = KubeletDevices(Kubelet(allocatable_ids=(uuid(0),), pods={"old": (f"{ghost}::2",)}))

    devices = observe(ResolvedInventory(nvml, kubelet).read(), kubelet)

    assert not devices[ghost].verified and devices[ghost].reason == "not found by NVML"
    assert devices[uuid(0)].verified


def test_without_the_kubelet_the_inventory_is_nvmls_own(make_inventory: MakeInventory) -> None:
    nvml = make_inventory(node({**H100, "uuid": uuid(0)}, {**H100, "uuid": uuid(1), "lost": 1}))

    read = ResolvedInventory(nvml, KubeletDevices(Kubelet(broken=True))).read()

    assert read == nvml.read()


def test_stand_in_ids_name_their_node_so_two_nodes_lost_gpus_stay_apart(
    make_inventory: MakeInventory,
) -> None:
    config = node({**H100, "uuid": uuid(0), "lost": 1})

    ids = {make_inventory(config, node_name=n).read().devices[0].uuid for n in ("a", "b")}

    assert ids == {"unknown-gpu-0@a", "unknown-gpu-0@b"}
    long_name = "node-" + "x" * 250
    long_id = unknown_gpu_id(node=long_name, pci_bus_id="00000000:17:00.0", index=0)
    assert len(long_id) <= 128 and long_id != unknown_gpu_id(
        node=long_name + "y", pci_bus_id="00000000:17:00.0", index=0
    )


def test_one_kubelet_reading_serves_a_whole_observation_pass() -> None:
    now = [0.0]
    source = Kubelet(allocatable_ids=(uuid(0),))
    kubelet = KubeletDevices(source, max_age_s=1.0, clock=lambda: now[0])

    kubelet.allocatable()
    kubelet.list()
    kubelet.allocatable()
    assert source.calls == 2
    now[0] = 2.0
    kubelet.list()
    assert source.calls == 4
