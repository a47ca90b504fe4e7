"""DaemonSet roles: every agent reports its own node, one leader reconciles, the hub fences a
stale leader by Lease term (here the terms are given by the test; the Lease elector itself is
tested against the Kubernetes API emulator in tests/unit/kube/test_kube_lease.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.simulation import node_sources
from agent.sync.channel import open_channel
from tests.harness import Hub, LoopThread, wait_until, workload
from tests.integration.rawstream import RawStream, now_ns
from wingsmith.v1 import resources_pb2, sync_pb2


class Pod:
    """One DaemonSet pod: an agent for one node of a shared simulated cluster."""

    def __init__(
        self,
        loop: LoopThread,
        hub: Hub,
        cluster: SimulatedCluster,
        *,
        node: str,
        token: str,
        built: Callable[[Agent], None] = lambda agent: None,
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
                instance=f"hangar-{node}",
                resync_s=0.5,
                node_poll_s=1.0,
            )
            agent = Agent(
                config,
                cluster=cluster,
                nodes=lambda: [s for s in sources() if s.node_id == node],
                channel=channel,
                sim=cluster,
                backoff=Backoff(base_s=0.05, cap_s=0.5),
            )
            built(agent)
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


@pytest.fixture
def pods(env: tuple[LoopThread, Hub]) -> Any:
    loop, hub = env
    started: list[Pod] = []

    def start(cluster: SimulatedCluster, *, node: str, token: str, **kwargs: Any) -> Pod:
        pod = Pod(loop, hub, cluster, node=node, token=token, **kwargs)
        started.append(pod)
        return pod

    yield start
    for pod in started:
        pod.stop()


def test_one_leader_reconciles_every_pod_reports_its_node_and_a_newer_term_fences(
    hub: Hub, pods: Any
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    cluster = SimulatedCluster(
        "nodes=2,gpus=8,class=H100-80GB,ready_after=0.2s", cluster_id="east", clock=_monotonic()
    )
    a = pods(cluster, node="east-node-0", token=token)
    b = pods(cluster, node="east-node-1", token=token)
    wait_until(lambda: len(hub.get("/v1/clusters/east")["nodes"]) == 2, what="both nodes reported")
    assert {x["node_name"] for x in hub.get("/v1/clusters/east")["agents"]} == {
        "east-node-0",
        "east-node-1",
    }

    a.lead(1)
    wait_until(lambda: _leader(hub) == "hangar-east-node-0", what="a leads")
    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/chat")["phase"] == "running", what="running")
    assert a.agent.applied >= 1 and b.agent.applied == 0, "only the leader reconciles"

    b.lead(2)
    wait_until(lambda: _leader(hub) == "hangar-east-node-1", what="b leads")
    wait_until(lambda: not a.agent.leading, what="a fenced")
    assert hub.get("/v1/clusters/east")["leader_term"] == 2

    # A pod that still thinks it holds term 1 cannot take back the cluster.
    a.lead(1)
    wait_until(lambda: not a.agent.leading, what="a stays fenced")
    applied_by_a = a.agent.applied
    hub.patch("/v1/workloads/chat", {"replicas": 2})
    wait_until(
        lambda: (hub.get("/v1/deployments/chat.east")["status"] or {}).get("ready_replicas") == 2
    )
    assert a.agent.applied == applied_by_a, "the fenced pod applied nothing"
    assert b.agent.applied >= 1


def _lease_won_after_the_hello(agent: Agent) -> None:
    """The elector wins the Lease just after the agent wrote its Hello (term 0), before the
    hub's Welcome: `set_leadership` finds no open stream to tell."""
    hello = agent.client._hello

    def hello_then_lease() -> sync_pb2.Hello:
        message = hello()
        if agent.term == 0:
            asyncio.get_running_loop().call_soon(agent.set_leadership, True, 1)
        return message

    agent.client._hello = hello_then_lease


def test_a_lease_won_while_the_stream_opens_is_told_to_the_hub(hub: Hub, pods: Any) -> None:
    """Seen on a busy machine: the leader's Lease message was dropped in the handshake, the hub
    fenced its cluster state, and nothing was ever placed (tests/integration/
    test_vanished_nodes.py timed out waiting for replicas)."""
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8)
    cluster = SimulatedCluster(
        "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s", cluster_id="east", clock=_monotonic()
    )
    pod = pods(cluster, node="east-node-0", token=token, built=_lease_won_after_the_hello)
    wait_until(lambda: _leader(hub) == "hangar-east-node-0", what="the pod leads at the hub")
    assert (pod.agent.leading, pod.agent.term) == (True, 1)
    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/chat")["phase"] == "running", what="running")
    assert pod.agent.client.stats.problems == [], "no cluster state refused"


def test_the_hub_refuses_cluster_state_from_a_follower_and_other_nodes(hub: Hub) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    created = hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    deployment_id = created["deployments"][0]["deployment_id"]

    follower = RawStream(hub.grpc_target, token)
    follower.hello("east", node_name="n1", agent_instance="pod-1")
    welcome = follower.receive_kind("welcome").welcome
    assert welcome.leader_term == 0
    follower.send(
        observations=sync_pb2.ObservationBatch(
            seq=1,
            deployments=[
                sync_pb2.DeploymentObservation(
                    deployment_id=deployment_id, observe_unix_nanos=now_ns()
                )
            ],
        )
    )
    kinds = {follower.receive().WhichOneof("kind") for _ in range(3)}
    assert {"fence", "problem"} <= kinds
    assert hub.get(f"/v1/deployments/{deployment_id}")["status"] is None, "nothing written"

    device = resources_pb2.Device(
        uuid="GPU-00000001-0000-4000-8000-000000000001",
        device_class="H100-80GB",
        healthy=True,
        verified=True,
    )
    follower.send(
        observations=sync_pb2.ObservationBatch(
            seq=2,
            nodes=[
                sync_pb2.NodeObservation(
                    node_id="n2", observe_unix_nanos=now_ns(), devices=[device]
                )
            ],
        )
    )
    with pytest.raises(grpc.RpcError) as caught:
        for _ in range(5):
            follower.receive()
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    follower.close()


def test_a_leader_term_survives_a_hub_restart_and_an_older_term_is_fenced(hub: Hub) -> None:
    token = hub.register_cluster("east")
    leader = RawStream(hub.grpc_target, token)
    leader.hello("east", node_name="n1", agent_instance="pod-1", leader_term=5)
    leader.receive_kind("welcome")
    wait_until(lambda: hub.get("/v1/clusters/east")["leader_term"] == 5)
    leader.close()
    hub.restart()
    stale = RawStream(hub.grpc_target, token)
    stale.hello("east", node_name="n2", agent_instance="pod-2", leader_term=4)
    assert stale.receive_kind("welcome").welcome.leader_term == 5
    fence = stale.receive_kind("fence").fence
    assert fence.term == 5
    stale.close()


def _leader(hub: Hub) -> str:
    leaders = [a["instance"] for a in hub.get("/v1/clusters/east")["agents"] if a["leader"]]
    return leaders[0] if leaders else ""


def _monotonic() -> Any:
    import time

    return time.monotonic
