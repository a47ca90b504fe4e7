"""What the kubelet says about device assignment: the values behind the PodResources port.

`PodResourcesSource` is implemented by the gRPC client of v1.PodResourcesLister
(agent/kubelet/client.py) and by the simulated cluster.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class PodDevices:
    """Devices of one resource assigned to one container of one pod."""

    namespace: str
    pod_name: str
    container: str
    resource_name: str
    # As the kubelet reports them (may carry "::N" replica suffixes).
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class Allocatable:
    resource_name: str
    device_ids: tuple[str, ...]


class PodResourcesSource(Protocol):
    def list(self) -> builtins.list[PodDevices]: ...

    def allocatable(self) -> builtins.list[Allocatable]: ...
