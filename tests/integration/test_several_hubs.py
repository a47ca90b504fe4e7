"""Several hubs on one PostgreSQL database (docs/architecture.md "Several hubs").

Real hubs (gRPC and REST on their own ports), real agents on simulated clusters, one throwaway
PostgreSQL server (tools/pgserver.py). Each test shows one promise:
- a change committed on one hub reaches an agent whose stream is on another (LISTEN/NOTIFY);
- one live stream per cluster fleet-wide: a newer stream on another hub supersedes the old one;
- a hub that stops takes its streams' rows with it; a hub that dies is swept by the others;
- concurrent creates spread over the hubs never admit past a quota;
- a workload fails over once, though every hub runs the failover pass.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.service import sync as sync_service
from hub.service.context import ServiceContext, Settings
from hub.store.port import open_store
from tests import stores
from tests.harness import FAST, SHORT_GRACE, Hub, LoopThread, start_agent, wait_until, workload

H100 = "H100-80GB"


@contextlib.contextmanager
def hubs_on_one_database(
    tmp_path: Path, count: int, settings: Settings = FAST
) -> Iterator[tuple[LoopThread, list[Hub], str]]:
    url = stores.store_url(tmp_path, "postgres")
    loop = LoopThread()
    hubs: list[Hub] = []
    try:
        for _ in range(count):
            hubs.append(Hub(loop=loop, db_path=url, settings=settings).start())
        yield loop, hubs, url
    finally:
        for hub in hubs:
            hub.stop()
        loop.close()


def ready(deployment: dict[str, Any]) -> int:
    return int((deployment["status"] or {}).get("ready_replicas", 0))


@pytest.mark.slow
def test_a_change_committed_on_one_hub_reaches_an_agent_streaming_to_another(
    tmp_path: Path,
) -> None:
    with hubs_on_one_database(tmp_path, 2) as (loop, (a, b), _):
        token = b.register_cluster("east")
        b.create_project("search", H100_80GB=16)
        agent = start_agent(loop, a, cluster_id="east", token=token)
        try:
            wait_until(lambda: agent.agent.client.connected.is_set(), what="agent on hub A")
            started = time.monotonic()
            b.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
            wait_until(
                lambda: agent.cluster.list_dgds(),
                timeout=5,
                what="the deployment created on hub B applied by the agent on hub A",
            )
            reached_s = time.monotonic() - started
            assert reached_s < 5.0, reached_s
            # Its reports, ingested by hub A, are what hub B answers from.
            wait_until(lambda: ready(b.get("/v1/deployments/chat.east")) == 2, what="ready on B")
            b.patch("/v1/workloads/chat?update_mask=replicas", {"replicas": 1})
            wait_until(lambda: ready(a.get("/v1/deployments/chat.east")) == 1, what="scaled")
        finally:
            agent.stop()


@pytest.mark.slow
def test_a_newer_stream_on_another_hub_supersedes_the_older_one(tmp_path: Path) -> None:
    with hubs_on_one_database(tmp_path, 2) as (loop, (a, b), _):
        token = a.register_cluster("east")
        first = start_agent(loop, a, cluster_id="east", token=token)
        second = None
        try:
            wait_until(lambda: first.agent.client.connected.is_set(), what="first on hub A")
            second = start_agent(loop, b, cluster_id="east", token=token)
            wait_until(
                lambda: first.agent.client.stats.superseded >= 1,
                what="hub A closing its stream once hub B accepted a newer one",
            )
            cluster = b.get("/v1/clusters/east")
            assert len(cluster["agents"]) <= 1, "one stream holds the cluster fleet-wide"
        finally:
            first.stop()
            if second is not None:
                second.stop()


def test_a_stopped_hub_takes_its_streams_rows_and_a_dead_one_is_swept(tmp_path: Path) -> None:
    settings = Settings(
        stale_after_s=3.0, heartbeat_interval_s=0.2, hub_heartbeat_s=0.2, hub_dead_after_s=3.0
    )
    with hubs_on_one_database(tmp_path, 2, settings) as (loop, (a, b), url):
        token = a.register_cluster("east")
        agent = start_agent(loop, a, cluster_id="east", token=token)
        try:
            wait_until(lambda: len(b.get("/v1/clusters/east")["agents"]) == 1, what="a stream")
        finally:
            agent.stop()
        wait_until(lambda: b.get("/v1/clusters/east")["agents"] == [], what="closed stream gone")

        # A hub that died (no clean stop): its row and its stream rows stay behind; the live
        # hubs sweep them once its heartbeat is older than hub_dead_after_s.
        ghost = ServiceContext(db=open_store(url), settings=settings, hub_id="hub_ghost")
        try:
            sync_service.start_hub(ghost)
            with ghost.db.write() as tx:
                tx.execute(
                    "INSERT INTO agent_sessions (session_id, cluster_id, instance, node_name,"
                    " leader, agent_version, connect_time, hub_id, slot)"
                    " VALUES ('ss_ghost', 'east', 'ghost', '', 0, 'x', ?, 'hub_ghost', '')",
                    (time.time(),),
                )
            assert len(a.get("/v1/clusters/east")["agents"]) == 1
            wait_until(
                lambda: a.get("/v1/clusters/east")["agents"] == [],
                what="the dead hub's stream swept",
            )
        finally:
            ghost.db.close()


@pytest.mark.slow
def test_concurrent_creates_spread_over_hubs_never_admit_past_the_quota(tmp_path: Path) -> None:
    with hubs_on_one_database(tmp_path, 3) as (loop, hubs, _):
        hubs[0].create_project("search", H100_80GB=16)
        agents = []
        for i in range(4):
            token = hubs[0].register_cluster(f"c{i}")
            agents.append(start_agent(loop, hubs[i % 3], cluster_id=f"c{i}", token=token))
        try:
            wait_until(
                lambda: all(
                    hubs[0].get(f"/v1/clusters/c{i}")["devices"].get(H100, {}).get("total") == 16
                    for i in range(4)
                ),
                what="every cluster's devices",
            )
            failures: list[BaseException] = []
            barrier = threading.Barrier(6)

            def creator(index: int) -> None:
                hub = hubs[index % 3]
                try:
                    barrier.wait()
                    for j in range(3):
                        cluster = f"c{(index + j) % 4}"
                        hub.post(
                            "/v1/workloads",
                            workload(f"w{index}-{j}", replicas=1, clusters=(cluster,)),
                        )
                except BaseException as e:  # re-raised below
                    failures.append(e)

            threads = [threading.Thread(target=creator, args=(i,)) for i in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert failures == []
            project = hubs[1].get("/v1/projects/search")
            usage = project["usage"][H100]
            assert usage["used"] + usage["reserved"] <= 16, usage
            admitted = sum(
                d["admitted_replicas"]
                for hub_index in range(1)
                for d in hubs[hub_index].get("/v1/deployments?page_size=100")["deployments"]
            )
            assert admitted * 4 == 16, "exactly the quota (4 devices a replica), never more"
        finally:
            for agent in agents:
                agent.stop()


@pytest.mark.slow
def test_two_hubs_fail_a_workload_over_once(tmp_path: Path) -> None:
    """Every hub runs the failover pass each second; each decides again inside its write
    transaction, so the second to commit sees the first's stand-ins and adds none."""
    settings = SHORT_GRACE
    spec = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
    with hubs_on_one_database(tmp_path, 2, settings) as (loop, (a, b), _):
        a.create_project("search", H100_80GB=32)
        tokens = {c: a.register_cluster(c) for c in ("east", "west")}
        agents = {
            "east": start_agent(loop, a, cluster_id="east", token=tokens["east"], spec=spec),
            "west": start_agent(loop, b, cluster_id="west", token=tokens["west"], spec=spec),
        }
        try:
            for c in tokens:
                wait_until(lambda c=c: b.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
            body = workload("llama", replicas=2, clusters=("east", "west"))
            body["placement"]["failover"] = {"toleration_seconds": 1, "stabilization_seconds": 60}
            b.post("/v1/workloads", body)
            wait_until(
                lambda: all(ready(a.get(f"/v1/deployments/llama.{c}")) == 1 for c in tokens),
                what="one replica ready on each cluster",
            )

            agents["east"].stop()  # east goes quiet; both hubs see it stale
            wait_until(lambda: a.get("/v1/workloads/llama").get("failovers"), what="failover")
            wait_until(lambda: ready(b.get("/v1/deployments/llama.west")) == 2, what="stand-in")
            time.sleep(3.0)  # three failover passes of each hub (one a second): none adds more
            for hub in (a, b):
                found = hub.get("/v1/workloads/llama")
                shares = {d["cluster_id"]: d["desired_replicas"] for d in found["deployments"]}
                assert shares == {"east": 1, "west": 2}, shares
                (event,) = found["failovers"]
                assert (event["cluster_id"], event["stand_ins"]) == ("east", {"west": 1})
        finally:
            for agent in agents.values():
                agent.stop()
