"""NvmlInventory.read() through the real pynvml over the fake libnvidia-ml.so.1."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from agent.devices.model import DeviceInventory, Gpu
from agent.devices.nvml import GPU_IS_LOST, LIBRARY_NOT_FOUND, NvmlInventory
from agent.devices.nvml_device import ROW_REMAPPING_FAILED
from tests.fake_nvml import node
from tests.unit.devices.conftest import MakeInventory

MIB = 1024**2
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
A100_40GB = {"name": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960}
CLUSTER = "0123456789abcdef0123456789abcdef"
CLUSTER_UUID = "01234567-89ab-cdef-0123-456789abcdef"
# NVML error codes, as a driver returns them
NOT_SUPPORTED, FUNCTION_NOT_FOUND, GPU_LOST, UNKNOWN = 3, 13, 15, 999


def uuid(n: int, prefix: str = "GPU") -> str:
    return f"{prefix}-{n:08x}-1111-2222-3333-444444444444"


def only(make_inventory: MakeInventory, **fields: object) -> Gpu:
    """The one device of a one-H100 node with `fields` set on it."""
    (gpu,) = make_inventory(node({**H100, "uuid": uuid(0), **fields})).read().devices
    return gpu


# --- identity and classes --------------------------------------------------------------------


def test_it_is_a_device_inventory(make_inventory: MakeInventory) -> None:
    inventory: DeviceInventory = make_inventory(node())

    assert inventory.read().devices == ()


def test_every_gpu_is_reported_with_its_nvml_identity(make_inventory: MakeInventory) -> None:
    config = node(
        {**H100, "uuid": uuid(0), "pci": "00000000:17:00.0"},
        {**H100, "uuid": uuid(1), "pci": "00000000:2A:00.0"},
    )

    inventory = make_inventory(config).read()

    assert inventory.error == ""
    assert inventory.devices == (
        Gpu(
            uuid=uuid(0),
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=81559 * MIB,
            pci_bus_id="00000000:17:00.0",
            device_class="H100-80GB",
            index=0,
        ),
        Gpu(
            uuid=uuid(1),
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=81559 * MIB,
            pci_bus_id="00000000:2A:00.0",
            device_class="H100-80GB",
            index=1,
        ),
    )


@pytest.mark.parametrize(
    ("name", "memory_mib", "device_class"),
    [
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"),
        ("NVIDIA H200", 143771, "H200-141GB"),
        ("NVIDIA L40S", 46068, "L40S-48GB"),
        ("NVIDIA GB200", 189471, "GB200-186GB"),
    ],
)
def test_names_and_memory_from_nvml_become_device_classes(
    make_inventory: MakeInventory, name: str, memory_mib: int, device_class: str
) -> None:
    assert only(make_inventory, name=name, memory_mib=memory_mib).device_class == device_class


def test_class_overrides_apply_to_the_exact_nvml_name(make_inventory: MakeInventory) -> None:
    config = node({**H100, "uuid": uuid(0)}, {**A100_40GB, "uuid": uuid(1)})
    overrides = {"NVIDIA A100-SXM4-40GB": "A100-SXM-40GB"}

    devices = make_inventory(config, class_overrides=overrides).read().devices

    assert [gpu.device_class for gpu in devices] == ["H100-80GB", "A100-SXM-40GB"]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"driver_version": "550.54.15", "cuda_version": 12040}, "550.54.15 / CUDA 12.4"),
        ({"driver_version": "570.124.06", "cuda_version": 12080}, "570.124.06 / CUDA 12.8"),
        ({"fail.nvmlSystemGetCudaDriverVersion": NOT_SUPPORTED}, "550.54.15"),
        ({"fail.nvmlSystemGetDriverVersion": UNKNOWN, "cuda_version": 13000}, "CUDA 13.0"),
    ],
)
def test_driver_and_cuda_versions_are_reported_together(
    make_inventory: MakeInventory, settings: dict[str, object], expected: str
) -> None:
    assert make_inventory(node(**settings)).read().driver_version == expected


def test_every_read_is_a_fresh_session_that_sees_the_node_as_it_is_now(
    make_inventory: MakeInventory,
) -> None:
    before = make_inventory(node({**H100, "uuid": uuid(0)})).read()
    after = make_inventory(node({**H100, "uuid": uuid(0)}, {**H100, "uuid": uuid(1)})).read()

    assert [gpu.uuid for gpu in before.devices] == [uuid(0)]
    assert [gpu.uuid for gpu in after.devices] == [uuid(0), uuid(1)]


# --- lost and failing devices ----------------------------------------------------------------


def test_a_lost_gpu_is_reported_unhealthy_and_the_others_still_are(
    make_inventory: MakeInventory,
) -> None:
    config = node(
        {**H100, "uuid": uuid(0)},
        {**H100, "uuid": uuid(1), "lost": 1},
        {**H100, "uuid": uuid(2)},
    )

    devices = make_inventory(config).read().devices

    assert [(gpu.uuid, gpu.healthy, gpu.health_reason) for gpu in devices] == [
        (uuid(0), True, ""),
        ("unknown-gpu-1", False, GPU_IS_LOST),  # not even its UUID can be read
        (uuid(2), True, ""),
    ]
    assert devices[1].index == 1
    assert devices[1].device_class == "unknown"


def test_a_gpu_lost_after_its_identity_was_read_keeps_its_uuid(
    make_inventory: MakeInventory,
) -> None:
    gpu = only(make_inventory, **{"fail.nvmlDeviceGetTotalEccErrors": GPU_LOST})

    assert (gpu.uuid, gpu.device_class, gpu.pci_bus_id) == (
        uuid(0),
        "H100-80GB",
        "00000000:17:00.0",
    )
    assert (gpu.healthy, gpu.health_reason) == (False, GPU_IS_LOST)


def test_a_gpu_lost_before_nvml_hands_out_its_handle_is_still_reported(
    make_inventory: MakeInventory,
) -> None:
    config = node(
        {**H100, "uuid": uuid(0), "fail.nvmlDeviceGetHandleByIndex_v2": GPU_LOST},
        {**H100, "uuid": uuid(1)},
    )

    devices = make_inventory(config).read().devices

    assert [(gpu.uuid, gpu.health_reason) for gpu in devices] == [
        ("unknown-gpu-0", GPU_IS_LOST),
        (uuid(1), ""),
    ]


def test_any_other_failing_query_makes_that_gpu_unhealthy_with_the_error(
    make_inventory: MakeInventory,
) -> None:
    gpu = only(make_inventory, **{"fail.nvmlDeviceGetPciInfo_v3": UNKNOWN})

    assert gpu.uuid == uuid(0)
    assert not gpu.healthy
    assert gpu.health_reason.startswith("NVML error: ")


# --- health ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "healthy", "reason"),
    [
        ({}, True, ""),
        ({"ecc_volatile": 3}, False, "uncorrectable ECC errors: 3"),
        # Errors of earlier driver lifetimes, dealt with since: not this GPU's state.
        ({"ecc_aggregate": 5}, True, ""),
        ({"remap_failure": 1}, False, ROW_REMAPPING_FAILED),
        # A pending remap heals at the next reset.
        ({"remap_pending": 1, "remap_uncorrected": 2}, True, ""),
        (
            {"ecc_volatile": 1, "remap_failure": 1},
            False,
            f"uncorrectable ECC errors: 1; {ROW_REMAPPING_FAILED}",
        ),
        ({"fail.nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED}, True, ""),
        ({"fail.nvmlDeviceGetRemappedRows": NOT_SUPPORTED}, True, ""),
        ({"fail.nvmlDeviceGetRemappedRows": FUNCTION_NOT_FOUND}, True, ""),
    ],
)
def test_ecc_errors_and_failed_row_remapping_make_a_gpu_unhealthy(
    make_inventory: MakeInventory, fields: dict[str, object], healthy: bool, reason: str
) -> None:
    gpu = only(make_inventory, **fields)

    assert (gpu.healthy, gpu.health_reason) == (healthy, reason)


# --- NVLink domains --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "domain"),
    [
        (
            {"fabric_state": 3, "fabric_cluster": CLUSTER, "fabric_clique": 7},
            f"{CLUSTER_UUID}.7",
        ),
        ({"fabric_state": 3, "fabric_cluster": CLUSTER, "fabric_clique": 0}, f"{CLUSTER_UUID}.0"),
        # Registration with the fabric manager not finished: the ids may still change.
        ({"fabric_state": 2, "fabric_cluster": CLUSTER, "fabric_clique": 7}, ""),
        ({"fabric_state": 1}, ""),
        # Finished, with an error.
        ({"fabric_state": 3, "fabric_cluster": CLUSTER, "fabric_status": UNKNOWN}, ""),
        # Finished, in no fabric.
        ({"fabric_state": 3, "fabric_clique": 7}, ""),
        # No fabric info at all (no fabric key: NOT_SUPPORTED), an older driver, an odd answer.
        ({}, ""),
        ({"fail.nvmlDeviceGetGpuFabricInfoV": FUNCTION_NOT_FOUND}, ""),
        ({"fail.nvmlDeviceGetGpuFabricInfoV": UNKNOWN}, ""),
    ],
)
def test_nvlink_domains_come_from_completed_fabric_registrations(
    make_inventory: MakeInventory, fields: dict[str, object], domain: str
) -> None:
    gpu = only(make_inventory, **fields)

    assert gpu.nvlink_domain == domain
    assert gpu.healthy


def test_a_gpu_lost_while_reading_its_fabric_info_is_lost(make_inventory: MakeInventory) -> None:
    gpu = only(make_inventory, **{"fail.nvmlDeviceGetGpuFabricInfoV": GPU_LOST})

    assert (gpu.healthy, gpu.health_reason) == (False, GPU_IS_LOST)


# --- MIG -------------------------------------------------------------------------------------


def mig(n: int, profile: str, memory_mib: int, **fields: object) -> dict[str, object]:
    values = {
        "uuid": uuid(n, prefix="MIG"),
        "name": f"NVIDIA H100 80GB HBM3 MIG {profile}",
        "memory_mib": memory_mib,
        **fields,
    }
    return {f"mig.{n}.{key}": value for key, value in values.items()}


def test_with_mig_on_every_mig_device_is_its_own_gpu_under_its_parent(
    make_inventory: MakeInventory,
) -> None:
    config = node(
        {
            **H100,
            "uuid": uuid(0),
            "pci": "00000000:2A:00.0",
            "mig_mode": 1,
            **mig(0, "3g.40gb", 40192),
            # slots 1 and 2 empty
            **mig(3, "1g.10gb", 9856),
        }
    )

    parent, *migs = make_inventory(config).read().devices

    assert (parent.uuid, parent.device_class, parent.parent_uuid) == (uuid(0), "H100-80GB", "")
    assert [(m.uuid, m.device_class, m.memory_bytes) for m in migs] == [
        (uuid(0, "MIG"), "H100-80GB-MIG-3g.40gb", 40192 * MIB),
        (uuid(3, "MIG"), "H100-80GB-MIG-1g.10gb", 9856 * MIB),
    ]
    assert {(m.parent_uuid, m.pci_bus_id, m.index, m.healthy) for m in migs} == {
        (uuid(0), "00000000:2A:00.0", 0, True)
    }


def test_a_mig_profile_comes_from_attributes_where_the_name_has_none(
    make_inventory: MakeInventory,
) -> None:
    profile_less = {
        "mig.0.uuid": uuid(0, "MIG"),
        "mig.0.name": "NVIDIA H100 80GB HBM3",
        "mig.0.memory_mib": 19968,
        "mig.0.gi_slices": 2,
        "mig.0.ci_slices": 1,
    }

    devices = make_inventory(node({**H100, "mig_mode": 1, **profile_less})).read().devices

    assert devices[1].device_class == "H100-80GB-MIG-1c.2g.20gb"


@pytest.mark.parametrize(
    "fields",
    [
        {"mig_mode": 0, "mig_pending": 1},  # enabled only after the next GPU reset
        {"fail.nvmlDeviceGetMigMode": NOT_SUPPORTED},  # a GPU without MIG
    ],
)
def test_without_mig_mode_current_no_mig_devices_are_read(
    make_inventory: MakeInventory, fields: dict[str, object]
) -> None:
    devices = make_inventory(node({**H100, **fields, **mig(0, "1g.10gb", 9856)})).read().devices

    assert [gpu.parent_uuid for gpu in devices] == [""]


def test_mig_devices_share_their_parents_ill_health_and_no_nvlink_domain(
    make_inventory: MakeInventory,
) -> None:
    fabric = {"fabric_state": 3, "fabric_cluster": CLUSTER, "fabric_clique": 1}
    config = node({**H100, "mig_mode": 1, "ecc_volatile": 2, **fabric, **mig(0, "1g.10gb", 9856)})

    parent, slice_ = make_inventory(config).read().devices

    assert parent.nvlink_domain == f"{CLUSTER_UUID}.1"
    assert (slice_.healthy, slice_.health_reason) == (
        False,
        "parent GPU: uncorrectable ECC errors: 2",
    )
    assert slice_.nvlink_domain == ""


def test_a_lost_mig_device_is_unhealthy_and_its_siblings_are_not(
    make_inventory: MakeInventory,
) -> None:
    config = node(
        {**H100, "mig_mode": 1, **mig(0, "1g.10gb", 9856, lost=1), **mig(1, "1g.10gb", 9856)}
    )

    parent, lost, sibling = make_inventory(config).read().devices

    assert parent.healthy
    assert (lost.healthy, lost.health_reason, lost.parent_uuid) == (False, GPU_IS_LOST, parent.uuid)
    assert lost.uuid.startswith("unknown-mig-")
    assert (sibling.uuid, sibling.healthy) == (uuid(1, "MIG"), True)


# --- no NVML ---------------------------------------------------------------------------------


def test_a_library_that_is_not_there_reads_as_an_error_not_a_crash(tmp_path: Path) -> None:
    inventory = NvmlInventory(library_path=str(tmp_path / "nowhere" / "libnvidia-ml.so.1"))

    reading = inventory.read()

    assert reading.devices == ()
    assert reading.error.startswith(LIBRARY_NOT_FOUND)


def test_a_node_without_the_nvidia_driver_reads_as_library_not_found() -> None:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has a real libnvidia-ml.so.1")

    reading = NvmlInventory().read()

    assert (reading.devices, reading.error) == ((), LIBRARY_NOT_FOUND)


@pytest.mark.parametrize(
    ("code", "starts"),
    [
        (9, "NVIDIA driver not loaded"),
        (18, "NVML library and kernel driver versions differ"),
        (4, "no permission to use NVML"),
        (UNKNOWN, "NVML init failed: "),
    ],
)
def test_an_init_failure_reads_as_an_error_that_says_why(
    make_inventory: MakeInventory, code: int, starts: str
) -> None:
    reading = make_inventory(node({**H100}, **{"fail.nvmlInitWithFlags": code})).read()

    assert reading.devices == ()
    assert reading.error.startswith(starts)


def test_a_failing_device_count_reads_as_an_error_with_the_driver_version(
    make_inventory: MakeInventory,
) -> None:
    reading = make_inventory(node({**H100}, **{"fail.nvmlDeviceGetCount_v2": UNKNOWN})).read()

    assert reading.devices == ()
    assert reading.error.startswith("cannot count GPUs: ")
    assert reading.driver_version == "550.54.15 / CUDA 12.4"
