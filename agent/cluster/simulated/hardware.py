"""The machines of a simulated cluster: nodes, their GPUs, and which pod holds which GPU.

Used only by the simulated Dynamo controller (agent/cluster/simulated/dynamo.py), which decides
what to schedule, and by `SimulatedCluster` for views and fault injection. This module decides
nothing about pods: it answers "where do N free healthy devices fit" (first fit, in node order,
lowest device index first) and books devices to a holder key. Identities are deterministic:
a GPU's UUID is "GPU-" + uuid5(cluster, node, index), so a re-created cluster looks the same.

Health follows the NVIDIA device plugin: an unhealthy device is not allocatable to new pods,
but a pod already holding it keeps it (Kubernetes does not evict on device health).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from types import MappingProxyType

from agent.cluster.port import GPU_RESOURCE, Node
from agent.cluster.simulated.node_selection import ANYWHERE, NOT_MATCHED, NodeSelection, fit_error
from agent.cluster.simulated.spec import NodeGroup, SimSpec
from agent.devices.model import Gpu
from agent.devices.node_labels import gfd_labels

_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "simulated.wingsmith.dev")
DRIVER_VERSION = "570.124.06"
LABEL_SIMULATED = "wingsmith.dev/simulated"


def gpu_uuid(cluster_id: str, node_name: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{cluster_id}/{node_name}/{index}"))


def pci_bus_id(index: int) -> str:
    # 0x11 is odd, so the bus numbers of up to 256 devices never collide.
    return f"00000000:{(0x18 + 0x11 * index) % 0x100:02X}:00.0"


class SimGpu:
    __slots__ = ("health_reason", "healthy", "holder", "index", "pci_bus_id", "uuid")

    def __init__(self, *, uuid: str, index: int) -> None:
        self.uuid = uuid
        self.index = index
        self.pci_bus_id = pci_bus_id(index)
        self.healthy = True
        self.health_reason = ""
        # Key of the pod holding it ("namespace/name"), None when free.
        self.holder: str | None = None

    @property
    def allocatable(self) -> bool:
        return self.healthy and self.holder is None


class SimNode:
    __slots__ = ("_views", "gpus", "group", "labels", "name")

    def __init__(self, *, name: str, group: NodeGroup, cluster_id: str) -> None:
        self.name = name
        self.group = group
        self.gpus = tuple(
            SimGpu(uuid=gpu_uuid(cluster_id, name, i), index=i) for i in range(group.gpus)
        )
        self.labels = MappingProxyType(_node_labels(name, group))
        # The last gpu_views() and the health it was built from (the agent reads every node
        # on every observation pass; GPUs change health rarely).
        self._views: tuple[tuple[tuple[bool, str], ...], tuple[Gpu, ...]] | None = None

    def free(self) -> list[SimGpu]:
        return [g for g in self.gpus if g.allocatable]

    def healthy_count(self) -> int:
        return sum(1 for g in self.gpus if g.healthy)

    def view(self) -> Node:
        return Node(name=self.name, labels=self.labels, allocatable_gpus=self.healthy_count())

    def _domain(self, index: int) -> str:
        domains = self.group.nvlink_domains
        return f"{self.name}.nvl{index % domains}" if domains else ""

    def gpu_views(self) -> tuple[Gpu, ...]:
        health = tuple((g.healthy, g.health_reason) for g in self.gpus)
        if self._views is None or self._views[0] != health:
            self._views = (health, self._build_views())
        return self._views[1]

    def _build_views(self) -> tuple[Gpu, ...]:
        return tuple(
            Gpu(
                uuid=g.uuid,
                name=f"{self.group.product_name} (simulated)",
                memory_bytes=self.group.memory_bytes,
                pci_bus_id=g.pci_bus_id,
                device_class=self.group.device_class,
                healthy=g.healthy,
                health_reason=g.health_reason,
                index=g.index,
                nvlink_domain=self._domain(g.index),
            )
            for g in self.gpus
        )


def _node_labels(name: str, group: NodeGroup) -> dict[str, str]:
    # The labels NVIDIA GPU feature discovery puts on a GPU node, plus a marker: the
    # scheduler matches workers' node affinity against them.
    return {
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "simulated",
        LABEL_SIMULATED: "true",
        **gfd_labels(
            product_name=group.product_name, memory_bytes=group.memory_bytes, count=group.gpus
        ),
    }


class Hardware:
    """All nodes of one cluster, in creation order (the scheduler's first-fit order)."""

    def __init__(self, spec: SimSpec, *, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.nodes: dict[str, SimNode] = {}
        self._gpus: dict[str, SimGpu] = {}
        self._gpu_node: dict[str, str] = {}
        # Node indexes are never reused, so a removed node's name and UUIDs stay its own.
        self._next_index = 0
        for group in spec.groups:
            for _ in range(group.nodes):
                self.add_node(group)

    def add_node(self, group: NodeGroup) -> SimNode:
        name = f"{group.name_prefix or self.cluster_id}-node-{self._next_index}"
        self._next_index += 1
        node = SimNode(name=name, group=group, cluster_id=self.cluster_id)
        self.nodes[name] = node
        for gpu in node.gpus:
            self._gpus[gpu.uuid] = gpu
            self._gpu_node[gpu.uuid] = name
        return node

    def remove_node(self, name: str) -> SimNode:
        node = self.node(name)
        del self.nodes[name]
        for gpu in node.gpus:
            del self._gpus[gpu.uuid]
            del self._gpu_node[gpu.uuid]
        return node

    def node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r} in simulated cluster {self.cluster_id}") from None

    def gpu(self, device_uuid: str) -> SimGpu:
        try:
            return self._gpus[device_uuid]
        except KeyError:
            raise KeyError(
                f"no device {device_uuid!r} in simulated cluster {self.cluster_id}"
            ) from None

    def node_of(self, device_uuid: str) -> str:
        return self._gpu_node[device_uuid]

    def first_fit(self, need: int, selection: NodeSelection = ANYWHERE) -> SimNode | None:
        """The first node `selection` admits with `need` allocatable devices (any such node
        when need is 0)."""
        for node in self.eligible(selection):
            if need == 0 or sum(1 for g in node.gpus if g.allocatable) >= need:
                return node
        return None

    def eligible(self, selection: NodeSelection) -> Iterator[SimNode]:
        """The nodes a pod of this selection may run on, in scheduling order."""
        return (n for n in self.nodes.values() if selection.matches(n.name, n.labels))

    def fit_error(self, need: int, selection: NodeSelection) -> str:
        """Why no node takes a pod, in kube-scheduler's words. A node is counted under the
        first filter it fails, as the scheduler runs NodeAffinity before NodeResourcesFit."""
        reasons: dict[str, int] = {}
        for node in self.nodes.values():
            if not selection.matches(node.name, node.labels):
                reason = NOT_MATCHED
            elif len(node.free()) < need:
                reason = f"Insufficient {GPU_RESOURCE}"
            else:
                continue
            reasons[reason] = reasons.get(reason, 0) + 1
        return fit_error(len(self.nodes), reasons)

    def allocate(self, node: SimNode, *, need: int, holder: str) -> tuple[str, ...]:
        taken = node.free()[:need]
        if len(taken) < need:
            raise RuntimeError(f"{node.name}: {need} devices asked, {len(taken)} free")
        for gpu in taken:
            gpu.holder = holder
        return tuple(g.uuid for g in taken)

    def release(self, device_uuids: Iterable[str]) -> bool:
        """Free devices; those of removed nodes are gone already. True if any became free."""
        freed = False
        for device_uuid in device_uuids:
            gpu = self._gpus.get(device_uuid)
            if gpu is not None and gpu.holder is not None:
                gpu.holder = None
                freed = freed or gpu.healthy
        return freed

    def allocatable_on(self, node_name: str, device_uuids: Iterable[str]) -> int:
        """How many of these devices would be allocatable on that node once released."""
        count = 0
        for device_uuid in device_uuids:
            gpu = self._gpus.get(device_uuid)
            if gpu is not None and gpu.healthy and self._gpu_node[device_uuid] == node_name:
                count += 1
        return count

    def __iter__(self) -> Iterator[SimNode]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)
