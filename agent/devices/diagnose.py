"""`wingsmith agent devices`: this node's GPUs as the agent sees them, printed as JSON.

An operator runs it in the agent pod (`kubectl exec <agent pod> -- wingsmith agent devices`) to
see why a node offers the capacity it does: NVML's inventory (driver version, every device with
its class, health and NVLink domain, or why NVML cannot be read) and, when the kubelet's
PodResources socket is reachable, the kubelet's devices (allocatable and allocated) resolved
through NVML and verified against it (agent/devices/resolve.py, verify.py) with the devices
each pod holds. It only reads: nothing goes to the
hub, nothing on the node changes.

Caller: agent/main.py, when `devices` is the first word. The kubelet client
(agent/kubelet/client.py) is imported only here and only when asked for, so the command still
works, reporting the kubelet unavailable and why, where that client or the socket is missing.

Exit status: 0 NVML was read; 1 NVML is unavailable (the report is printed all the same);
2 a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import cast

from agent.devices import verify
from agent.devices.model import Inventory
from agent.devices.nvml import NvmlInventory
from agent.devices.resolve import Resolve, resolve_into
from agent.kubelet.model import PodResourcesSource

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
KUBELET_CLIENT_MODULE = "agent.kubelet.client"

Connect = Callable[[str], PodResourcesSource]


class NoKubelet(Exception):
    """The kubelet's PodResources API cannot be asked (no socket, no client)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nvml = NvmlInventory(
        library_path=args.library_path,
        class_overrides=dict(args.class_override),
        node_name=os.environ.get("NODE_NAME", ""),
    )
    inventory = nvml.read()
    report = build_report(
        inventory,
        socket_path=args.pod_resources_socket,
        connect=connect_kubelet,
        resolve=nvml.resolve,
    )
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 1 if inventory.error else 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wingsmith agent devices",
        description="Print this node's GPUs (NVML) and their verification against the kubelet.",
    )
    parser.add_argument(
        "--library-path",
        metavar="PATH",
        help="libnvidia-ml.so.1 to load instead of the one the dynamic loader finds",
    )
    parser.add_argument(
        "--pod-resources-socket",
        metavar="PATH",
        default=DEFAULT_SOCKET,
        help=f"the kubelet's PodResources socket (default {DEFAULT_SOCKET})",
    )
    parser.add_argument(
        "--class-override",
        metavar="NAME=CLASS",
        type=_override,
        action="append",
        default=[],
        help='device class for an exact NVML name, e.g. "NVIDIA H100 PCIe=H100-PCIE-80GB";'
        " repeatable",
    )
    return parser.parse_args(argv)


def build_report(
    inventory: Inventory, *, socket_path: str, connect: Connect, resolve: Resolve | None = None
) -> dict[str, object]:
    """The JSON document: NVML's inventory, then what the kubelet says about it. `resolve`
    looks up the kubelet's ids that NVML's enumeration did not list."""
    return {
        "driver_version": inventory.driver_version,
        "nvml_error": inventory.error or None,
        "devices": [dataclasses.asdict(gpu) for gpu in inventory.devices],
        "kubelet": kubelet_report(
            inventory, socket_path=socket_path, connect=connect, resolve=resolve
        ),
    }


def kubelet_report(
    inventory: Inventory, *, socket_path: str, connect: Connect, resolve: Resolve | None = None
) -> dict[str, object]:
    try:
        source = connect(socket_path)
        try:
            allocatable = source.allocatable()
            allocated = source.list()
        finally:
            _close(source)
    # The client is another package's adapter over gRPC: whatever it raises, a diagnostic
    # reports it rather than dying with a traceback.
    except Exception as e:
        return {"socket": socket_path, "status": f"unavailable: {_describe(e)}"}
    known = verify.kubelet_known(allocatable, allocated)
    if resolve is not None and not inventory.error:
        inventory = resolve_into(inventory, verify.gpu_ids(known), resolve)
    devices = verify.verify(inventory, known)
    return {
        "socket": socket_path,
        "status": "ok",
        "verification": [_verified_json(device) for device in devices],
        "capacity": _capacity(devices),
        "allocations": [
            dataclasses.asdict(allocation) for allocation in verify.allocations(allocated)
        ],
    }


def connect_kubelet(socket_path: str) -> PodResourcesSource:
    """The PodResources client, imported lazily (agent/kubelet/client.py may not exist yet)."""
    if not os.path.exists(socket_path):
        raise NoKubelet(f"no socket at {socket_path} (is /var/lib/kubelet/pod-resources mounted?)")
    try:
        module = importlib.import_module(KUBELET_CLIENT_MODULE)
        client_class = module.PodResourcesClient
    except (ImportError, AttributeError) as e:
        raise NoKubelet(f"no kubelet client in this build: {e}") from e
    return cast(PodResourcesSource, client_class(socket_path))


def _verified_json(device: verify.VerifiedDevice) -> dict[str, object]:
    return {
        "uuid": device.gpu.uuid,
        "device_class": device.gpu.device_class,
        "verified": device.verified,
        "reason": device.reason,
        "healthy": device.gpu.healthy,
        "health_reason": device.gpu.health_reason,
    }


def _capacity(devices: Sequence[verify.VerifiedDevice]) -> dict[str, int]:
    """Devices per class that count as capacity: verified by both sides and healthy."""
    counts = Counter(d.gpu.device_class for d in devices if d.verified and d.gpu.healthy)
    return dict(sorted(counts.items()))


def _override(text: str) -> tuple[str, str]:
    name, equals, device_class = text.partition("=")
    if not equals or not name.strip() or not device_class.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=CLASS, got {text!r}")
    return name.strip(), device_class.strip()


def _close(source: PodResourcesSource) -> None:
    close = getattr(source, "close", None)
    if callable(close):
        close()


def _describe(error: Exception) -> str:
    if isinstance(error, NoKubelet):
        return str(error)
    return f"{type(error).__name__}: {error}"
