"""One NVML device handle's queries, for agent/devices/nvml.py: identity (UUID, name, memory,
PCI bus id, index), health (uncorrectable ECC errors, failed row remapping), the NVLink
domain, MIG mode, slots and attributes; and the error policy every query follows: one the
device or driver does not offer answers None (`optional`), one that is only informative its
default on any NVML error (`best_effort`). Raises pynvml's errors otherwise; reads only.
"""

from __future__ import annotations

import ctypes
import logging
import uuid as uuidlib
from collections.abc import Callable
from typing import TypeVar

import pynvml

from agent.devices import classes
from agent.devices.model import Gpu

log = logging.getLogger("agent.devices.nvml")

T = TypeVar("T")
# A pynvml device handle (a ctypes pointer), only ever passed back to pynvml. Never compared:
# one device can come back as different handles; its UUID is what identifies it.
Handle = object

ROW_REMAPPING_FAILED = "row remapping failed"
# Queries the device or the driver does not offer: they say nothing about health.
UNSUPPORTED = (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound)


def nvlink_domain(*, cluster_uuid: bytes, clique_id: int, trusted: bool) -> str:
    """The domain "<clusterUuid>.<cliqueId>", as GPU feature discovery labels gpu.clique.

    `trusted`: the fabric manager finished registering the GPU (state COMPLETED, status
    SUCCESS); until then the ids may still change. A zero cluster UUID: not in a fabric.
    """
    if not trusted or not any(cluster_uuid):
        return ""
    return f"{uuidlib.UUID(bytes=bytes(cluster_uuid))}.{clique_id}"


# --- identity --------------------------------------------------------------------------------


def uuid(handle: Handle) -> str:
    return str(pynvml.nvmlDeviceGetUUID(handle))


def name(handle: Handle) -> str:
    return str(pynvml.nvmlDeviceGetName(handle))


def memory_total(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)


def pci_bus_id(handle: Handle) -> str:
    return str(pynvml.nvmlDeviceGetPciInfo(handle).busId)


def index(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetIndex(handle))


# --- health and topology ---------------------------------------------------------------------


def health_reasons(handle: Handle) -> list[str]:
    reasons = []
    ecc = _uncorrected_ecc_errors(handle)
    if ecc:
        reasons.append(f"uncorrectable ECC errors: {ecc}")
    if _row_remapping_failed(handle):
        reasons.append(ROW_REMAPPING_FAILED)
    return reasons


def _uncorrected_ecc_errors(handle: Handle) -> int | None:
    # Volatile: since the driver last loaded. The aggregate counter keeps errors a reset or
    # a row remap has long dealt with, and would mark a repaired GPU unhealthy forever.
    return optional(
        lambda: int(
            pynvml.nvmlDeviceGetTotalEccErrors(
                handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            )
        )
    )


def _row_remapping_failed(handle: Handle) -> bool | None:
    # (corrected, uncorrected, pending, failureOccurred): a pending remap heals at the next
    # reset, a failed one means the memory can no longer be repaired.
    return optional(lambda: bool(pynvml.nvmlDeviceGetRemappedRows(handle)[3]))


def nvlink_domain_of(handle: Handle) -> str:
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    try:
        pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    except pynvml.NVMLError as e:
        if isinstance(e, pynvml.NVMLError_GpuIsLost):
            raise
        if not isinstance(e, UNSUPPORTED):
            # Topology is advice for placement, not health: an odd answer costs only the domain.
            log.debug("GPU fabric info unreadable: %s", e)
        return ""
    # nvml.h declares the state one byte wide; pynvml reads four, three of them padding the
    # driver need not clear.
    state = int(info.state) & 0xFF
    trusted = state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED and info.status == pynvml.NVML_SUCCESS
    return nvlink_domain(
        cluster_uuid=bytes(info.clusterUuid), clique_id=int(info.cliqueId), trusted=trusted
    )


# --- MIG -------------------------------------------------------------------------------------


def mig_enabled(handle: Handle) -> bool:
    modes = optional(lambda: [int(mode) for mode in pynvml.nvmlDeviceGetMigMode(handle)])
    # [current, pending]: a pending change applies only after a GPU reset.
    return modes is not None and modes[0] == pynvml.NVML_DEVICE_MIG_ENABLE


def mig_handle(handle: Handle, slot: int) -> Handle | None:
    try:
        mig: Handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
    except pynvml.NVMLError_NotFound:
        return None  # an empty slot: no MIG device was created there
    return mig


def mig_profile_from_attributes(mig: Handle, parent: Gpu) -> str:
    """For drivers whose MIG device names carry no profile."""
    attributes = optional(lambda: pynvml.nvmlDeviceGetAttributes(mig))
    if attributes is None:
        return ""
    return classes.mig_profile_from_slices(
        gpu_instance_slices=int(attributes.gpuInstanceSliceCount),
        compute_instance_slices=int(attributes.computeInstanceSliceCount),
        memory_mib=int(attributes.memorySizeMB),
        parent_memory_bytes=parent.memory_bytes,
    )


def is_mig(handle: Handle) -> bool:
    flag = optional(lambda: pynvml.nvmlDeviceIsMigDeviceHandle(handle))
    # pynvml 13 returns the ctypes c_uint itself here, not its value.
    return bool(getattr(flag, "value", flag))


# --- error policy ----------------------------------------------------------------------------


def optional(query: Callable[[], T]) -> T | None:
    """The answer, or None where the device or driver does not offer the query."""
    try:
        return query()
    except UNSUPPORTED:
        return None


def best_effort(query: Callable[[], T], default: T) -> T:
    """The answer, or `default` on any NVML error: for what is only informative."""
    try:
        return query()
    except pynvml.NVMLError:
        return default
