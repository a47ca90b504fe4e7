"""DaemonSet pods for integration tests: whole `--kubernetes` agents against one API emulator.

Each `KubePod` is `agent.kubernetes.kubernetes_agent` for one node, run on the harness loop,
with its own kubelet (a real PodResources gRPC server on a unix socket) and its own kubeconfig
whose bearer token names the pod, so the emulator's request log tells the pods apart
(`emulator.requests_by(pod.kube_auth)`) and a fault can cut one pod off the API server
(`emulator.fail(..., authorization=pod.kube_auth)`).

NVML: pynvml holds one library per process, so only one pod of a test reads the fake
libnvidia-ml.so.1 (`nvml_library`); the others get a path with no library, and run degraded,
as a node without a driver does.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import tempfile
from pathlib import Path
from typing import Any

from agent.app import Agent, AgentConfig
from agent.cluster.kube.lease import LeaseTiming
from agent.kubernetes import KubernetesOptions, kubernetes_agent
from agent.sync.channel import open_channel
from tests.fake_kube import KubeEmulator
from tests.harness import Hub, LoopThread
from tests.unit.kube.conftest import write_kubeconfig
from tests.unit.kubelet import builders as kubelet_builders
from tests.unit.kubelet.fake_kubelet import FakeKubelet

GPU = "GPU-{:08d}-0000-0000-0000-000000000000"
NO_NVML = "/nonexistent/libnvidia-ml.so.1"
# Short, so takeovers take seconds; a renew deadline below the lease duration, as required.
FAST_LEASE = LeaseTiming(lease_duration_s=2.0, renew_deadline_s=1.5, retry_s=0.2)


class KubePod:
    def __init__(
        self,
        loop: LoopThread,
        hub: Hub,
        emulator: KubeEmulator,
        *,
        token: str,
        node: str,
        pod: str,
        nvml_library: str = NO_NVML,
        read_only: bool = False,
        lease_timing: LeaseTiming = FAST_LEASE,
        allocatable: tuple[str, ...] = (),
        node_gone_grace_s: float = 0.3,
    ) -> None:
        self.loop = loop
        self.pod = pod
        self.kube_auth = f"Bearer token-{pod}"
        directory = Path(tempfile.mkdtemp(prefix="kpod-"))  # short: unix socket paths are
        self.kubelet = FakeKubelet(str(directory / "kubelet.sock"))
        self.kubelet.allocatable = kubelet_builders.devices("nvidia.com/gpu", *allocatable)
        self.kubelet.start()
        self.config = AgentConfig(
            hub=hub.grpc_target,
            cluster_id="east",
            token=token,
            read_only=read_only,
            resync_s=0.5,
            node_poll_s=0.5,
            node_gone_grace_s=node_gone_grace_s,
        )
        self.options = KubernetesOptions(
            node_name=node,
            pod_name=pod,
            lease_namespace="wingsmith",
            kubeconfig=str(
                write_kubeconfig(
                    directory / "kubeconfig", server=emulator.url, token=f"token-{pod}"
                )
            ),
            pod_resources_socket=self.kubelet.socket_path,
            nvml_library=nvml_library,
            lease_timing=lease_timing,
            sync_timeout_s=5.0,
        )
        self._agent: Agent | None = None
        self.future = loop.spawn(self._run())

    @property
    def agent(self) -> Agent:
        assert self._agent is not None, "the pod's agent has not started yet"
        return self._agent

    @property
    def started(self) -> bool:
        return self._agent is not None

    async def _run(self) -> Any:
        channel = open_channel(self.config.hub)
        try:
            async with kubernetes_agent(self.config, self.options, channel=channel) as agent:
                self._agent = agent
                await agent.run()
        finally:
            await channel.close()

    def stop(self) -> None:
        """The pod goes away: its agent stops (a leader releases its Lease) and its stream
        closes."""
        self.loop.loop.call_soon_threadsafe(self.future.cancel)
        with contextlib.suppress(concurrent.futures.CancelledError, Exception):
            self.future.result(timeout=30)
        self.kubelet.stop()


def leader(hub: Hub, cluster_id: str = "east") -> str:
    """The instance (pod name) the hub marks as its cluster's leader; "" if none."""
    agents = hub.get(f"/v1/clusters/{cluster_id}")["agents"]
    leaders = [a["instance"] for a in agents if a["leader"]]
    return leaders[0] if leaders else ""


def node_object(name: str, *, gpus: int = 8) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }
