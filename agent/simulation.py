"""Wiring of an agent on the simulated cluster (`wingsmith agent --simulate SPEC`).

One agent process stands for a whole simulated cluster: it reconciles it, and reports every
simulated node through that node's simulated NVML and kubelet, the same ports the real
DaemonSet reads on its own node. Many such agents can share one event loop (the demo, the
fleet benchmark).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import grpc

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.cluster.simulated.node import SimulatedKubelet, SimulatedNvml
from agent.cluster.simulated.seed import load_seed_file
from agent.observe import NodeSource


def simulated_cluster(
    config: AgentConfig,
    *,
    spec: str,
    seed_path: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SimulatedCluster:
    cluster = SimulatedCluster(
        spec, cluster_id=config.cluster_id, clock=clock, read_only=config.read_only
    )
    if seed_path:
        cluster.seed(load_seed_file(seed_path))
    return cluster


def node_sources(cluster: SimulatedCluster) -> Callable[[], list[NodeSource]]:
    cache: dict[str, NodeSource] = {}

    def sources() -> list[NodeSource]:
        current = []
        for node in cluster.list_nodes():
            source = cache.get(node.name)
            if source is None:
                source = NodeSource(
                    node_id=node.name,
                    inventory=SimulatedNvml(cluster, node.name),
                    kubelet=SimulatedKubelet(cluster, node.name),
                )
                cache[node.name] = source
            current.append(source)
        return current

    return sources


def build_simulated_agent(
    config: AgentConfig,
    *,
    spec: str,
    channel: grpc.aio.Channel,
    seed_path: str | None = None,
    backoff: Backoff | None = None,
) -> Agent:
    cluster = simulated_cluster(config, spec=spec, seed_path=seed_path)
    # The simulated nodes' GPU labels carry the groups' product names; whatever the built-in
    # class table would make of a made-up name, they are of the class the spec gave.
    overrides = {group.product_name: group.device_class for group in cluster.spec.groups}
    config = replace(config, class_overrides={**overrides, **config.class_overrides})
    return Agent(
        config,
        cluster=cluster,
        nodes=node_sources(cluster),
        channel=channel,
        sim=cluster,
        backoff=backoff,
    )
