"""Wiring of an agent on a real cluster: one DaemonSet pod (`wingsmith agent --kubernetes`).

Every pod reports its own node: NVML through nvidia-ml-py (agent/devices/nvml.py) and device
assignments through the kubelet's PodResources socket (agent/kubelet/client.py). One pod, the
holder of a coordination.k8s.io Lease (agent/cluster/kube_lease.py), also reconciles the
cluster's deployments and reports cluster-level state; the hub fences a stale leader by term.
DGDs, pods and nodes come from the Kubernetes adapter's watch caches
(agent/cluster/kube.py). Cluster calls block, so the agent runs them in worker threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import grpc

from agent.app import Agent, AgentConfig
from agent.cluster.kube import KubernetesCluster
from agent.cluster.kube_config import load_api_client
from agent.cluster.kube_lease import LeaseElector
from agent.devices.nvml import NvmlInventory
from agent.kubelet.client import PodResourcesClient
from agent.observe import NodeSource


@dataclass(frozen=True)
class KubernetesOptions:
    node_name: str
    pod_name: str
    lease_namespace: str
    lease_name: str = "wingsmith-hangar"
    kubeconfig: str | None = None
    context: str | None = None
    pod_resources_socket: str = "/var/lib/kubelet/pod-resources/kubelet.sock"
    nvml_library: str | None = None
    # Namespaces whose DGDs the agent watches; empty: all (adoption needs to see them).
    watch_namespaces: tuple[str, ...] = ()
    sync_timeout_s: float = 60.0


@asynccontextmanager
async def kubernetes_agent(
    config: AgentConfig, options: KubernetesOptions, *, channel: grpc.aio.Channel
) -> AsyncIterator[Agent]:
    """An agent on this pod's cluster and node; watches, lease and clients stop on exit."""
    loop = asyncio.get_running_loop()
    api = load_api_client(kubeconfig=options.kubeconfig, context=options.context)
    holder: list[Agent] = []

    def changed() -> None:
        if holder:
            loop.call_soon_threadsafe(holder[0].cluster_changed)

    cluster = KubernetesCluster(
        api, namespaces=options.watch_namespaces, read_only=config.read_only, on_change=changed
    )
    kubelet = PodResourcesClient(options.pod_resources_socket)
    node = NodeSource(
        node_id=options.node_name,
        inventory=NvmlInventory(library_path=options.nvml_library),
        kubelet=kubelet,
    )
    agent = Agent(
        replace(config, node_name=options.node_name, instance=options.pod_name, blocking_io=True),
        cluster=cluster,
        nodes=lambda: [node],
        channel=channel,
    )
    holder.append(agent)

    def leadership(leading: bool, term: int) -> None:
        loop.call_soon_threadsafe(agent.set_leadership, leading, term)

    elector = LeaseElector(
        api,
        namespace=options.lease_namespace,
        name=options.lease_name,
        identity=options.pod_name,
        on_change=leadership,
    )
    cluster.start()
    try:
        synced = await asyncio.to_thread(cluster.wait_synced, options.sync_timeout_s)
        if not synced:
            raise RuntimeError(
                "the Kubernetes API did not answer the first lists in time: check the"
                " service account's RBAC (docs/kubernetes.md) and the API server"
            )
        elector.start()
        yield agent
    finally:
        await asyncio.to_thread(elector.stop)
        await asyncio.to_thread(cluster.stop, 10.0)
        kubelet.close()
        api.close()  # type: ignore[no-untyped-call]
