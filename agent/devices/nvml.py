"""NVML adapter: the node's GPUs and MIG devices as the NVIDIA driver reports them.

`NvmlInventory` implements agent/devices/model.py's `DeviceInventory` over nvidia-ml-py. It and
agent/devices/nvml_device.py (one device handle's queries) are the only modules in the project
that import pynvml (.importlinter: pynvml-only-in-devices).
Callers: the agent's wiring, through the port, and the diagnostic command
(agent/devices/diagnose.py). It only reads: it never changes a device (no MIG reconfiguration,
no resets, no clocks), and it knows nothing of the kubelet (agent/devices/verify.py compares).

Sessions: every read() and resolve() is one nvmlInit ... nvmlShutdown. NVML counts its inits, so
this never disturbs another user in the process. A fresh session sees what changed since the last
reading (MIG reconfigured, a GPU reset, the driver reloaded by an upgrade) where a session kept
open would hold stale handles, and a node whose driver comes up after the agent is read as soon
as it does, with no reconnect logic. Init is cheap while the driver stays loaded (persistence
mode, as the GPU operator configures it) and small next to the agent's reporting period anyway.

Errors: nothing from pynvml escapes read(). A node without NVML (no library, no driver, library
and driver versions apart) reads as `Inventory(devices=(), error=why)` and the agent runs on,
degraded. A device whose queries fail is still reported, unhealthy, with the reason ("GPU is
lost"), and never hides the other devices. resolve() raises `NvmlUnavailable` (from the pynvml
error) when NVML cannot be used at all.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import pynvml

from agent.devices import classes
from agent.devices import nvml_device as query
from agent.devices.model import Gpu, Inventory
from agent.devices.nvml_device import Handle

log = logging.getLogger(__name__)

T = TypeVar("T")

LIBRARY_NOT_FOUND = (
    "NVML library not found: is the NVIDIA driver installed and the container started with the"
    " NVIDIA runtime?"
)
GPU_IS_LOST = "GPU is lost"
# Kubelet device ids NVML can resolve (shared/reference/kubelet-and-nvml.md); anything else
# (another plugin's ids, old-style MIG ids) cannot be verified against NVML.
RESOLVABLE_PREFIXES = ("GPU-", "MIG-")
# Stands in for the UUID of a device so broken that NVML will not even say which it is.
UNKNOWN_UUID_PREFIX = "unknown-"
# The hub keys devices by (cluster, id): a stand-in names its node, so that two nodes' lost
# GPUs do not overwrite each other (and stays within the hub's 128 characters).
_MAX_ID = 128

_INIT_FAILURES = (
    (pynvml.NVMLError_LibraryNotFound, LIBRARY_NOT_FOUND),
    (
        pynvml.NVMLError_DriverNotLoaded,
        "NVIDIA driver not loaded: the NVML library is there but the kernel driver is not",
    ),
    (
        pynvml.NVMLError_LibRmVersionMismatch,
        "NVML library and kernel driver versions differ: was the driver upgraded without a"
        " reboot or module reload?",
    ),
    (
        pynvml.NVMLError_NoPermission,
        "no permission to use NVML: can the container open /dev/nvidia*?",
    ),
)


class NvmlUnavailable(Exception):
    """NVML cannot be used on this node at all; `reason` says why, in words for an operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class NvmlInventory:
    """DeviceInventory over nvidia-ml-py.

    `library_path` loads that libnvidia-ml.so.1 instead of the one the dynamic loader finds (for
    unusual driver layouts, and for tests). pynvml holds one library per process, so it applies
    process-wide. `class_overrides` maps exact NVML names to device classes (classes.py).
    `node_name` goes into the stand-in ids of devices whose UUID cannot be read.
    """

    library_path: str | None = None
    class_overrides: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""

    def read(self) -> Inventory:
        try:
            with _session(self.library_path):
                return _read_inventory(self.class_overrides, self.node_name)
        except NvmlUnavailable as e:
            return Inventory(devices=(), error=e.reason)

    def resolve(self, device_ids: Iterable[str]) -> dict[str, Gpu | None]:
        """Each kubelet device id (as given, "::N" replica suffixes allowed) -> its device or None.

        None: NVML does not know it, or it is not an id NVML can know. Raises NvmlUnavailable.
        """
        ids = list(device_ids)
        with _session(self.library_path):
            found: dict[str, Gpu | None] = {}
            for uuid in (_uuid_of(device_id) for device_id in ids):
                if uuid not in found:
                    found[uuid] = _resolve_uuid(uuid, self.class_overrides)
        return {device_id: found[_uuid_of(device_id)] for device_id in ids}


def format_driver_version(driver: str, cuda: int) -> str:
    """The driver's version and CUDA's integer (12040) as "550.54.15 / CUDA 12.4"."""
    cuda_text = f"CUDA {cuda // 1000}.{cuda % 1000 // 10}" if cuda > 0 else ""
    return " / ".join(part for part in (driver, cuda_text) if part)


# --- sessions --------------------------------------------------------------------------------


@contextmanager
def _session(library_path: str | None) -> Iterator[None]:
    _use_library(library_path)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise NvmlUnavailable(_init_failure(e)) from e
    try:
        yield
    finally:
        _shutdown()


def _use_library(path: str | None) -> None:
    """Point pynvml at `path` instead of the loader's libnvidia-ml.so.1."""
    if path is None:
        return
    # pynvml's own lock: it guards the same global when pynvml loads the library itself.
    with pynvml.libLoadLock:
        loaded = pynvml.nvmlLib
        if loaded is not None and getattr(loaded, "_name", None) == path:
            return
        try:
            library = ctypes.CDLL(path)
        except OSError as e:
            raise NvmlUnavailable(f"{LIBRARY_NOT_FOUND} ({e})") from e
        pynvml.nvmlLib = library
        # Function pointers cached from another library would bypass the one just loaded.
        pynvml._nvmlGetFunctionPointer_cache.clear()


def _init_failure(error: Exception) -> str:
    for kind, reason in _INIT_FAILURES:
        if isinstance(error, kind):
            return reason
    return f"NVML init failed: {error}"


def _shutdown() -> None:
    try:
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        # The reading is complete; a failed shutdown costs NVML one reference, not our data.
        log.warning("nvmlShutdown failed: %s", e)


# --- the inventory ---------------------------------------------------------------------------


def _read_inventory(overrides: Mapping[str, str], node: str) -> Inventory:
    driver = _driver_version()
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError as e:
        return Inventory(devices=(), error=f"cannot count GPUs: {e}", driver_version=driver)
    devices = [gpu for index in range(count) for gpu in _read_index(index, overrides, node)]
    return Inventory(devices=tuple(devices), driver_version=driver)


def unknown_gpu_id(*, node: str, pci_bus_id: str, index: int) -> str:
    """The stand-in id of a GPU whose UUID NVML cannot read: "unknown-gpu-<where>@<node>",
    where is its PCI bus id when NVML still gives it, else its index (both unique on a node)."""
    where = pci_bus_id or str(index)
    if not node:
        return f"{UNKNOWN_UUID_PREFIX}gpu-{where}"
    text = f"{UNKNOWN_UUID_PREFIX}gpu-{where}@{node}"
    if len(text) <= _MAX_ID:
        return text
    digest = hashlib.sha256(node.encode()).hexdigest()[:12]
    return f"{text[: _MAX_ID - 13]}~{digest}"


def _driver_version() -> str:
    driver = query.best_effort(lambda: str(pynvml.nvmlSystemGetDriverVersion()), "")
    cuda = query.best_effort(lambda: int(pynvml.nvmlSystemGetCudaDriverVersion()), 0)
    return format_driver_version(driver, cuda)


def _read_index(index: int, overrides: Mapping[str, str], node: str) -> list[Gpu]:
    """The GPU at `index` and its MIG devices; a GPU that fails any query comes back alone."""
    handle: Handle | None = None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return _read_device(handle, overrides)
    except pynvml.NVMLError as e:
        found = handle
        pci = "" if found is None else query.best_effort(lambda: query.pci_bus_id(found), "")
        return [
            _failed_device(
                handle,
                fallback_uuid=unknown_gpu_id(node=node, pci_bus_id=pci, index=index),
                reason=_failure_reason(e),
                index=index,
                overrides=overrides,
            )
        ]


def _read_device(handle: Handle, overrides: Mapping[str, str]) -> list[Gpu]:
    gpu = _read_gpu(handle, overrides)
    if not query.mig_enabled(handle):
        return [gpu]
    return [gpu, *_read_migs(handle, gpu, overrides)]


def _read_gpu(handle: Handle, overrides: Mapping[str, str]) -> Gpu:
    """One full GPU (with MIG on, the parent of its MIG devices)."""
    name = query.name(handle)
    memory = query.memory_total(handle)
    reasons = query.health_reasons(handle)
    return Gpu(
        uuid=query.uuid(handle),
        name=name,
        memory_bytes=memory,
        pci_bus_id=query.pci_bus_id(handle),
        device_class=classes.device_class(name, memory, overrides=overrides),
        healthy=not reasons,
        health_reason="; ".join(reasons),
        nvlink_domain=query.nvlink_domain_of(handle),
        index=query.index(handle),
    )


def _failed_device(
    handle: Handle | None,
    *,
    fallback_uuid: str,
    reason: str,
    index: int = 0,
    parent: Gpu | None = None,
    overrides: Mapping[str, str],
) -> Gpu:
    """A device some query failed on: unhealthy, with whatever identity NVML still gives."""

    def attempt(read: Callable[[Handle], T], default: T) -> T:
        return default if handle is None else query.best_effort(lambda: read(handle), default)

    name = attempt(query.name, "")
    memory = attempt(query.memory_total, 0)
    profile = classes.mig_profile_from_name(name)
    if parent is not None:
        device_class = classes.mig_device_class(
            parent.device_class, profile, name=name, overrides=overrides
        )
    elif profile:
        # A MIG device whose parent could not be read: its own memory says nothing of the GPU's.
        device_class = overrides.get(name.strip(), classes.UNKNOWN_CLASS)
    else:
        device_class = classes.device_class(name, memory, overrides=overrides)
    return Gpu(
        uuid=attempt(query.uuid, fallback_uuid),
        name=name,
        memory_bytes=memory,
        pci_bus_id=parent.pci_bus_id if parent else attempt(query.pci_bus_id, ""),
        device_class=device_class,
        healthy=False,
        health_reason=reason,
        parent_uuid=parent.uuid if parent else "",
        index=parent.index if parent else index,
    )


def _failure_reason(error: Exception) -> str:
    if isinstance(error, pynvml.NVMLError_GpuIsLost):
        return GPU_IS_LOST
    return f"NVML error: {error}"


# --- MIG -------------------------------------------------------------------------------------


def _read_migs(handle: Handle, parent: Gpu, overrides: Mapping[str, str]) -> list[Gpu]:
    migs = []
    for slot in range(int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        mig = query.mig_handle(handle, slot)
        if mig is None:
            continue
        try:
            migs.append(_read_mig(mig, parent, overrides))
        except pynvml.NVMLError as e:
            fallback = f"{UNKNOWN_UUID_PREFIX}mig-{parent.uuid}-{slot}"
            failed = _failed_device(
                mig,
                fallback_uuid=fallback,
                reason=_failure_reason(e),
                parent=parent,
                overrides=overrides,
            )
            migs.append(failed)
    return migs


def _read_mig(mig: Handle, parent: Gpu, overrides: Mapping[str, str]) -> Gpu:
    """A MIG device: its own UUID, name and memory; PCI, health and index from its parent."""
    name = query.name(mig)
    profile = classes.mig_profile_from_name(name) or query.mig_profile_from_attributes(mig, parent)
    return Gpu(
        uuid=query.uuid(mig),
        name=name,
        memory_bytes=query.memory_total(mig),
        pci_bus_id=parent.pci_bus_id,
        device_class=classes.mig_device_class(
            parent.device_class, profile, name=name, overrides=overrides
        ),
        # ECC and row remapping are the parent's memory: its trouble is every slice's.
        healthy=parent.healthy,
        health_reason=f"parent GPU: {parent.health_reason}" if parent.health_reason else "",
        # MIG devices cannot use NVLink: a slice is in no NVLink domain.
        nvlink_domain="",
        parent_uuid=parent.uuid,
        index=parent.index,
    )


# --- resolve ---------------------------------------------------------------------------------


def _uuid_of(device_id: str) -> str:
    return device_id.split("::", 1)[0]


def _resolve_uuid(uuid: str, overrides: Mapping[str, str]) -> Gpu | None:
    if not uuid.startswith(RESOLVABLE_PREFIXES):
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except (pynvml.NVMLError_NotFound, pynvml.NVMLError_InvalidArgument):
        return None
    except pynvml.NVMLError as e:
        return _failed_device(
            None, fallback_uuid=uuid, reason=_failure_reason(e), overrides=overrides
        )
    try:
        return _read_resolved(handle, overrides)
    except pynvml.NVMLError as e:
        return _failed_device(
            handle, fallback_uuid=uuid, reason=_failure_reason(e), overrides=overrides
        )


def _read_resolved(handle: Handle, overrides: Mapping[str, str]) -> Gpu:
    if not query.is_mig(handle):
        return _read_gpu(handle, overrides)
    parent = _read_gpu(pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle), overrides)
    return _read_mig(handle, parent, overrides)
