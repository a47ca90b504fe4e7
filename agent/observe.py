"""The observer: what runs in the cluster, as level-triggered observations for the hub.

Reads the cluster port (DGDs, pods), each node's NVML inventory and kubelet allocations, and
builds one observation per deployment and per node. It remembers what it last sent and returns
only what changed, so a quiet cluster sends nothing but heartbeats; `reset()` (after every
reconnect) makes the next collection send everything, since the hub's view is unknown.

Per deployment: the DGD's status, and its worker pods as replicas (frontends are not replicas:
they hold no devices and serve no model). Per node: every device, verified against the
kubelet (agent/devices/verify.py), and every GPU allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agent.cluster import port
from agent.devices import verify
from agent.devices.model import DeviceInventory, Gpu
from agent.kubelet.model import PodResourcesSource
from agent.model import DeploymentSpec
from agent.reconcile import ANNOTATION_GENERATION, ours

T = TypeVar("T")


@dataclass(frozen=True)
class NodeSource:
    """One node's device sources: NVML and the kubelet."""

    node_id: str
    inventory: DeviceInventory
    kubelet: PodResourcesSource


@dataclass(frozen=True)
class StatusObservation:
    phase: str
    reason: str
    message: str
    ready_replicas: int
    desired_replicas: int
    applied_generation: int


@dataclass(frozen=True)
class ReplicaObservation:
    name: str
    namespace: str
    node_id: str
    ready: bool
    serving_digest: str
    engine_version: str
    role: str


@dataclass(frozen=True)
class DeploymentObservation:
    deployment_id: str
    status: StatusObservation | None
    replicas: tuple[ReplicaObservation, ...]
    absent: bool = False


@dataclass(frozen=True)
class DeviceObservation:
    gpu: Gpu
    verified: bool


@dataclass(frozen=True)
class NodeObservation:
    node_id: str
    devices: tuple[DeviceObservation, ...]
    allocations: tuple[verify.PodAllocation, ...]
    inventory_error: str = ""
    absent: bool = False


@dataclass(frozen=True)
class Observations:
    deployments: tuple[DeploymentObservation, ...]
    nodes: tuple[NodeObservation, ...]

    @property
    def empty(self) -> bool:
        return not self.deployments and not self.nodes


class Observer:
    def __init__(
        self, *, cluster: port.ClusterPort, nodes: Callable[[], Sequence[NodeSource]]
    ) -> None:
        self._cluster = cluster
        self._nodes = nodes
        self._sent_deployments: dict[str, DeploymentObservation] = {}
        self._sent_nodes: dict[str, NodeObservation] = {}

    def reset(self) -> None:
        self._sent_deployments.clear()
        self._sent_nodes.clear()

    def collect(self, desired: Mapping[str, DeploymentSpec]) -> Observations:
        """What changed since the last collection (everything after a reset)."""
        current_d = self._deployments(desired)
        current_n = {n.node_id: n for n in (self._node(source) for source in self._nodes())}
        changed_d = _changed(self._sent_deployments, current_d, gone=_absent_deployment)
        changed_n = _changed(self._sent_nodes, current_n, gone=_absent_node)
        return Observations(tuple(changed_d), tuple(changed_n))

    def _deployments(
        self, desired: Mapping[str, DeploymentSpec]
    ) -> dict[str, DeploymentObservation]:
        dgds = {ours(d): d for d in self._cluster.list_dgds() if ours(d)}
        pods: dict[str, list[port.Pod]] = {}
        for pod in self._cluster.list_pods():
            deployment_id = pod.labels.get(port.LABEL_DEPLOYMENT_ID)
            if deployment_id and pod.labels.get(port.DYNAMO_COMPONENT_TYPE) == "worker":
                pods.setdefault(deployment_id, []).append(pod)
        result = {}
        for deployment_id, spec in desired.items():
            dgd = dgds.get(deployment_id)
            if dgd is None:
                continue
            workers = sorted(pods.get(deployment_id, []), key=lambda p: (p.namespace, p.name))
            result[deployment_id] = DeploymentObservation(
                deployment_id=deployment_id,
                status=_status(spec, dgd, workers),
                replicas=tuple(_replica(p) for p in workers),
            )
        return result

    def _node(self, source: NodeSource) -> NodeObservation:
        inventory = source.inventory.read()
        try:
            allocatable = source.kubelet.allocatable()
            pod_devices = source.kubelet.list()
            kubelet_error = ""
        except Exception as e:  # the kubelet port raises its own errors; report, keep going
            allocatable, pod_devices, kubelet_error = [], [], f"kubelet: {e}"
        devices = tuple(
            DeviceObservation(gpu=verify.with_reason(v), verified=v.verified)
            for v in verify.verify(inventory, allocatable)
        )
        errors = "; ".join(e for e in (inventory.error, kubelet_error) if e)
        return NodeObservation(
            node_id=source.node_id,
            devices=devices,
            allocations=tuple(verify.allocations(pod_devices)),
            inventory_error=errors,
        )


def ready_replicas(spec: DeploymentSpec, workers: Sequence[port.Pod]) -> int:
    """Ready replicas: aggregated, one per ready worker; disaggregated, the number of complete
    prefill + decode sets among the ready workers."""
    ready = [p for p in workers if p.ready]
    if spec.serving.mode != "disaggregated":
        return len(ready)
    prefill = sum(1 for p in ready if _role(p) == "prefill")
    decode = sum(1 for p in ready if _role(p) == "decode")
    return min(prefill // spec.serving.prefill_workers, decode // spec.serving.decode_workers)


def _status(spec: DeploymentSpec, dgd: port.Dgd, workers: Sequence[port.Pod]) -> StatusObservation:
    status = dgd.status or {}
    ready_condition: Mapping[str, Any] = next(
        (c for c in status.get("conditions", ()) if c.get("type") == "Ready"), {}
    )
    generation = str(dgd.annotations.get(ANNOTATION_GENERATION, "0"))
    return StatusObservation(
        phase=str(status.get("state", "")),
        reason=str(ready_condition.get("reason", "")),
        message=str(ready_condition.get("message", ""))[:2048],
        ready_replicas=ready_replicas(spec, workers),
        desired_replicas=spec.replicas,
        applied_generation=int(generation) if generation.isdigit() else 0,
    )


def _role(pod: port.Pod) -> str:
    sub = pod.labels.get(port.DYNAMO_SUB_COMPONENT_TYPE, "")
    return sub if sub in ("prefill", "decode") else "worker"


def _replica(pod: port.Pod) -> ReplicaObservation:
    return ReplicaObservation(
        name=pod.name,
        namespace=pod.namespace,
        node_id=pod.node_name,
        ready=pod.ready and bool(pod.node_name),
        serving_digest=pod.labels.get(port.LABEL_SERVING_DIGEST, ""),
        engine_version=pod.labels.get(port.LABEL_ENGINE_VERSION, ""),
        role=_role(pod),
    )


def _absent_deployment(deployment_id: str) -> DeploymentObservation:
    return DeploymentObservation(deployment_id=deployment_id, status=None, replicas=(), absent=True)


def _absent_node(node_id: str) -> NodeObservation:
    return NodeObservation(node_id=node_id, devices=(), allocations=(), absent=True)


def _changed(sent: dict[str, T], current: Mapping[str, T], *, gone: Callable[[str], T]) -> list[T]:
    """Entries that differ from what was sent; entries that disappeared become `gone`. Updates
    `sent` to what the hub will hold once these are delivered."""
    result = []
    for key, value in current.items():
        if sent.get(key) != value:
            result.append(value)
            sent[key] = value
    for key in [k for k in sent if k not in current]:
        previous = sent.pop(key)
        marker = gone(key)
        if previous != marker:
            result.append(marker)
    return result
