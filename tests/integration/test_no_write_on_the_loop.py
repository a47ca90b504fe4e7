"""No write on the event loop (docs/stream.md): while another writer holds the store's write
lock, a leadership claim waits for it in the hub's writer thread, and the hub's other streams
keep being answered; once the lock is let go, the claim completes, and a newer claim made
meanwhile (in a Hello) is decided after it, fencing it.

The lock is held from outside the hub, as another hub or a backup would hold it: on SQLite a
connection in BEGIN IMMEDIATE (the one write lock), on PostgreSQL a transaction holding cluster
east's lock (docs/architecture.md "Write locks"), which the claim's write for east needs: with
scoped locks, nothing of another cluster waits for it, so it is the lock that makes this
claim, and the other writes of east, wait."""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest

from hub.store import port as store_port
from hub.store.postgres import hold_statement
from tests import stores
from tests.harness import Hub, running_hub, wait_until
from tests.integration.rawstream import RawStream
from wingsmith.v1 import sync_pb2

# Generous: a loaded 2-core machine. SQLite's busy timeout (5 s) bounds how long the hub's
# writer waits there; the lock is let go as soon as the other streams were answered.
ANSWER_S = 30.0


@contextlib.contextmanager
def write_lock_held(url: str, cluster_id: str) -> Iterator[None]:
    """The lock a write of `cluster_id` needs, held by another connection until the block
    ends (SQLite: the one write lock)."""
    if store_port.is_postgres(url):
        with psycopg.connect(url) as conn:
            conn.execute(*hold_statement(store_port.cluster_lock(cluster_id)))
            try:
                yield
            finally:
                conn.rollback()
        return
    conn = sqlite3.connect(store_port.sqlite_path(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


class Inbox:
    """What the hub sends one raw stream, read in a thread of its own: a test can ask whether
    anything came, without blocking on a stream that is (rightly) silent."""

    def __init__(self, stream: RawStream) -> None:
        self.stream = stream
        self._queue: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                self._queue.put(self.stream.receive())
        except (grpc.RpcError, StopIteration, ValueError) as e:
            self._queue.put(e)

    def next(self, kind: str) -> sync_pb2.HubMessage:
        """The next message of `kind` (the ones before it of other kinds are passed over)."""
        while True:
            try:
                item = self._queue.get(timeout=ANSWER_S)
            except queue.Empty:
                raise AssertionError(f"no {kind} message in {ANSWER_S:g} s") from None
            assert isinstance(item, sync_pb2.HubMessage), f"the stream ended: {item!r}"
            if item.WhichOneof("kind") == kind:
                return item

    def refused_ack(self) -> str:
        """Send an ack of a revision never sent and return the Problem that answers it (so
        everything the hub sent before it has come, too)."""
        self.stream.send(ack=sync_pb2.Ack(revision=10**6))
        return self.next("problem").problem.message

    def kinds_so_far(self) -> list[str]:
        kinds = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            kinds.append(
                item.WhichOneof("kind") if isinstance(item, sync_pb2.HubMessage) else "end"
            )
        return kinds


def node_stream(hub: Hub, token: str, cluster_id: str, node: str, **hello: Any) -> Inbox:
    stream = RawStream(hub.grpc_target, token)
    stream.hello(cluster_id, node_name=node, agent_instance=f"pod-{node}", **hello)
    return Inbox(stream)


def messages_in(hub: Hub, kind: str) -> float:
    assert hub.server is not None
    value = hub.server.metrics.registry.get_sample_value(
        "wingsmith_stream_messages_total", {"direction": "in", "type": kind}
    )
    return value or 0.0


@pytest.mark.parametrize("backend", stores.BACKENDS)
def test_streams_are_answered_while_a_leadership_claim_waits_for_the_store(
    tmp_path: Any, backend: str
) -> None:
    with running_hub(tmp_path, backend=backend) as (_, hub):
        east, west = hub.register_cluster("east"), hub.register_cluster("west")
        claimer = node_stream(hub, east, "east", "n1")
        follower = node_stream(hub, east, "east", "n2")
        other = node_stream(hub, west, "west", "w1")
        for inbox in (claimer, follower, other):
            inbox.next("welcome")
            inbox.refused_ack()  # what the handshake sent has come (a snapshot, say)
        before = messages_in(hub, "leadership")

        with write_lock_held(hub.db_path, "east"):
            claimer.stream.send(leadership=sync_pb2.Leadership(leading=True, term=3))
            # The hub took the claim in (and, on the old code, its loop then sat in the write).
            wait_until(lambda: messages_in(hub, "leadership") > before, what="the claim read")
            # A Hello claiming a newer term, made while the lock is held: its handshake
            # writes too, so it is answered once the lock is let go, after the first claim.
            newer = node_stream(hub, east, "east", "n3", leader_term=4)

            # Other streams, of this cluster and another, are answered meanwhile.
            assert "never sent" in follower.refused_ack()
            follower.stream.send(cluster_info=sync_pb2.ClusterInfo(dgd_version="v1beta1"))
            assert follower.next("fence").fence.term == 0, "no leader yet: the claim waits"
            assert "never sent" in other.refused_ack()
            # So are reads, and the hub's own health.
            assert hub.get("/v1/clusters/east")["leader_term"] == 0
            assert hub.get("/healthz") == {"status": "serving"}

            assert claimer.kinds_so_far() == [], "the claim is not decided while it waits"

        grant = claimer.next("grant").grant
        assert grant.term == 3
        newer.next("welcome")
        assert newer.next("grant").grant.term == 4
        assert claimer.next("fence").fence.term == 4, "the newer claim fences the first"
        wait_until(lambda: hub.get("/v1/clusters/east")["leader_term"] == 4, what="term 4")
        leaders = wait_until(
            lambda: (
                [a["instance"] for a in hub.get("/v1/clusters/east")["agents"] if a["leader"]]
                == ["pod-n3"]
            ),
            what="pod-n3 marked the leader",
        )
        assert leaders
        for inbox in (claimer, follower, other, newer):
            inbox.stream.close()
