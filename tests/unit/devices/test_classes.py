"""Device classes from NVML names and memory (agent/devices/classes.py): the table, alone."""

from __future__ import annotations

import pytest

from agent.cluster.simulated.spec import CATALOG
from agent.devices import classes

MIB = 1024**2


@pytest.mark.parametrize(
    ("name", "memory_mib", "expected"),
    [
        # Sizes as NVML reports them (nvidia-smi's memory.total), not as marketed.
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("NVIDIA H100 PCIe", 81559, "H100-80GB"),
        ("NVIDIA H100 NVL", 95830, "H100-94GB"),
        ("NVIDIA H800", 81559, "H800-80GB"),
        ("NVIDIA H20", 97871, "H20-96GB"),
        ("NVIDIA H200", 143771, "H200-141GB"),
        ("NVIDIA H200 NVL", 143771, "H200-141GB"),
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", 81920, "A100-80GB"),
        ("NVIDIA L40S", 46068, "L40S-48GB"),
        ("NVIDIA L40S", 49140, "L40S-48GB"),  # ECC off: the 1/16 comes back
        ("NVIDIA L40", 46068, "L40-48GB"),
        ("NVIDIA L4", 23034, "L4-24GB"),
        ("NVIDIA A10G", 23028, "A10G-24GB"),
        ("NVIDIA A10", 23028, "A10-24GB"),
        ("Tesla T4", 15360, "T4-16GB"),
        ("Tesla V100-SXM2-32GB", 32510, "V100-32GB"),
        ("Tesla V100-SXM2-16GB", 16160, "V100-16GB"),
        ("NVIDIA B200", 183359, "B200-180GB"),
        ("NVIDIA B300 SXM6 AC", 275040, "B300-288GB"),
        ("NVIDIA GB200", 189471, "GB200-186GB"),
        ("NVIDIA GB300", 284208, "GB300-288GB"),
        # The 480GB in the name counts the Grace CPU's memory too.
        ("NVIDIA GH200 480GB", 97871, "GH200-96GB"),
        ("NVIDIA GH200 144G HBM3e", 146831, "GH200-144GB"),
        ("NVIDIA RTX 6000 Ada Generation", 49140, "RTX-6000-ADA-48GB"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, "RTX-PRO-6000-96GB"),
        # Not in the table: a label from the name, the memory in whole GiB.
        ("NVIDIA RTX A6000", 49140, "RTX-A6000-48GB"),
        ("NVIDIA GeForce RTX 4090", 24564, "GEFORCE-RTX-4090-24GB"),
        # ... where the name carries a size the memory agrees with, that size.
        ("NVIDIA Future X9 200GB", 190000, "FUTURE-X9-200GB"),
        ("NVIDIA Future X9 480GB", 97871, "FUTURE-X9-96GB"),
    ],
)
def test_nvml_names_and_memory_map_to_one_class(name: str, memory_mib: int, expected: str) -> None:
    assert classes.device_class(name, memory_mib * MIB) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", "H200-141GB"),  # one size in the family
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),  # the name says it
        ("NVIDIA H100 PCIe", "H100"),  # nothing says which size
        ("", classes.UNKNOWN_CLASS),
    ],
)
def test_unreadable_memory_falls_back_to_what_the_name_tells(name: str, expected: str) -> None:
    assert classes.device_class(name, 0) == expected


def test_the_simulated_cluster_and_real_nodes_agree_on_class_names() -> None:
    for device_class, (product, memory_bytes) in CATALOG.items():
        assert classes.device_class(product, memory_bytes) == device_class, product


def test_an_operator_override_wins_for_that_exact_name_only() -> None:
    overrides = {"NVIDIA H100 PCIe": "H100-PCIE-80GB"}

    assert classes.device_class("NVIDIA H100 PCIe", 81559 * MIB, overrides=overrides) == (
        "H100-PCIE-80GB"
    )
    assert classes.device_class("NVIDIA H100 80GB HBM3", 81559 * MIB, overrides=overrides) == (
        "H100-80GB"
    )


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 7g.40gb", "7g.40gb"),
        ("NVIDIA H100 80GB HBM3 MIG 1c.2g.20gb", "1c.2g.20gb"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "1g.10gb+me"),
        ("NVIDIA H100 80GB HBM3", ""),
        ("", ""),
    ],
)
def test_mig_profiles_are_read_from_mig_device_names(name: str, profile: str) -> None:
    assert classes.mig_profile_from_name(name) == profile


@pytest.mark.parametrize(
    ("gi", "ci", "memory_mib", "parent_mib", "profile"),
    [
        (1, 1, 4864, 40960, "1g.5gb"),
        (3, 3, 20096, 40960, "3g.20gb"),
        (7, 7, 40320, 40960, "7g.40gb"),
        (1, 1, 9856, 81559, "1g.10gb"),
        (3, 3, 40192, 81559, "3g.40gb"),
        (2, 1, 19968, 81559, "1c.2g.20gb"),
        (1, 1, 16896, 143771, "1g.18gb"),
        (0, 0, 0, 81559, ""),
    ],
)
def test_mig_profiles_from_slices_and_memory_match_nvidia_names(
    gi: int, ci: int, memory_mib: int, parent_mib: int, profile: str
) -> None:
    derived = classes.mig_profile_from_slices(
        gpu_instance_slices=gi,
        compute_instance_slices=ci,
        memory_mib=memory_mib,
        parent_memory_bytes=parent_mib * MIB,
    )

    assert derived == profile


def test_a_mig_class_is_the_parent_class_and_the_profile() -> None:
    assert classes.mig_device_class("H100-80GB", "1g.10gb") == "H100-80GB-MIG-1g.10gb"
    assert classes.mig_device_class("H100-80GB", "") == "H100-80GB-MIG-unknown"


def test_a_mig_class_override_uses_the_mig_device_name() -> None:
    name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb"

    overridden = classes.mig_device_class(
        "H100-80GB", "1g.10gb", name=name, overrides={name: "H100-SLICE"}
    )

    assert overridden == "H100-SLICE"
