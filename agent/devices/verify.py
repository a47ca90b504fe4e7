"""Device verification: the kubelet's view of a node's GPUs checked against NVML's. Pure.

Every device id the kubelet reports, allocatable or allocated (`kubelet_known` merges the
two), is normalized (time-slicing "::N" suffixes cut, duplicates dropped) and matched by UUID
against the NVML inventory, which by then holds every kubelet id NVML could resolve
(agent/devices/resolve.py: nvmlDeviceGetHandleByUUID, shared/reference/kubelet-and-nvml.md).
A device counts as capacity only when both agree and NVML says it is healthy: the kubelet
knows it AND NVML knows it. Anything else is still reported, marked, so an operator sees why
capacity is smaller than the node's GPU count:
- NVML knows it, the kubelet does not know it: unverified ("not advertised by the kubelet");
- the kubelet knows it, NVML does not: unverified ("not found by NVML");
- NVML cannot be read at all: every kubelet device is unverified, with NVML's error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from agent.devices.model import Gpu, Inventory
from agent.kubelet.model import Allocatable, PodDevices

GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")
UNKNOWN_CLASS = "unknown"


@dataclass(frozen=True)
class VerifiedDevice:
    gpu: Gpu
    verified: bool
    reason: str = ""


@dataclass(frozen=True)
class PodAllocation:
    namespace: str
    pod_name: str
    resource_name: str
    device_ids: tuple[str, ...]


def is_gpu_resource(resource_name: str) -> bool:
    return resource_name.startswith(GPU_RESOURCE_PREFIXES)


def normalize_ids(device_ids: Iterable[str]) -> tuple[str, ...]:
    """Cut "::N" replica suffixes and de-duplicate, keeping the first-seen order."""
    return tuple(dict.fromkeys(device_id.split("::", 1)[0] for device_id in device_ids))


def kubelet_known(
    allocatable: Sequence[Allocatable], allocated: Sequence[PodDevices]
) -> list[Allocatable]:
    """Every device the kubelet knows: its allocatable devices, plus, per resource, those a
    pod holds that it no longer lists as allocatable (its device plugin restarted, or dropped
    the device while a pod still has it). A pod's device is the kubelet's word too."""
    listed = {device_id for entry in allocatable for device_id in normalize_ids(entry.device_ids)}
    extra: dict[str, list[str]] = {}
    for entry in allocated:
        for device_id in normalize_ids(entry.device_ids):
            if device_id not in listed:
                extra.setdefault(entry.resource_name, []).append(device_id)
    return [
        *allocatable,
        *(Allocatable(name, normalize_ids(ids)) for name, ids in sorted(extra.items())),
    ]


def gpu_ids(known: Sequence[Allocatable]) -> tuple[str, ...]:
    """The GPU and MIG device ids among them, normalized."""
    return normalize_ids(
        device_id
        for entry in known
        if is_gpu_resource(entry.resource_name)
        for device_id in entry.device_ids
    )


def verify(inventory: Inventory, allocatable: Sequence[Allocatable]) -> list[VerifiedDevice]:
    advertised = set(gpu_ids(allocatable))
    known = {gpu.uuid: gpu for gpu in inventory.devices}
    result = []
    for gpu in inventory.devices:
        if gpu.uuid in advertised:
            result.append(VerifiedDevice(gpu, verified=True))
        else:
            result.append(
                VerifiedDevice(gpu, verified=False, reason="not advertised by the kubelet")
            )
    for device_id in sorted(advertised - set(known)):
        reason = f"NVML unavailable: {inventory.error}" if inventory.error else "not found by NVML"
        stub = Gpu(
            uuid=device_id,
            name="",
            memory_bytes=0,
            pci_bus_id="",
            device_class=UNKNOWN_CLASS,
            healthy=False,
            health_reason=reason,
        )
        result.append(VerifiedDevice(stub, verified=False, reason=reason))
    return result


def allocations(pod_devices: Sequence[PodDevices]) -> list[PodAllocation]:
    """GPU devices per pod, merged over containers, normalized."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    for entry in pod_devices:
        if not is_gpu_resource(entry.resource_name):
            continue
        key = (entry.namespace, entry.pod_name, entry.resource_name)
        merged.setdefault(key, []).extend(entry.device_ids)
    return [
        PodAllocation(namespace, pod, resource, normalize_ids(ids))
        for (namespace, pod, resource), ids in sorted(merged.items())
        if ids
    ]


def with_reason(device: VerifiedDevice) -> Gpu:
    """The Gpu to report: an unverified device carries its reason as the health reason."""
    if device.verified or device.gpu.health_reason:
        return device.gpu
    return replace(device.gpu, health_reason=device.reason)
