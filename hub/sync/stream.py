"""One agent stream's state on the hub, and the handle the fanout, the pump and leadership
hold on it (hub/sync/fanout.py `Listener`, hub/sync/leadership.py): what it was sent, its
outbox, whether it leads. hub/sync/session.py serves the stream around it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from hub.sync.fanout import WHOLE_CLUSTER
from wingsmith.v1 import sync_pb2


@dataclass
class Close:
    code: grpc.StatusCode
    message: str


# Put in the outbox when the reader ends (the agent closed its side, or the stream broke).
READER_DONE = object()


class StreamSession:
    """Per-stream state, and the fanout's and leadership's handle on it."""

    def __init__(self, cluster_id: str, token_hash: str, hello: sync_pb2.Hello) -> None:
        self.cluster_id = cluster_id
        # The stream's identity is the token it was opened with, not only the cluster id: a
        # rotated token or a deleted (and perhaps re-registered) cluster closes it.
        self.token_hash = token_hash
        self.session_id = "ss_" + secrets.token_hex(8)
        self.instance = hello.agent_instance or self.session_id
        self.node_name = hello.node_name
        self.whole = not hello.node_name
        self.leading = False
        # Deployment ids already seen to be this cluster's (hub/service/ingest.py authorize).
        self.own_deployments: set[str] = set()
        self.sent_revision = 0
        self.last_seq = 0
        self.outbox: asyncio.Queue[sync_pb2.HubMessage | Close | object] = asyncio.Queue()
        self.closing: Close | None = None
        # The first desired message was computed (the pump may hand over deltas from then).
        self.ready = False
        # A desired message sits in the outbox; the pump passes this stream by meanwhile and
        # `missed` makes it ask again once that message is written (one coalesced delta for
        # a slow agent, not a queue of them).
        self.desired_waiting = False
        self.desired_changed_at = 0.0
        self.missed = False

    def accepts_desired(self) -> bool:
        if not self.ready or self.closing is not None or self.desired_waiting:
            self.missed = True
            return False
        return True

    def deliver(self, message: sync_pb2.HubMessage, *, revision: int, changed_at: float) -> None:
        self.sent_revision = revision
        self.desired_waiting = True
        self.desired_changed_at = changed_at
        self.outbox.put_nowait(message)

    @property
    def slot(self) -> str:
        return WHOLE_CLUSTER if self.whole else self.instance

    def supersede(self) -> None:
        self.close(grpc.StatusCode.ABORTED, "superseded by a newer stream of this cluster")

    def revoke(self, reason: str) -> None:
        self.close(grpc.StatusCode.UNAUTHENTICATED, f"{reason}: this stream's token is revoked")

    def refused(self, seq: int, message: str) -> None:
        """An observation batch held records the store refused (hub/service/ingest.py)."""
        problem = sync_pb2.Problem(
            seq=seq, code=grpc.StatusCode.INVALID_ARGUMENT.name, message=message
        )
        self.outbox.put_nowait(sync_pb2.HubMessage(problem=problem))

    def resync(self, seq: int, reason: str) -> None:
        """The hub could not store a batch for a reason of its own: ask for everything."""
        resync = sync_pb2.ResyncRequest(seq=seq, reason=reason)
        self.outbox.put_nowait(sync_pb2.HubMessage(resync=resync))

    def fence(self, term: int, reason: str) -> None:
        self.leading = False
        self.outbox.put_nowait(sync_pb2.HubMessage(fence=sync_pb2.Fence(term=term, reason=reason)))

    def grant(self, term: int, node_ids: Sequence[str]) -> None:
        self.leading = True
        grant = sync_pb2.LeadershipGrant(term=term, node_ids=node_ids)
        self.outbox.put_nowait(sync_pb2.HubMessage(grant=grant))

    def close(self, code: grpc.StatusCode, message: str) -> None:
        if self.closing is None:
            self.closing = Close(code, message)
            self.outbox.put_nowait(self.closing)
