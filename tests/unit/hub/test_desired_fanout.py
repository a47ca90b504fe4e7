"""Desired state to many streams at once: batched deltas, the pump, reads beside a writer.

The batched read (`desired_deltas`) must give exactly what `desired_since` gives each agent,
whatever it holds: up to date, behind by changes and deletions, behind the tombstone floor,
or ahead of the hub. The pump hands each stream one coalesced delta and never queues a
second one behind an unsent first. Reads run on a connection of their own and never wait for a
write transaction of another thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from hub.model import Device, NodeObservation, ObservationBatch, Placement, Serving
from hub.service import authority, clusters, ingest, projects, sync, workloads
from hub.service.context import ServiceContext
from hub.service.ingest import IngestOutcome, Report
from hub.store.port import open_store
from hub.sync.fanout import Fanout
from hub.sync.ingest import IngestQueue
from hub.sync.pump import DesiredPump

H100 = "H100-80GB"
CLUSTERS = ("c0", "c1", "c2")


def _gpus(prefix: str, n: int) -> tuple[Device, ...]:
    return tuple(
        Device(f"GPU-{prefix}-{i}", "H100", 80, f"0:{i}", H100, True, "", True) for i in range(n)
    )


def _serving(*args: str) -> Serving:
    return Serving(engine="vllm", engine_version="0.11.0", model="m", engine_args=args)


def _fleet(store_url: str) -> ServiceContext:
    ctx = ServiceContext(db=open_store(store_url))
    projects.create(ctx, name="p", quotas={H100: 1000})
    now = time.time_ns()
    for cluster_id in CLUSTERS:
        clusters.create(ctx, cluster_id=cluster_id, labels={})
        node = NodeObservation("n1", now, _gpus(cluster_id, 8), ())
        ingest.ingest(ctx, [(cluster_id, ObservationBatch(seq=1, nodes=(node,)))])
    return ctx


def _create(ctx: ServiceContext, name: str, *, replicas: int = 3) -> None:
    workloads.create(
        ctx,
        workloads.WorkloadSpec(
            name=name,
            project="p",
            replicas=replicas,
            device_class=H100,
            serving=_serving(),
            placement=Placement(clusters=CLUSTERS),
        ),
    )


def test_batched_deltas_equal_each_agents_own_delta_whatever_it_holds(store_url: str) -> None:
    ctx = _fleet(store_url)
    held: list[tuple[str, int]] = [(c, 0) for c in CLUSTERS]
    _create(ctx, "a")
    held += [
        (c, sync.desired_since(ctx, c, epoch="", applied_revision=0).revision) for c in CLUSTERS
    ]
    _create(ctx, "b")
    workloads.update(ctx, "a", workloads.WorkloadChange(serving=_serving("--x")))
    held += [
        (c, sync.desired_since(ctx, c, epoch="", applied_revision=0).revision) for c in CLUSTERS
    ]
    workloads.delete(ctx, "b")
    # An observed deployment deleted: a release (the agent forgets its DGD, deletes nothing).
    _create(ctx, "c")
    authority.set_authority(ctx, "c.c0", authority="observed", accept_differences=False)
    workloads.delete(ctx, "c")
    newest = {
        c: sync.desired_since(ctx, c, epoch="", applied_revision=0).revision for c in CLUSTERS
    }
    held += [(c, r) for c, r in newest.items()]  # up to date
    held += [(c, r + 5) for c, r in newest.items()]  # ahead: a snapshot
    held += [("gone", 3)]  # a cluster deleted meanwhile: left out

    batched = sync.desired_deltas(ctx, held)

    assert ("gone", 3) not in batched
    for cluster_id, revision in held[:-1]:
        own = sync.desired_since(ctx, cluster_id, epoch=ctx.db.epoch, applied_revision=revision)
        assert batched[(cluster_id, revision)] == own, (cluster_id, revision)
    assert any(d.removals for d in batched.values()), "the deletion reached the deltas"
    assert any(d.snapshot for d in batched.values())
    assert any(d.releases for d in batched.values() if not d.snapshot)
    assert any(d.releases for d in batched.values() if d.snapshot), "snapshots keep releases"


def test_an_agent_behind_the_tombstone_floor_gets_a_snapshot_from_the_batch(store_url: str) -> None:
    ctx = _fleet(store_url)
    _create(ctx, "a")
    workloads.delete(ctx, "a")
    _create(ctx, "b")
    ctx.clock = lambda: time.time() + 10 * 365 * 24 * 3600.0
    sync.prune_tombstones(ctx)
    (delta,) = sync.desired_deltas(ctx, [("c0", 1)]).values()
    assert delta.snapshot and [d.workload_name for d in delta.upserts] == ["b"]


def test_a_read_never_waits_for_a_write_transaction_of_another_thread(store_url: str) -> None:
    ctx = _fleet(store_url)
    _create(ctx, "a")
    inside, release = threading.Event(), threading.Event()

    def long_writer() -> None:
        with ctx.db.write() as conn:
            conn.execute('UPDATE clusters SET labels = \'{"x": "y"}\'')
            inside.set()
            release.wait(10)

    writer = threading.Thread(target=long_writer)
    writer.start()
    try:
        assert inside.wait(10)
        started = time.monotonic()
        delta = sync.desired_since(ctx, "c0", epoch="", applied_revision=0)
        assert time.monotonic() - started < 1.0
        assert [d.workload_name for d in delta.upserts] == ["a"]
        # The read saw what was committed, not the writer's open transaction.
        assert clusters.get(ctx, "c0").cluster.labels == {}
    finally:
        release.set()
        writer.join()
    assert clusters.get(ctx, "c0").cluster.labels == {"x": "y"}


def test_a_read_connection_cannot_write(store_url: str) -> None:
    db = open_store(store_url)
    with pytest.raises(Exception, match=r"readonly|read-only"), db.read() as conn:
        conn.execute("UPDATE clusters SET labels = '{}'")


@dataclass
class FakeStream:
    """A stream as the pump sees it: records what it was handed."""

    cluster_id: str
    sent_revision: int
    ready: bool = True
    unsent: bool = False
    handed: list[tuple[Any, int]] = field(default_factory=list)

    def accepts_desired(self) -> bool:
        return self.ready and not self.unsent

    def deliver(self, message: Any, *, revision: int, changed_at: float) -> None:
        self.handed.append((message, revision))
        self.sent_revision = revision
        self.unsent = True

    token_hash: str = "h"

    def supersede(self) -> None:
        raise AssertionError("not expected")

    def revoke(self, reason: str) -> None:
        raise AssertionError("not expected")


class Silent:
    """A stream an ingest test never expects to hear from."""

    def refused(self, seq: int, message: str) -> None:
        raise AssertionError(f"refused {seq}: {message}")

    def resync(self, seq: int, reason: str) -> None:
        raise AssertionError(f"resync {seq}: {reason}")


class Counting:
    def __init__(self) -> None:
        self.sent = 0

    def desired_sent(self, *, snapshot: bool, deployments: int, removals: int, size: int) -> None:
        self.sent += 1


def test_the_pump_hands_one_coalesced_delta_and_shares_the_message_of_equal_holders(
    store_url: str,
) -> None:
    ctx = _fleet(store_url)

    async def scenario() -> None:
        fanout = Fanout(asyncio.get_running_loop())
        pump = DesiredPump(ctx=ctx, fanout=fanout, metrics=Counting())
        node_a, node_b = FakeStream("c0", 0), FakeStream("c0", 0)
        fanout.register("c0", "a", node_a)
        fanout.register("c0", "b", node_b)
        _create(ctx, "a")
        _create(ctx, "b")
        assert pump.pump({"c0": 0.0}) == 2
        (message_a, revision), (message_b, _) = node_a.handed[0], node_b.handed[0]
        assert message_a is message_b, "built once for both holders of one revision"
        assert {s.workload_name for s in message_a.desired.upserts} == {"a", "b"}
        # Unsent yet: a new change is not queued behind it.
        workloads.update(ctx, "a", workloads.WorkloadChange(serving=_serving("--x")))
        assert pump.pump({"c0": 0.0}) == 0
        node_a.unsent = False
        assert pump.pump({"c0": 0.0}) == 1
        (newer, newer_revision) = node_a.handed[-1]
        assert newer_revision > revision and not newer.desired.snapshot
        assert [s.workload_name for s in newer.desired.upserts] == ["a"]

    asyncio.run(scenario())


def test_ingest_waits_for_the_pump_to_be_idle_but_not_forever() -> None:
    async def scenario() -> None:
        written: list[float] = []
        gate = asyncio.Event()
        queue = IngestQueue(
            write=lambda group: written.append(time.monotonic()) or IngestOutcome(),
            before_write=gate.wait,
            yield_for_s=0.3,
        )
        task = asyncio.create_task(queue.run())
        queue.put(Report("c0", "h", ObservationBatch(seq=1)), Silent())
        await asyncio.sleep(0.1)
        assert written == [], "held while the pump is busy"
        gate.set()
        await asyncio.wait_for(queue.drained(), 1)
        assert len(written) == 1
        gate.clear()
        started = time.monotonic()
        queue.put(Report("c0", "h", ObservationBatch(seq=2)), Silent())
        await asyncio.wait_for(queue.drained(), 2)
        assert written[-1] - started >= 0.25, "a busy pump delays ingest at most yield_for_s"
        task.cancel()

    asyncio.run(scenario())
