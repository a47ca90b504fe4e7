"""What leaves the cluster leaves the hub: a node that is gone takes its devices, allocations
and replicas out of the hub's view within the grace period, however it went; and a discovered
DGD that still runs is seen as of the cluster's last report."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.simulation import node_sources
from agent.sync.channel import open_channel
from tests.harness import SHORT_GRACE, Hub, LoopThread, SimAgent, running_hub, wait_until, workload
from tests.integration.test_adoption import legacy_dgd, seeded

THREE = "nodes=3,gpus=8,class=H100-80GB,ready_after=0.1s"
GONE = "east-node-2"


def _nodes(hub: Hub) -> list[str]:
    return [n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]]


def _capacity(hub: Hub) -> int:
    return int(hub.get("/v1/clusters/east")["devices"].get("H100-80GB", {}).get("total", 0))


def _traces(hub: Hub, node_id: str) -> dict[str, list[Any]]:
    """Everything the hub still says is on `node_id`."""
    allocations = hub.get("/v1/allocations?cluster_id=east")["allocations"]
    replicas = hub.get("/v1/replicas?deployment_id=chat.east")["replicas"]
    return {
        "nodes": [n for n in _nodes(hub) if n == node_id],
        "allocations": [a["pod_name"] for a in allocations if a["node_id"] == node_id],
        "replicas": [r["name"] for r in replicas if r["node_id"] == node_id],
    }


def _gone(hub: Hub, node_id: str) -> bool:
    return not any(_traces(hub, node_id).values())


def _running_everywhere(hub: Hub, nodes: int) -> bool:
    allocations = hub.get("/v1/allocations?deployment_id=chat.east")["allocations"]
    return len({a["node_id"] for a in allocations}) == nodes


class _Agent:
    """A real agent on a simulated cluster the test holds (so it outlives the agent)."""

    def __init__(
        self, loop: LoopThread, hub: Hub, cluster: SimulatedCluster, *, token: str, node: str = ""
    ) -> None:
        self.loop = loop

        async def build() -> tuple[Agent, grpc.aio.Channel]:
            channel = open_channel(hub.grpc_target)
            sources = node_sources(cluster)
            config = AgentConfig(
                hub=hub.grpc_target,
                cluster_id="east",
                token=token,
                node_name=node,
                instance=f"hangar-{node or 'cluster'}",
                resync_s=0.5,
                node_poll_s=1.0,
            )
            agent = Agent(
                config,
                cluster=cluster,
                nodes=lambda: [s for s in sources() if not node or s.node_id == node],
                channel=channel,
                sim=cluster,
                backoff=Backoff(base_s=0.05, cap_s=0.5),
            )
            return agent, channel

        self.agent, self.channel = loop.run(build())
        self.future = loop.spawn(self.agent.run())

    def lead(self, term: int) -> None:
        async def set_it() -> None:
            self.agent.set_leadership(True, term)

        self.loop.run(set_it())

    def stop(self) -> None:
        self.loop.loop.call_soon_threadsafe(self.future.cancel)
        with pytest.raises((asyncio.CancelledError, Exception)):
            self.future.result(timeout=10)
        self.loop.run(self.channel.close())


def test_a_cluster_restarted_smaller_leaves_no_trace_of_the_node_it_lost(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=24)
    big = agents(cluster_id="east", token=token, spec=THREE)
    hub.post("/v1/workloads", workload("chat", replicas=3, tp=8, clusters=("east",)))
    wait_until(lambda: _running_everywhere(hub, 3), what="a replica on every node")
    assert _capacity(hub) == 24

    big.stop()
    agents(cluster_id="east", token=token, spec="nodes=2,gpus=8,ready_after=0.1s")

    wait_until(lambda: _gone(hub, GONE), what=f"{GONE} out of the hub's view")
    assert _nodes(hub) == ["east-node-0", "east-node-1"]
    assert _capacity(hub) == 16


def test_a_node_deleted_while_the_agent_was_away_leaves_the_hub(
    env: tuple[LoopThread, Hub],
) -> None:
    loop, hub = env
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=24)
    cluster = SimulatedCluster(THREE, cluster_id="east", clock=time.monotonic)
    first = _Agent(loop, hub, cluster, token=token)
    hub.post("/v1/workloads", workload("chat", replicas=3, tp=8, clusters=("east",)))
    wait_until(lambda: _running_everywhere(hub, 3), what="a replica on every node")

    first.stop()  # the agent restarts (its pod is replaced) ...
    cluster.remove_node(GONE)  # ... and meanwhile the node is deleted
    second = _Agent(loop, hub, cluster, token=token)
    try:
        wait_until(lambda: _gone(hub, GONE), what=f"{GONE} out of the hub's view")
        assert _capacity(hub) == 16
    finally:
        second.stop()


def test_a_daemonset_node_whose_agent_is_gone_for_good_leaves_within_the_grace_period(
    tmp_path: Path,
) -> None:
    settings = SHORT_GRACE
    with running_hub(tmp_path, settings) as (loop, hub):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=16)
        cluster = SimulatedCluster(
            "nodes=2,gpus=8,class=H100-80GB", cluster_id="east", clock=time.monotonic
        )
        leader = _Agent(loop, hub, cluster, token=token, node="east-node-0")
        leader.lead(1)
        other = _Agent(loop, hub, cluster, token=token, node="east-node-1")
        hub.post("/v1/workloads", workload("chat", replicas=2, tp=8, clusters=("east",)))
        try:
            wait_until(lambda: _running_everywhere(hub, 2), what="a replica on every node")
            wait_until(lambda: _traces(hub, "east-node-1")["replicas"], what="replica reported")
            # Taken before the stream closes: the hub's grace period starts after this.
            stopped = time.monotonic()
            other.stop()  # its node stays in the cluster: nobody will ever report it absent

            wait_until(lambda: _gone(hub, "east-node-1"), what="node-1 dropped")
            waited = time.monotonic() - stopped
            assert waited >= settings.stale_after_s, f"dropped {waited:.2f}s after: too soon"
            assert _capacity(hub) == 8
            assert _nodes(hub) == ["east-node-0"]
            assert not hub.get("/v1/clusters/east")["stale"], "the cluster lives on"
            assert _traces(hub, "east-node-0")["allocations"], "the reported node is kept"

            # Its agent comes back: so does the node.
            other = _Agent(loop, hub, cluster, token=token, node="east-node-1")
            wait_until(lambda: _capacity(hub) == 16, what="node-1 back")
        finally:
            other.stop()
            leader.stop()
        # Every agent gone is a quiet (stale) cluster, not vanished nodes: its data is kept,
        # past another whole grace period (no fixed wait can prove a "never"; this one spans
        # twice the grace since the streams closed, several of the hub's passes).
        wait_until(lambda: hub.get("/v1/clusters/east")["stale"], what="stale")
        time.sleep(settings.stale_after_s + 1.0)
        assert _nodes(hub) == ["east-node-0", "east-node-1"]
        assert _capacity(hub) == 16


def test_a_discovered_dgd_still_running_is_seen_as_of_the_clusters_last_report(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    token = hub.register_cluster("east")
    agents(cluster_id="east", token=token, seed_path=seeded(tmp_path, legacy_dgd()))

    def seen() -> datetime:
        return _time(hub.get("/v1/discovered/east.ml.legacy-qwen")["last_seen"])

    first = wait_until(lambda: hub.get("/v1/discovered")["discovered"] and seen())
    # Nothing about the DGD changes, so the agent sends nothing about it; its heartbeats go on.
    later = wait_until(lambda: seen() > first and seen(), what="last_seen advancing")
    assert later <= _time(hub.get("/v1/clusters/east")["last_seen"])


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)
