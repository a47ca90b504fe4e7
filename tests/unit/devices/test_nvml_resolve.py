"""NvmlInventory.resolve(): kubelet device ids looked up by UUID, through pynvml and the fake."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.devices.nvml import GPU_IS_LOST, NvmlInventory, NvmlUnavailable
from tests.fake_nvml import node
from tests.unit.devices.conftest import MakeInventory

H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
GPU_0 = "GPU-00000000-1111-2222-3333-444444444444"
GPU_1 = "GPU-00000001-1111-2222-3333-444444444444"
MIG_0 = "MIG-00000000-aaaa-bbbb-cccc-dddddddddddd"
MIG_NODE = node(
    {**H100, "uuid": GPU_0},
    {
        **H100,
        "uuid": GPU_1,
        "mig_mode": 1,
        "ecc_volatile": 1,
        "mig.2.uuid": MIG_0,
        "mig.2.name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
        "mig.2.memory_mib": 9856,
    },
)


def test_gpu_and_mig_uuids_resolve_to_the_devices_read_reports(
    make_inventory: MakeInventory,
) -> None:
    inventory = make_inventory(MIG_NODE)
    read = {gpu.uuid: gpu for gpu in inventory.read().devices}

    resolved = inventory.resolve([GPU_0, GPU_1, MIG_0])

    assert resolved == {GPU_0: read[GPU_0], GPU_1: read[GPU_1], MIG_0: read[MIG_0]}
    mig = resolved[MIG_0]
    assert mig is not None
    assert (mig.parent_uuid, mig.device_class, mig.healthy) == (
        GPU_1,
        "H100-80GB-MIG-1g.10gb",
        False,
    )


@pytest.mark.parametrize(
    ("device_id", "uuid"),
    [
        (f"{GPU_0}::3", GPU_0),  # a time-slicing replica of the GPU
        (f"{MIG_0}::1", MIG_0),
        ("GPU-ffffffff-0000-0000-0000-000000000000", None),  # NVML does not know it
        ("MIG-GPU-ffffffff-0000-0000-0000-000000000000/1/0", None),  # a pre-R470 MIG id
        ("0", None),  # not an id NVML can resolve
        ("", None),
    ],
)
def test_kubelet_ids_resolve_by_uuid_with_replica_suffixes_cut(
    make_inventory: MakeInventory, device_id: str, uuid: str | None
) -> None:
    resolved = make_inventory(MIG_NODE).resolve([device_id])

    gpu = resolved[device_id]
    assert (gpu.uuid if gpu else None) == uuid


def test_every_id_given_is_answered_once_even_when_repeated(make_inventory: MakeInventory) -> None:
    ids = [f"{GPU_0}::1", f"{GPU_0}::2", GPU_0]

    resolved = make_inventory(MIG_NODE).resolve(ids)

    assert list(resolved) == ids
    assert len({id(gpu) for gpu in resolved.values()}) == 1


def test_a_lost_gpu_resolves_unhealthy_under_the_uuid_asked_for(
    make_inventory: MakeInventory,
) -> None:
    config = node({**H100, "uuid": GPU_0, "lost": 1})

    gpu = make_inventory(config).resolve([GPU_0])[GPU_0]

    assert gpu is not None
    assert (gpu.uuid, gpu.healthy, gpu.health_reason) == (GPU_0, False, GPU_IS_LOST)


def test_without_nvml_resolve_raises_nvml_unavailable(tmp_path: Path) -> None:
    inventory = NvmlInventory(library_path=str(tmp_path / "libnvidia-ml.so.1"))

    with pytest.raises(NvmlUnavailable):
        inventory.resolve([GPU_0])
