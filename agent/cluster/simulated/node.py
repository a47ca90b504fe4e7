"""A simulated node's NVML and kubelet: the device ports, answered from a `SimulatedCluster`.

The agent's node loop (one per DaemonSet pod, here one per simulated node) reads devices
through `DeviceInventory` (agent/devices/model.py) and allocations through
`PodResourcesSource` (agent/kubelet/model.py). In a simulated cluster these adapters answer
from the cluster's own books, so NVML, the kubelet and the pods always agree, unless a fault
was injected to make them disagree. They only read; nothing here changes the cluster.

A node removed from the cluster reads as an NVML error and an empty kubelet, as a node agent
whose host went away would see it until its pod is gone too.
"""

from __future__ import annotations

import builtins

from agent.cluster.port import GPU_RESOURCE
from agent.cluster.simulated.cluster import DRIVER_VERSION, SimulatedCluster
from agent.devices.model import Inventory
from agent.kubelet.model import Allocatable, PodDevices


class SimulatedNvml:
    """`DeviceInventory` of one simulated node: its GPUs, unhealthy ones marked."""

    def __init__(self, cluster: SimulatedCluster, node_name: str) -> None:
        self.cluster = cluster
        self.node_name = node_name

    def read(self) -> Inventory:
        try:
            devices = self.cluster.node_gpus(self.node_name)
        except KeyError:
            return Inventory(devices=(), error=f"node {self.node_name} is not in the cluster")
        return Inventory(devices=devices, driver_version=DRIVER_VERSION)


class SimulatedKubelet:
    """`PodResourcesSource` of one simulated node: nvidia.com/gpu devices of its pods."""

    def __init__(self, cluster: SimulatedCluster, node_name: str) -> None:
        self.cluster = cluster
        self.node_name = node_name

    def list(self) -> builtins.list[PodDevices]:
        return self.cluster.node_pod_devices(self.node_name)

    def allocatable(self) -> builtins.list[Allocatable]:
        devices = self.cluster.node_allocatable(self.node_name)
        return [Allocatable(resource_name=GPU_RESOURCE, device_ids=devices)] if devices else []
