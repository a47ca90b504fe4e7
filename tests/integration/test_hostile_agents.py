"""One agent cannot hurt another (issue 13 item 2).

A healthy agent runs beside a hostile one on real streams; every round the healthy cluster
changes while the hostile stream floods poisoned batches (a device memory of 2^64-1, which
once passed validation, failed the database write and took every other cluster's batches of
the same write down with it). The healthy agent's losses are counted: an item it sent that the
hub does not hold with the time it was sent with. Zero, every round; every poisoned batch is
refused to its own stream, naming the field. A batch the hub could not store for a reason of
its own (its database locked by another process) is asked for again, so it is not lost.
"""

from __future__ import annotations

import concurrent.futures
import sqlite3
import threading
from collections.abc import Callable

from hub.model import Device, NodeObservation, ObservationBatch
from hub.service import clusters as cluster_service
from hub.service import ingest as ingest_service
from hub.service import sync as sync_service
from tests import stores
from tests.harness import Hub, SimAgent, wait_until, workload
from tests.integration.rawstream import RawStream, now_ns
from wingsmith.v1 import resources_pb2, sync_pb2

POISON = 2**64 - 1


def _poisoned(seq: int) -> sync_pb2.ObservationBatch:
    healthy = resources_pb2.Device(
        uuid="GPU-e0000000-0000-4000-8000-000000000000",
        name="H100",
        memory_bytes=80 << 30,
        device_class="H100-80GB",
        healthy=True,
        verified=True,
    )
    poisoned = resources_pb2.Device(
        uuid="GPU-e0000000-0000-4000-8000-000000000001",
        name="H100",
        memory_bytes=POISON,
        device_class="H100-80GB",
        healthy=True,
        verified=True,
    )
    node = sync_pb2.NodeObservation(
        node_id="evil-node", observe_unix_nanos=now_ns(), devices=[healthy, poisoned]
    )
    return sync_pb2.ObservationBatch(seq=seq, nodes=[node])


def _next_problem(stream: RawStream, timeout_s: float = 20.0) -> sync_pb2.HubMessage:
    """The stream's next Problem, failing (not hanging) if none comes."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(stream.receive_kind, "problem")
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            stream.close()  # ends the blocked read
            raise AssertionError(f"no Problem within {timeout_s}s") from None


def _losses(hub: Hub, agent: SimAgent, cluster_id: str) -> list[str]:
    """Items the agent sent whose latest report the hub does not hold."""
    assert hub.server is not None and hub.server.ctx is not None
    deployments, nodes = sync_service.held_observations(hub.server.ctx, cluster_id, node_name="")
    held = {("deployment", k): v for k, v in deployments.items()}
    held |= {("node", k): v for k, v in nodes.items()}
    return [
        f"{kind} {key}: sent {at}, hub holds {held.get((kind, key))}"
        for (kind, key), at in agent.agent.observer.sent_times().items()
        if held.get((kind, key)) != at
    ]


def test_a_poisoned_agent_beside_a_healthy_one_costs_it_nothing(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    healthy_token = hub.register_cluster("east")
    evil_token = hub.register_cluster("evil")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", tp=1, clusters=("east",)))
    healthy = agents(cluster_id="east", token=healthy_token)
    evil = RawStream(hub.grpc_target, evil_token)
    try:
        evil.hello("evil")
        evil.receive_kind("welcome")
        seq = 0
        rounds, lossy_rounds = 15, []
        for round_ in range(rounds):
            replicas = 1 + round_ % 3
            hub.patch("/v1/workloads/llama", {"replicas": replicas})
            # The flood lands while the healthy agent reports the change: same ingest groups.
            for _ in range(4):
                seq += 1
                evil.send(observations=_poisoned(seq))
            for _ in range(4):
                problem = _next_problem(evil).problem
                assert problem.code == "INVALID_ARGUMENT"
                assert "observations.nodes[0].devices[1].memory_bytes" in problem.message
            wait_until(
                lambda r=replicas: (
                    (hub.get("/v1/deployments/llama.east")["status"] or {}).get("desired_replicas")
                    == r
                ),
                what=f"round {round_}: the healthy cluster's report",
            )
            assert hub.server is not None and hub.server.ingest is not None
            hub.loop.run(hub.server.ingest.drained())
            try:
                wait_until(lambda: not _losses(hub, healthy, "east"), timeout=30, what="no loss")
            except AssertionError:
                lossy_rounds.append((round_, _losses(hub, healthy, "east")))
        assert lossy_rounds == [], f"the healthy agent lost reports: {lossy_rounds}"
        assert hub.get("/v1/clusters/evil")["nodes"] == [], "nothing of the poison was written"
        assert [n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]]
    finally:
        evil.close()


def test_a_record_the_store_refuses_costs_no_other_batch_or_record(hub: Hub) -> None:
    """Behind validation, the write itself falls back: the group batch by batch, a failing
    batch record by record. Here the poison is handed to the service directly, as a value that
    passed every check would be."""
    tokens = {c: hub.register_cluster(c) for c in ("east", "west")}
    assert hub.server is not None and hub.server.ctx is not None
    ctx = hub.server.ctx

    def gpu(uuid: str, memory: int) -> Device:
        return Device(uuid, "H100", memory, "", "H100-80GB", True, "", True, "", "")

    def report(cluster_id: str, *nodes: NodeObservation) -> ingest_service.Report:
        token_hash = cluster_service.token_hash(tokens[cluster_id])
        return ingest_service.Report(cluster_id, token_hash, ObservationBatch(1, nodes=nodes))

    def node(node_id: str, *devices: Device) -> NodeObservation:
        return NodeObservation(node_id, now_ns(), devices, allocations=())

    outcome = ingest_service.ingest_reports(
        ctx,
        [
            report("west", node("w1", gpu("GPU-a1000000-0000-4000-8000-000000000001", 80 << 30))),
            report(
                "east",
                node("e1", gpu("GPU-b1000000-0000-4000-8000-000000000001", 80 << 30)),
                node("e2", gpu("GPU-b1000000-0000-4000-8000-000000000002", POISON)),
            ),
        ],
    )
    assert list(outcome.refused) == [1] and outcome.unwritten == {}
    assert "observations.nodes[1]" in outcome.refused[1]
    assert [n["node_id"] for n in hub.get("/v1/clusters/west")["nodes"]] == ["w1"]
    assert [n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]] == ["e1"]


@stores.sqlite_mechanics
def test_a_batch_the_hub_could_not_store_is_asked_for_again(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    agent = agents(cluster_id="east", token=token, spec="nodes=1,gpus=2,class=H100-80GB")
    wait_until(lambda: hub.get("/v1/clusters/east")["nodes"], what="reported")
    uuid = agent.cluster.node_gpus(agent.cluster.list_nodes()[0].name)[0].uuid

    # Another process holds the database's write lock past the hub's busy timeout: the
    # agent's report of the change cannot be stored, for a reason of the hub's own.
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        conn = sqlite3.connect(hub.db_path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(30)
        conn.execute("ROLLBACK")
        conn.close()

    holder = threading.Thread(target=hold_lock, daemon=True)
    holder.start()
    try:
        assert locked.wait(10)
        agent.cluster.set_device_health(uuid, healthy=False, reason="XID 79")
        stats = agent.agent.client.stats
        wait_until(lambda: stats.resyncs >= 1, timeout=30, what="a resync request")
    finally:
        release.set()
        holder.join(10)

    def device_unhealthy() -> bool:
        (node,) = hub.get("/v1/clusters/east")["nodes"]
        return any(d["uuid"] == uuid and not d["healthy"] for d in node["devices"])

    wait_until(device_unhealthy, what="the change, resent and stored")
