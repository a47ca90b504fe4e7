"""The simulated cluster: a `ClusterPort` with nodes, GPUs and a Dynamo operator, all in memory.

A product feature, not a test double: `hangar --simulate "nodes=2,gpus=8,class=H100-80GB"` runs
the agent against one on a laptop, and the fleet benchmark runs thousands in one process. The
agent's reconciler and observer use it exactly as they use the Kubernetes adapter; the node
adapters (agent/cluster/simulated/node.py) stand in for NVML and the kubelet.

Time: `clock` is a zero-argument monotonic clock in seconds. Nothing moves by itself: apply,
delete and fault injection take effect at once (the operator reacts instantly); readiness,
the only timed transition, happens in `advance()`. A driver calls `advance()`, then sleeps
until `next_due()` (None: nothing will happen until someone acts). With nothing due,
`advance()` reads neither the clock nor any pod.

`seed()` and fault injection act as someone other than the agent and work in read-only mode;
`apply_dgd`/`delete_dgd` are the agent's writes and are refused there (and counted).
Thread-safe: every call holds the cluster's lock (the agent calls from worker threads).
This module must not import kubernetes or pynvml; docs/simulated-cluster.md says what is and
is not simulated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent.cluster import dgd_versions
from agent.cluster.port import (
    GPU_RESOURCE,
    ClusterError,
    Dgd,
    Node,
    Pod,
    ReadOnlyViolation,
    ScalingAdapter,
)
from agent.cluster.simulated.dynamo import DynamoController
from agent.cluster.simulated.hardware import DRIVER_VERSION, Hardware
from agent.cluster.simulated.manifest import Graph, InvalidManifest, parse_manifest
from agent.cluster.simulated.seed import SeedFileError, load_seed_file
from agent.cluster.simulated.spec import NodeGroup, SimSpec
from agent.devices.model import Gpu
from agent.kubelet.model import PodDevices

__all__ = [
    "DRIVER_VERSION",
    "InvalidManifest",
    "NodeGroup",
    "SeedFileError",
    "SimSpec",
    "SimulatedCluster",
    "load_seed_file",
]

MAIN_CONTAINER = "main"


class SimulatedCluster:
    def __init__(
        self,
        spec: SimSpec | str,
        *,
        cluster_id: str,
        clock: Callable[[], float],
        read_only: bool = False,
        unix_offset: float | None = None,
    ) -> None:
        """`unix_offset` maps clock() to unix time for timestamps (default: now - clock())."""
        self.spec = SimSpec.parse(spec) if isinstance(spec, str) else spec
        self.cluster_id = cluster_id
        self.read_only = read_only
        self._clock = clock
        self._lock = threading.Lock()
        self._hw = Hardware(self.spec, cluster_id=cluster_id)
        offset = time.time() - clock() if unix_offset is None else unix_offset
        self._ctl = DynamoController(
            self._hw, ready_after=self.spec.ready_after, unix_offset=offset
        )
        self._refused = 0
        self._lists: dict[str, tuple[int, list[Any]]] = {}

    # -- ClusterPort ------------------------------------------------------------------------

    def revision(self) -> int:
        with self._lock:
            return self._ctl.revision

    def list_dgds(self) -> list[Dgd]:
        with self._lock:
            return self._ctl.graph_views()

    def list_pods(self) -> list[Pod]:
        with self._lock:
            return self._cached("pods", self._ctl.pod_views)

    def list_nodes(self) -> list[Node]:
        with self._lock:
            return self._cached("nodes", lambda: [node.view() for node in self._hw])

    @property
    def dgd_version(self) -> str:
        """The DGD version its Dynamo serves (`dynamo=` in the spec)."""
        return self.spec.dynamo

    def apply_dgd(self, manifest: Mapping[str, Any], *, take_over: str = "") -> None:
        # No field ownership here: every apply takes what it sends (take_over changes nothing).
        with self._lock:
            self._refuse_if_read_only("apply_dgd")
            if self.spec.dynamo == dgd_versions.V1BETA1:
                manifest = self._through_v1beta1(manifest)
            try:
                graph = parse_manifest(manifest)
            except InvalidManifest as e:
                raise ClusterError(str(e), retryable=False) from e
            self._ctl.apply(graph, now=self._clock())

    def delete_dgd(self, namespace: str, name: str) -> None:
        with self._lock:
            self._refuse_if_read_only("delete_dgd")
            self._ctl.delete(namespace, name, now=self._clock())

    def list_scaling_adapters(self) -> list[ScalingAdapter]:
        """The simulated Dynamo makes no scaling adapters (docs/simulated-cluster.md)."""
        return []

    def scale_adapter(self, namespace: str, name: str, replicas: int) -> None:
        raise ClusterError(
            f"the simulated cluster has no scaling adapter {namespace}/{name}", retryable=False
        )

    # -- driving time -----------------------------------------------------------------------

    def advance(self) -> int:
        """Carry out every transition due at clock(); returns how many pods became ready."""
        with self._lock:
            if not self._ctl.has_timers():
                return 0
            return self._ctl.advance(self._clock())

    def next_due(self) -> float | None:
        """The clock() value at which the next transition is due; None if none is pending."""
        with self._lock:
            return self._ctl.next_due()

    # -- others' doings ---------------------------------------------------------------------

    @property
    def mutations_refused(self) -> int:
        """How many apply_dgd/delete_dgd calls read-only mode refused."""
        return self._refused

    def seed(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        """Create DGDs as if applied before the agent started: their pods are ready at once.

        Raises InvalidManifest (a ValueError) before creating anything if one is invalid.
        """
        graphs: list[Graph] = [parse_manifest(m) for m in manifests]
        with self._lock:
            for graph in graphs:
                self._ctl.apply(graph, now=self._clock(), instant=True)

    def set_device_health(self, device_uuid: str, *, healthy: bool, reason: str = "") -> None:
        """Mark a GPU (un)healthy, as NVML and the device plugin would see it."""
        with self._lock:
            gpu = self._hw.gpu(device_uuid)
            reason = "" if healthy else (reason or "unhealthy")
            if (gpu.healthy, gpu.health_reason) == (healthy, reason):
                return
            gpu.healthy, gpu.health_reason = healthy, reason
            self._ctl.capacity_changed(now=self._clock())

    def fail_pod(self, namespace: str, name: str, *, reason: str = "Error") -> None:
        """The pod's containers fail: it turns Failed, frees its devices and is replaced."""
        with self._lock:
            self._ctl.fail_pod(namespace, name, reason=reason, now=self._clock())

    def delete_pod(self, namespace: str, name: str) -> None:
        """Someone deletes the pod (kubectl delete pod): it goes at once and is replaced."""
        with self._lock:
            self._ctl.delete_pod(namespace, name, now=self._clock())

    def remove_node(self, name: str) -> None:
        """The node leaves the cluster with its GPUs; its pods are deleted and replaced."""
        with self._lock:
            self._hw.remove_node(name)
            self._ctl.node_removed(name, now=self._clock())

    def add_node(self, group: NodeGroup | None = None) -> str:
        """A node joins, shaped like `group` (default: the spec's first group); its name."""
        with self._lock:
            node = self._hw.add_node(group or self.spec.groups[0])
            self._ctl.capacity_changed(now=self._clock())
            return node.name

    # -- what a node's NVML and kubelet see (agent/cluster/simulated/node.py) ---------------

    def node_gpus(self, node_name: str) -> tuple[Gpu, ...]:
        """KeyError if the node is not (or no longer) in the cluster."""
        with self._lock:
            return self._hw.node(node_name).gpu_views()

    def node_pod_devices(self, node_name: str) -> list[PodDevices]:
        with self._lock:
            return [
                PodDevices(
                    namespace=pod.namespace,
                    pod_name=pod.name,
                    container=MAIN_CONTAINER,
                    resource_name=GPU_RESOURCE,
                    device_ids=pod.devices,
                )
                for pod in self._ctl.pods_holding_devices(node_name)
            ]

    def node_allocatable(self, node_name: str) -> tuple[str, ...]:
        """Healthy device ids, as kubelet's GetAllocatableResources reports them."""
        with self._lock:
            node = self._hw.nodes.get(node_name)
            return tuple(g.uuid for g in node.gpus if g.healthy) if node else ()

    # -- internals --------------------------------------------------------------------------

    def _through_v1beta1(self, manifest: Mapping[str, Any]) -> Mapping[str, Any]:
        """The manifest as a Dynamo storing v1beta1 keeps it (written as v1beta1, read back),
        refused as its webhook refuses an in-place change v1beta1 forbids."""
        meta = manifest.get("metadata") or {}
        live = next(
            (
                d
                for d in self._ctl.graph_views()
                if (d.namespace, d.name) == (meta.get("namespace"), meta.get("name"))
            ),
            None,
        )
        if live is not None:
            reason = dgd_versions.recreate_reason(live.spec, manifest.get("spec") or {})
            if reason:
                raise ClusterError(
                    f"admission webhook denied the request: {reason}", retryable=False
                )
        return dgd_versions.to_internal(dgd_versions.to_served(manifest, dgd_versions.V1BETA1))

    def _refuse_if_read_only(self, operation: str) -> None:
        if self.read_only:
            self._refused += 1
            raise ReadOnlyViolation(operation)

    def _cached(self, kind: str, build: Callable[[], list[Any]]) -> list[Any]:
        # Observers poll; rebuild a listing only when something changed since the last one.
        revision = self._ctl.revision
        hit = self._lists.get(kind)
        if hit is None or hit[0] != revision:
            hit = self._lists[kind] = (revision, build())
        return list(hit[1])
