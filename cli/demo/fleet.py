"""The demo's fleet: three simulated clusters (one running a DGD nobody declared), two
projects and three workloads, and the calls that register, start and declare them."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import grpc

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.simulation import build_simulated_agent
from hub.app import HubServer
from hub.model import FailoverPolicy, Placement, Serving
from hub.service import clusters, projects, workloads
from hub.service.context import ServiceContext
from hub.service.workloads import WorkloadSpec


@dataclass(frozen=True)
class DemoCluster:
    cluster_id: str
    labels: dict[str, str]
    spec: str
    seed: tuple[dict[str, object], ...] = ()


LEGACY_ARGS = ["--model", "mistralai/Mistral-7B-Instruct-v0.3", "--tensor-parallel-size", "2"]


LEGACY_DGD: dict[str, object] = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "legacy-mistral", "namespace": "research"},
    "spec": {
        "backendFramework": "vllm",
        "services": {
            "Frontend": {"componentType": "frontend", "replicas": 1},
            "VllmDecodeWorker": {
                "componentType": "worker",
                "replicas": 1,
                "resources": {"limits": {"gpu": "2"}},
                "extraPodSpec": {
                    "mainContainer": {
                        "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.10.1",
                        "command": ["python3", "-m", "dynamo.vllm"],
                        "args": LEGACY_ARGS,
                    }
                },
            },
        },
    },
}


CLUSTERS = (
    DemoCluster("east", {"region": "us-east", "tier": "prod"}, "nodes=2,gpus=8,class=H100-80GB"),
    # A newer Dynamo (1.5 on) than the other two: the agent writes v1beta1 DGDs there.
    DemoCluster(
        "west",
        {"region": "us-west", "tier": "prod"},
        "nodes=1,gpus=8,class=H100-80GB,dynamo=v1beta1",
    ),
    DemoCluster(
        "lab", {"region": "us-east", "tier": "dev"}, "nodes=1,gpus=4,class=A100-40GB", (LEGACY_DGD,)
    ),
)


# research also runs legacy-mistral on lab (2 A100s): it is adopted into research, so search's
# A100 quota stays whole and qwen-72b keeps waiting on capacity, not quota.
PROJECTS = {
    "search": {"H100-80GB": 16, "A100-40GB": 8},
    "research": {"H100-80GB": 4, "A100-40GB": 4},
}


ADOPT_INTO = "research"


EXPECTED = {
    "llama-70b": ("running", ""),
    "mixtral-8x22b": ("pending", "insufficient_quota"),
    "qwen-72b": ("pending", "insufficient_capacity"),
}


def _serving(model: str, *, tp: int, engine: str = "vllm", **extra: object) -> Serving:
    return Serving(
        engine=engine,
        engine_version="0.11.0",
        model=model,
        tensor_parallel=tp,
        context_length=8192,
        **extra,  # type: ignore[arg-type]
    )


WORKLOADS = (
    WorkloadSpec(
        name="llama-70b",
        project="search",
        replicas=4,
        device_class="H100-80GB",
        serving=_serving("meta-llama/Llama-3.3-70B-Instruct", tp=4, quantization="fp8"),
        # Failover on: the demo's last story stops west's agent (docs/placement.md).
        placement=Placement(
            clusters=("east", "west"),
            failover=FailoverPolicy(toleration_s=3, stabilization_s=5),
        ),
    ),
    WorkloadSpec(
        name="mixtral-8x22b",
        project="research",
        replicas=2,
        device_class="H100-80GB",
        # TP 8: a replica needs more than research's quota, so no replica of it can run (one
        # that fitted would run while the rest waits: docs/admission.md).
        serving=_serving("mistralai/Mixtral-8x22B-Instruct-v0.1", tp=8, engine="sglang"),
        placement=Placement(clusters=("east",)),
    ),
    WorkloadSpec(
        name="qwen-72b",
        project="search",
        replicas=1,
        device_class="A100-40GB",
        serving=_serving("Qwen/Qwen2.5-72B-Instruct", tp=8),
        placement=Placement(clusters=("lab",)),
    ),
)


def start_agents(hub: HubServer, ready_after: str, channels: list[grpc.aio.Channel]) -> list[Agent]:
    assert hub.ctx is not None
    target = f"127.0.0.1:{hub.grpc_port}"
    agents = []
    for cluster in CLUSTERS:
        _, token = clusters.create(hub.ctx, cluster_id=cluster.cluster_id, labels=cluster.labels)
        config = AgentConfig(
            hub=target, cluster_id=cluster.cluster_id, token=token, resync_s=5.0, node_poll_s=2.0
        )
        agent = new_agent(hub, config, ready_after, channels)
        if cluster.seed and isinstance(agent.cluster, SimulatedCluster):
            agent.cluster.seed(list(cluster.seed))
        agents.append(agent)
    return agents


def new_agent(
    hub: HubServer, config: AgentConfig, ready_after: str, channels: list[grpc.aio.Channel]
) -> Agent:
    """A new agent (and simulated cluster) for a registered cluster of the demo."""
    spec = next(c.spec for c in CLUSTERS if c.cluster_id == config.cluster_id)
    channel = grpc.aio.insecure_channel(config.hub)
    channels.append(channel)
    return build_simulated_agent(
        config,
        spec=f"{spec},ready_after={ready_after}",
        channel=channel,
        backoff=Backoff(base_s=0.2, cap_s=2.0),
    )


async def until_reported(ctx: ServiceContext, stop: asyncio.Event) -> None:
    while not stop.is_set():
        views, _ = clusters.list_page(ctx, page_size=100, page_token="")
        if all(v.capacity for v in views):
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.1)


def declare(ctx: ServiceContext) -> None:
    for name, quotas in PROJECTS.items():
        projects.create(ctx, name=name, quotas=quotas)
    for spec in WORKLOADS:
        workloads.create(ctx, spec)
