"""Device classes: the capacity unit a workload asks for, derived from what NVML reports. Pure.

A class is "<family>-<memory>GB" ("H100-80GB", "H200-141GB", "L40S-48GB") and, for a MIG
device, "<parent class>-MIG-<profile>" ("H100-80GB-MIG-1g.10gb"). The hub's quotas and
admission count devices per class, so one product must always map to one class, on every node.

Caller: agent/devices/nvml.py, for every GPU and MIG device it reads. This module must not import
pynvml (or anything that talks to a device): it is a table and a few functions over strings and
integers, tested on its own.

Memory: NVML reports less than the marketing size (ECC and driver reservations: an H100 80GB
reports 79.6 GiB, an L40S with ECC on 45 GiB, an H200 140.4 GiB), so the reported size is
matched to the nearest nominal size of the family, within a tolerance. Families not in the table
get a label made from the NVML name and the memory rounded to whole GiB.

Operators override any of this with a mapping from the exact NVML name (as
`wingsmith agent devices` prints it) to the class they want.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2
UNKNOWN_CLASS = "unknown"
NO_OVERRIDES: Mapping[str, str] = {}

# Reported / nominal memory accepted as "this size": GDDR boards with ECC on lose 1/16
# (0.9375), HBM boards report within a percent or two of the nominal size.
_MIN_RATIO = 0.90
_MAX_RATIO = 1.03


@dataclass(frozen=True)
class Family:
    """A product family: the label in the class and the memory sizes it ships with."""

    label: str
    # The word as it appears in the NVML name, matched case-insensitively as a whole token.
    token: str
    sizes_gb: tuple[int, ...]


# Most specific first where one token contains another ("A10G" before "A10"); whole-token
# matching keeps "H20" from matching "H200" and "L4" from matching "L40S".
FAMILIES: tuple[Family, ...] = (
    Family("GB300", "GB300", (288,)),
    Family("GB200", "GB200", (186,)),
    Family("GH200", "GH200", (96, 144)),
    Family("B300", "B300", (288,)),
    Family("B200", "B200", (180, 192)),
    Family("B100", "B100", (192,)),
    Family("H200", "H200", (141,)),
    Family("H100", "H100", (64, 80, 94, 96)),
    Family("H800", "H800", (80, 94)),
    Family("H20", "H20", (96, 141)),
    Family("A100", "A100", (40, 80)),
    Family("A800", "A800", (40, 80)),
    Family("A40", "A40", (48,)),
    Family("A30", "A30", (24,)),
    Family("A16", "A16", (16,)),
    Family("A10G", "A10G", (24,)),
    Family("A10", "A10", (24,)),
    Family("A2", "A2", (16,)),
    Family("L40S", "L40S", (48,)),
    Family("L40", "L40", (48,)),
    Family("L20", "L20", (48,)),
    Family("L4", "L4", (24,)),
    Family("T4", "T4", (16,)),
    Family("V100", "V100", (16, 32)),
    Family("RTX-PRO-6000", "RTX PRO 6000", (96,)),
    Family("RTX-6000-ADA", "RTX 6000 Ada", (48,)),
)

_VENDOR_WORDS = re.compile(r"^(?:NVIDIA|TESLA)\s+", re.IGNORECASE)
# "80GB", "144G": a size in a product name; not a MIG profile's "1g.10gb".
_SIZE_IN_NAME = re.compile(r"(?<![A-Z0-9.])(\d+)\s*GB?(?![A-Z0-9.])", re.IGNORECASE)
_NON_LABEL = re.compile(r"[^A-Z0-9]+")
# "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "... MIG 1c.2g.20gb", "... MIG 1g.10gb+me"
_MIG_IN_NAME = re.compile(
    r"(?<![A-Z0-9])MIG\s+((?:\d+c\.)?\d+g\.\d+gb(?:\+[a-z0-9]+(?:,[a-z0-9]+)*)?)\s*$",
    re.IGNORECASE,
)


def device_class(
    name: str, memory_bytes: int, *, overrides: Mapping[str, str] = NO_OVERRIDES
) -> str:
    """The class of a full GPU from its NVML name and total memory in bytes."""
    override = overrides.get(name.strip())
    if override:
        return override
    if not name.strip():
        return UNKNOWN_CLASS
    family = find_family(name)
    label = family.label if family else _label_from_name(name)
    size = _size_gb(family, name=name, memory_bytes=memory_bytes)
    return f"{label}-{size}GB" if size else label


def find_family(name: str) -> Family | None:
    upper = name.upper()
    for family in FAMILIES:
        if _token_pattern(family.token).search(upper):
            return family
    return None


def mig_device_class(
    parent_class: str,
    profile: str,
    *,
    name: str = "",
    overrides: Mapping[str, str] = NO_OVERRIDES,
) -> str:
    """The class of a MIG device: "<parent class>-MIG-<profile>", unless its name is overridden."""
    override = overrides.get(name.strip())
    if override:
        return override
    return f"{parent_class}-MIG-{profile or UNKNOWN_CLASS}"


def mig_profile_from_name(name: str) -> str:
    """The profile NVML puts at the end of a MIG device's name ("1g.10gb"), or ""."""
    match = _MIG_IN_NAME.search(name.strip())
    return match.group(1).lower() if match else ""


def mig_profile_from_slices(
    *,
    gpu_instance_slices: int,
    compute_instance_slices: int,
    memory_mib: int,
    parent_memory_bytes: int,
) -> str:
    """The profile from the MIG device's attributes, named as nvidia-smi and the device plugin do.

    Memory is the MIG device's share of the parent's, rounded up to eighths, times the parent's
    memory in whole GiB (rounded up): that is how "1g.10gb" comes out of an 80 GB H100 whose
    1-slice instance has 9.6 GiB.
    """
    if gpu_instance_slices <= 0 or parent_memory_bytes <= 0 or memory_mib <= 0:
        return ""
    fraction = math.ceil(memory_mib * MIB / parent_memory_bytes * 8) / 8
    parent_gb = -(-parent_memory_bytes // GIB)
    memory_gb = round(fraction * parent_gb)
    if compute_instance_slices in (0, gpu_instance_slices):
        return f"{gpu_instance_slices}g.{memory_gb}gb"
    return f"{compute_instance_slices}c.{gpu_instance_slices}g.{memory_gb}gb"


def _size_gb(family: Family | None, *, name: str, memory_bytes: int) -> int:
    """The nominal size for the class: the family's nearest, the name's, or the rounded GiB."""
    reported_gib = memory_bytes / GIB
    if family:
        nominal = _nearest(family.sizes_gb, reported_gib)
        if nominal:
            return nominal
    named = [int(size) for size in _SIZE_IN_NAME.findall(name)]
    if reported_gib <= 0:
        # Memory unreadable: the only size the family or the name can mean, or none at all.
        if family and len(family.sizes_gb) == 1:
            return family.sizes_gb[0]
        return named[0] if len(named) == 1 else 0
    return _nearest(tuple(named), reported_gib) or round(reported_gib)


def _nearest(sizes_gb: tuple[int, ...], reported_gib: float) -> int:
    fits = [
        size for size in sizes_gb if size > 0 and _MIN_RATIO <= reported_gib / size <= _MAX_RATIO
    ]
    return min(fits, key=lambda size: abs(math.log(reported_gib / size)), default=0)


def _label_from_name(name: str) -> str:
    """A label for a product not in the table: "NVIDIA RTX A6000" -> "RTX-A6000"."""
    bare = _SIZE_IN_NAME.sub(" ", _VENDOR_WORDS.sub("", name.strip()))
    return _NON_LABEL.sub("-", bare.upper()).strip("-") or UNKNOWN_CLASS


@functools.cache
def _token_pattern(token: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(word) for word in token.upper().split())
    return re.compile(rf"(?<![A-Z0-9]){words}(?![A-Z0-9])")
