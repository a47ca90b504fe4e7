"""Wiring of an agent on a real cluster: one DaemonSet pod (`wingsmith agent --kubernetes`).

Every pod reports its own node: NVML through nvidia-ml-py (agent/devices/nvml.py), every
device id the kubelet reports resolved through NVML (agent/devices/resolve.py), and device
assignments through the kubelet's PodResources socket (agent/kubelet/client.py). One pod leads:
it also reconciles the cluster's deployments and reports cluster-level state (deployments,
DGDs nobody declared, nodes that left the cluster); the hub fences a stale leader by term.

Who leads (docs/daemonset.md):
- managed: the holder of a coordination.k8s.io Lease (agent/cluster/kube/lease.py). When the
  hub fences a pod that still holds the Lease (the Lease was recreated and its term restarted
  below the hub's), the pod moves the Lease's term past the hub's and claims again;
- read-only: the pod the hub grants leadership to. A read-only agent sends no mutating request
  at all, so it cannot hold a Lease: the hub, which sees every pod's stream, picks one.

Only the leader needs the cluster-wide caches of DGDs, Dynamo pods and nodes
(agent/cluster/kube/cluster.py): a pod starts those watches when it comes to lead, and takes up
leadership only once they have listed (reconciling against empty caches would re-apply
everything and report every deployment gone); it stops them when it no longer leads. A
follower sends the API server nothing but its Lease attempts (managed) or nothing at all
(read-only): NVML and the kubelet are all its node needs. Cluster calls block, so the agent
runs them in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

import grpc

from agent.app import Agent, AgentConfig
from agent.cluster.kube.cluster import KubernetesCluster
from agent.cluster.kube.config import load_api_client
from agent.cluster.kube.lease import LeaseElector, LeaseTiming
from agent.devices.nvml import NvmlInventory
from agent.devices.resolve import KubeletDevices, ResolvedInventory
from agent.kubelet.client import PodResourcesClient
from agent.observe import NodeSource

log = logging.getLogger(__name__)


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
    # How long a new leader waits for its first lists before it warns (and waits on).
    sync_timeout_s: float = 60.0
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)


class LeadershipDriver:
    """Turns the Lease's or the hub's word into the agent's leadership, watches first.

    Events (on the event loop) only record the leadership wanted; one task at a time brings
    the watches in line with it, then tells the agent. Stepping down is told at once.
    """

    def __init__(
        self,
        agent: Agent,
        cluster: KubernetesCluster,
        *,
        elector: LeaseElector | None,
        sync_timeout_s: float,
    ) -> None:
        self._agent = agent
        self._cluster = cluster
        self._elector = elector
        self._sync_timeout_s = sync_timeout_s
        self._wanted = (False, 0)
        self._task: asyncio.Task[None] | None = None
        self._advancing: set[asyncio.Task[None]] = set()

    def lease_changed(self, leading: bool, term: int) -> None:
        """From the elector (managed)."""
        self._want(leading, term)

    def granted(self, term: int) -> None:
        """From the hub: a grant (read-only), or the confirmation of a Lease term (managed)."""
        if self._elector is None:
            self._want(True, term)

    def fenced(self, term: int) -> None:
        """From the hub: a newer term leads (the agent already stopped leading). Read-only:
        wait for the next grant. Managed: if this pod still holds the Lease, the elector
        moves the Lease's term past `term`, and the pod leads again with it."""
        if self._elector is None:
            self._want(False, term, tell=False)  # telling the hub would stop its grants
            return
        task = asyncio.get_running_loop().create_task(self._advance(self._elector, term))
        self._advancing.add(task)
        task.add_done_callback(self._advancing.discard)

    async def close(self) -> None:
        tasks = [t for t in (self._task, *self._advancing) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _advance(self, elector: LeaseElector, term: int) -> None:
        state = await asyncio.to_thread(elector.advance, term)
        if state.leading:
            self._want(True, state.term)

    def _want(self, leading: bool, term: int, *, tell: bool = True) -> None:
        self._wanted = (leading, term)
        if not leading and tell:
            self._agent.set_leadership(False, term)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._settle())

    async def _settle(self) -> None:
        while True:
            wanted = self._wanted
            leading, term = wanted
            if leading:
                await self._watches_up()
            else:
                await asyncio.to_thread(self._cluster.stop, 10.0)
            if self._wanted != wanted:
                continue  # it changed while the watches moved
            if leading:
                self._agent.set_leadership(True, term)
            return

    async def _watches_up(self) -> None:
        """Start the watches and wait for their first lists, for as long as leading is still
        wanted (the next pass stops them if it no longer is)."""
        await asyncio.to_thread(self._cluster.start)
        waited = 0.0
        while self._wanted[0]:
            if await asyncio.to_thread(self._cluster.wait_synced, self._sync_timeout_s):
                return
            waited += self._sync_timeout_s
            log.warning(
                "leading waits for the Kubernetes API's first lists (%.0f s so far): check"
                " the service account's RBAC (docs/kubernetes.md) and the API server",
                waited,
            )


@asynccontextmanager
async def kubernetes_agent(
    config: AgentConfig, options: KubernetesOptions, *, channel: grpc.aio.Channel
) -> AsyncIterator[Agent]:
    """An agent on this pod's cluster and node; watches, lease and clients stop on exit."""
    loop = asyncio.get_running_loop()
    api = load_api_client(kubeconfig=options.kubeconfig, context=options.context)

    def changed() -> None:
        loop.call_soon_threadsafe(agent.cluster_changed)

    cluster = KubernetesCluster(
        api, namespaces=options.watch_namespaces, read_only=config.read_only, on_change=changed
    )
    kubelet = PodResourcesClient(options.pod_resources_socket)
    devices = KubeletDevices(kubelet)
    node = NodeSource(
        node_id=options.node_name,
        inventory=ResolvedInventory(
            NvmlInventory(library_path=options.nvml_library, node_name=options.node_name),
            devices,
        ),
        kubelet=devices,
    )
    agent = Agent(
        replace(config, node_name=options.node_name, instance=options.pod_name, blocking_io=True),
        cluster=cluster,
        nodes=lambda: [node],
        channel=channel,
        on_grant=lambda term: leadership.granted(term),
        on_fence=lambda term: leadership.fenced(term),
    )

    def lease_changed(leading: bool, term: int) -> None:  # on the elector's thread
        loop.call_soon_threadsafe(leadership.lease_changed, leading, term)

    # Read-only: no elector at all, so no request that writes (a Lease's) can be made.
    elector = None
    if not config.read_only:
        elector = LeaseElector(
            api,
            namespace=options.lease_namespace,
            name=options.lease_name,
            identity=options.pod_name,
            on_change=lease_changed,
            timing=options.lease_timing,
        )
    leadership = LeadershipDriver(
        agent, cluster, elector=elector, sync_timeout_s=options.sync_timeout_s
    )
    if elector is not None:
        elector.start()
    try:
        yield agent
    finally:
        await leadership.close()
        if elector is not None:
            await asyncio.to_thread(elector.stop)
        await asyncio.to_thread(cluster.stop, 10.0)
        kubelet.close()
        api.close()  # type: ignore[no-untyped-call]
