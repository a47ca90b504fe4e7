"""What a node's device inventory says: the values behind the NVML port.

`DeviceInventory` is implemented over nvidia-ml-py (agent/devices/nvml.py, the only module that
imports pynvml) and by the simulated cluster. Verification against the kubelet's view lives in
agent/devices/verify.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Gpu:
    """One GPU or MIG device as NVML describes it."""

    uuid: str
    name: str
    memory_bytes: int
    pci_bus_id: str
    device_class: str
    healthy: bool = True
    health_reason: str = ""
    nvlink_domain: str = ""
    parent_uuid: str = ""
    index: int = 0


@dataclass(frozen=True)
class Inventory:
    """A reading of one node's devices. `error` is set when the reading is degraded."""

    devices: tuple[Gpu, ...]
    error: str = ""
    driver_version: str = ""


class DeviceInventory(Protocol):
    def read(self) -> Inventory: ...
