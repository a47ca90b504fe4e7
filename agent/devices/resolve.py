"""Every device id the kubelet reports, resolved through NVML (docs/devices.md).

NVML's enumeration (nvmlDeviceGetHandleByIndex, agent/devices/nvml.py) lists the devices whose
UUID it can read; a GPU so broken that even its UUID cannot be read appears there under a
stand-in id ("unknown-gpu-<where>@<node>"). The kubelet names devices by UUID. Matching the two
lists alone would show such a GPU twice: once as NVML's stand-in, once as a kubelet id "not
found by NVML". So every kubelet id the enumeration did not match is looked up by UUID
(`NvmlInventory.resolve`, nvmlDeviceGetHandleByUUID): a device NVML resolves joins the inventory
under the kubelet's id, and when NVML could not read it (it is unhealthy) it takes the place of
one stand-in of its kind (the one at its PCI bus id when both are known): it is that device.
An id NVML does not know stays out, and agent/devices/verify.py reports it "not found by NVML".

Two adapters over the node's ports, composed by the agent's wiring (agent/kubernetes.py):
- `KubeletDevices`: the kubelet, with the devices pods hold counted among those it knows
  (verify.kubelet_known): allocated ids are verified like allocatable ones;
- `ResolvedInventory`: NVML's inventory with the kubelet's unmatched ids resolved into it.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from agent.devices import verify
from agent.devices.model import Gpu, Inventory
from agent.devices.nvml import UNKNOWN_UUID_PREFIX, NvmlUnavailable
from agent.kubelet.model import Allocatable, PodDevices, PodResourcesSource

log = logging.getLogger(__name__)

Resolve = Callable[[Iterable[str]], Mapping[str, Gpu | None]]


class Resolver(Protocol):
    """What NvmlInventory offers: its enumeration, and lookups by UUID."""

    def read(self) -> Inventory: ...

    def resolve(self, device_ids: Iterable[str]) -> Mapping[str, Gpu | None]: ...


class KubeletDevices:
    """The kubelet (a PodResourcesSource) with allocated devices counted as known.

    One reading of both calls serves every caller for `max_age_s`, so an observation pass
    (the inventory's resolution, then the observer's own questions) asks the kubelet once.
    """

    def __init__(
        self,
        kubelet: PodResourcesSource,
        *,
        max_age_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kubelet = kubelet
        self._max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._reading: tuple[float, list[Allocatable], list[PodDevices]] | None = None

    def list(self) -> builtins.list[PodDevices]:
        return self._read()[1]

    def allocatable(self) -> builtins.list[Allocatable]:
        allocatable, allocated = self._read()
        return verify.kubelet_known(allocatable, allocated)

    def _read(self) -> tuple[builtins.list[Allocatable], builtins.list[PodDevices]]:
        with self._lock:
            now = self._clock()
            if self._reading is None or now - self._reading[0] > self._max_age_s:
                # Errors propagate, uncached: the observer reports the kubelet's, as before.
                self._reading = (now, self._kubelet.allocatable(), self._kubelet.list())
            return self._reading[1], self._reading[2]


class ResolvedInventory:
    """A DeviceInventory: NVML's enumeration plus the kubelet's ids NVML resolves."""

    def __init__(self, nvml: Resolver, kubelet: PodResourcesSource) -> None:
        self._nvml = nvml
        self._kubelet = kubelet

    def read(self) -> Inventory:
        inventory = self._nvml.read()
        if inventory.error:
            return inventory  # verify reports every kubelet id with NVML's error
        try:
            known = self._kubelet.allocatable()
        except Exception as e:  # the kubelet port's errors: the observer reports them itself
            log.debug("kubelet unavailable for resolution: %s", e)
            return inventory
        return resolve_into(inventory, verify.gpu_ids(known), self._nvml.resolve)


def resolve_into(inventory: Inventory, device_ids: Sequence[str], resolve: Resolve) -> Inventory:
    """`inventory` with each of `device_ids` that it lacks resolved through NVML."""
    listed = {gpu.uuid for gpu in inventory.devices}
    unmatched = [device_id for device_id in device_ids if device_id not in listed]
    if not unmatched:
        return inventory
    try:
        resolved = resolve(unmatched)
    except NvmlUnavailable as e:
        log.warning("cannot resolve kubelet device ids through NVML: %s", e.reason)
        return inventory
    devices = list(inventory.devices)
    for device_id in unmatched:
        gpu = resolved.get(device_id)
        if gpu is None:
            continue
        twin = _stand_in_for(gpu, devices) if not gpu.healthy else None
        if twin is None:
            devices.append(gpu)
            continue
        # It is the device the enumeration could not name: one entry, under its real id.
        devices[devices.index(twin)] = replace(
            gpu,
            pci_bus_id=gpu.pci_bus_id or twin.pci_bus_id,
            index=twin.index,
            name=gpu.name or twin.name,
        )
    return replace(inventory, devices=tuple(devices))


def _stand_in_for(gpu: Gpu, devices: Sequence[Gpu]) -> Gpu | None:
    kind = f"{UNKNOWN_UUID_PREFIX}{'mig' if _is_mig(gpu) else 'gpu'}-"
    stand_ins = [d for d in devices if d.uuid.startswith(kind)]
    if gpu.pci_bus_id:
        same_place = [d for d in stand_ins if d.pci_bus_id == gpu.pci_bus_id]
        stand_ins = same_place or stand_ins
    return stand_ins[0] if stand_ins else None


def _is_mig(gpu: Gpu) -> bool:
    return bool(gpu.parent_uuid) or gpu.uuid.startswith("MIG-")
