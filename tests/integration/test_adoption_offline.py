"""Adoption and authority while the agent is away: what it must do, or never do, when it
comes back to a cluster that changed (or a hub that did) meanwhile. A real hub and a real
agent on the simulated fleet; "away" is the agent process stopped and a new one started on
the same simulated cluster, so it starts from nothing and gets a snapshot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.simulation import node_sources
from tests.harness import (
    SHORT_GRACE,
    Hub,
    LoopThread,
    SimAgent,
    open_channel,
    running_hub,
    start_agent,
    wait_until,
)
from tests.integration.test_adoption import LEGACY_ARGS, legacy_dgd, seeded, worker_pods

MANAGED_BY = "app.kubernetes.io/managed-by"
DEPLOYMENT_ID = "wingsmith.dev/deployment-id"


def resume(loop: LoopThread, hub: Hub, cluster: SimulatedCluster, token: str) -> SimAgent:
    """A new agent process for a cluster whose agent was stopped: it holds nothing yet."""

    async def build() -> tuple[Agent, object]:
        channel = open_channel(hub.grpc_target, None)
        config = AgentConfig(
            hub=hub.grpc_target, cluster_id="east", token=token, resync_s=1.0, node_poll_s=1.0
        )
        agent = Agent(
            config,
            cluster=cluster,
            nodes=node_sources(cluster),
            channel=channel,
            sim=cluster,
            backoff=Backoff(base_s=0.05, cap_s=0.5),
        )
        return agent, channel

    agent, channel = loop.run(build())
    return SimAgent(agent=agent, future=loop.spawn(agent.run()), channel=channel, loop=loop)  # type: ignore[arg-type]


def discovered(hub: Hub, ref: str = "east.ml.legacy-qwen") -> None:
    """Wait until the agent reported `ref`, on its devices."""
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")
    wait_until(lambda: hub.get(f"/v1/discovered/{ref}")["device_class"], what="on its devices")


def managed_legacy(hub: Hub, agent: SimAgent) -> None:
    """legacy-qwen promoted, its flags declared, and taken under management."""
    discovered(hub)
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS}})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    wait_until(lambda: not hub.get("/v1/deployments/legacy-qwen.east/review")["differences"])
    hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"})
    wait_until(lambda: agent.cluster.list_dgds()[0].labels.get(MANAGED_BY), what="taken")


def test_demoting_then_deleting_while_the_agent_is_away_deletes_nothing(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    loop, hub = env
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token, seed_path=seeded(tmp_path, legacy_dgd()))
    managed_legacy(hub, agent)
    pods = worker_pods(agent)
    agent.stop()

    hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "observed"})
    hub.rest("DELETE", "/v1/workloads/legacy-qwen")
    again = resume(loop, hub, agent.cluster, token)
    try:
        wait_until(lambda: DEPLOYMENT_ID not in again.cluster.list_dgds()[0].labels, what="let go")
        rounds = again.agent.reconciles
        wait_until(lambda: again.agent.reconciles >= rounds + 2, what="two reconciles")
        (dgd,) = again.cluster.list_dgds()
        assert dgd.name == "legacy-qwen" and again.agent.deleted == 0, "nothing deleted"
        assert MANAGED_BY not in dgd.labels
        assert worker_pods(again) == pods, "no pod restarted"
        back = hub.get("/v1/discovered/east.ml.legacy-qwen")
        assert (back["state"], back["gone"]) == ("tracked", False)
    finally:
        again.stop()


def test_a_discovered_dgd_deleted_while_the_agent_is_away_is_marked_gone(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    loop, hub = env
    token = hub.register_cluster("east")
    seed = seeded(tmp_path, legacy_dgd("one"), legacy_dgd("two"))
    agent = agents(cluster_id="east", token=token, seed_path=seed)
    wait_until(lambda: len(hub.get("/v1/discovered")["discovered"]) == 2, what="both found")
    agent.stop()
    agent.cluster.delete_dgd("ml", "one")

    again = resume(loop, hub, agent.cluster, token)
    try:
        gone = wait_until(
            lambda: (d := hub.get("/v1/discovered/east.ml.one"))["gone"] and d, what="gone"
        )
        assert gone["gone_time"] is not None and gone["imported_args"] == LEGACY_ARGS
        assert hub.get("/v1/discovered/east.ml.two")["gone"] is False
    finally:
        again.stop()


def test_a_promoted_dgd_that_disappears_is_marked_gone_even_when_managed(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token, seed_path=seeded(tmp_path, legacy_dgd()))
    managed_legacy(hub, agent)
    assert hub.get("/v1/discovered/east.ml.legacy-qwen")["gone"] is False

    agent.cluster.delete_dgd("ml", "legacy-qwen")  # someone else deletes it
    agent.agent.cluster_changed()
    gone = wait_until(
        lambda: (d := hub.get("/v1/discovered/east.ml.legacy-qwen"))["gone"] and d, what="gone"
    )
    assert gone["state"] == "promoted"


def test_promotion_is_refused_while_the_cluster_is_stale(tmp_path: Path) -> None:
    with running_hub(tmp_path, SHORT_GRACE) as (loop, hub):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=16)
        seed = seeded(tmp_path, legacy_dgd())
        agent = start_agent(loop, hub, cluster_id="east", token=token, seed_path=seed)
        discovered(hub)
        hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
        wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
        agent.stop()  # the cluster goes quiet
        wait_until(lambda: hub.get("/v1/clusters/east")["stale"], what="stale")

        review = hub.get("/v1/deployments/legacy-qwen.east/review")
        assert "stale" in review["summary"]
        status, refused = hub.rest(
            "POST",
            "/v1/deployments/legacy-qwen.east/authority",
            {"authority": "managed", "accept_differences": True},
            check=False,
        )
        assert (status, refused["error"]["status"]) == (409, "FAILED_PRECONDITION")
        assert "stale" in refused["error"]["message"]
        assert hub.get("/v1/deployments/legacy-qwen.east")["authority"] == "observed"

        again = resume(loop, hub, agent.cluster, token)
        try:
            wait_until(lambda: not hub.get("/v1/clusters/east")["stale"], what="fresh again")
            promoted = hub.post(
                "/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"}
            )
            assert promoted["authority"] == "managed"
        finally:
            again.stop()
