"""ClusterSync.Sync: one agent stream, from handshake to close (docs/stream.md).

1. Authenticate the cluster token from the metadata (UNAUTHENTICATED otherwise); refuse the
   handshake when the hub is taking too many at once (RESOURCE_EXHAUSTED: retry later).
2. The first message must be a Hello for the token's own cluster (PERMISSION_DENIED for any
   other cluster id, INVALID_ARGUMENT for anything else).
3. Send Welcome, then the desired-state delta since the agent's revision (or a snapshot; or
   nothing when the agent is up to date).
4. Then two loops: the reader validates and handles each agent message; the writer sends a new
   delta whenever the fanout wakes the session. A malformed observation batch is answered with
   a Problem and changes nothing; writing another cluster's deployments closes the stream with
   PERMISSION_DENIED. A newer stream of the same cluster supersedes this one (ABORTED).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from hub import errors
from hub.service import clusters as cluster_service
from hub.service import sync as sync_service
from hub.service.context import ServiceContext
from hub.sync import convert
from hub.sync.fanout import Fanout
from hub.sync.ingest import IngestQueue
from hub.sync.liveness import LivenessRecorder
from hub.sync.ratelimit import TokenBucket
from wingsmith.v1 import sync_pb2, sync_pb2_grpc

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 10.0


class SyncMetrics(Protocol):
    def message(self, *, direction: str, kind: str) -> None: ...

    def desired_sent(
        self, *, snapshot: bool, deployments: int, removals: int, size: int
    ) -> None: ...


def bearer_token(metadata: Any) -> str:
    for key, value in metadata or ():
        if key.lower() == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return ""


@dataclass
class _Close:
    code: grpc.StatusCode
    message: str


class _Session:
    """Per-stream state, and the fanout's handle on it."""

    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.session_id = "ss_" + secrets.token_hex(8)
        self.sent_revision = 0
        self.last_seq = 0
        self.outbox: asyncio.Queue[sync_pb2.HubMessage | _Close] = asyncio.Queue()
        self.woken = asyncio.Event()
        self.closing: _Close | None = None

    def wake(self) -> None:
        self.woken.set()

    def supersede(self) -> None:
        self.close(grpc.StatusCode.ABORTED, "superseded by a newer stream of this cluster")

    def close(self, code: grpc.StatusCode, message: str) -> None:
        if self.closing is None:
            self.closing = _Close(code, message)
            self.outbox.put_nowait(self.closing)
            self.woken.set()


class SyncServicer(sync_pb2_grpc.ClusterSyncServicer):
    def __init__(
        self,
        *,
        ctx: ServiceContext,
        fanout: Fanout,
        ingest: IngestQueue,
        liveness: LivenessRecorder,
        handshakes: TokenBucket,
        metrics: SyncMetrics,
    ) -> None:
        self._ctx = ctx
        self._fanout = fanout
        self._ingest = ingest
        self._liveness = liveness
        self._handshakes = handshakes
        self._metrics = metrics

    async def Sync(
        self,
        request_iterator: AsyncIterator[sync_pb2.AgentMessage],
        context: grpc.aio.ServicerContext[sync_pb2.AgentMessage, sync_pb2.HubMessage],
    ) -> AsyncIterator[sync_pb2.HubMessage]:
        cluster_id = await self._authenticate(context)
        hello = await self._hello(request_iterator, context, cluster_id)
        session = _Session(cluster_id)
        self._fanout.register(cluster_id, session)
        reader: asyncio.Task[None] | None = None
        try:
            sync_service.record_hello(
                self._ctx,
                cluster_id=cluster_id,
                session_id=session.session_id,
                agent_version=hello.agent_version,
                read_only=hello.read_only,
            )
            yield self._out(sync_pb2.HubMessage(welcome=self._welcome(session)))
            first = sync_service.desired_since(
                self._ctx,
                cluster_id,
                epoch=hello.store_epoch,
                applied_revision=hello.applied_revision,
            )
            session.sent_revision = first.revision if not first.empty else hello.applied_revision
            if not first.empty:
                yield self._out(self._desired(first))
            reader = asyncio.create_task(self._read(session, request_iterator))
            async for message in self._outgoing(session, reader):
                yield message
            if session.closing is not None:
                await context.abort(session.closing.code, session.closing.message)
        finally:
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
            self._fanout.unregister(cluster_id, session)
            with contextlib.suppress(errors.WingsmithError):
                sync_service.record_disconnect(
                    self._ctx, cluster_id=cluster_id, session_id=session.session_id
                )

    # -- handshake ----------------------------------------------------------------------------

    async def _authenticate(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        token = bearer_token(context.invocation_metadata())
        if not token:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "missing 'authorization: Bearer <cluster token>'"
            )
        try:
            cluster_id = cluster_service.authenticate(self._ctx, token)
        except errors.Unauthenticated as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.message)
        if not self._handshakes.try_take():
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED, "too many stream handshakes; retry with backoff"
            )
        return cluster_id

    async def _hello(
        self,
        request_iterator: AsyncIterator[sync_pb2.AgentMessage],
        context: grpc.aio.ServicerContext[Any, Any],
        cluster_id: str,
    ) -> sync_pb2.Hello:
        try:
            first = await asyncio.wait_for(anext(request_iterator), HELLO_TIMEOUT_S)
        except (StopAsyncIteration, TimeoutError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected a Hello first")
        self._metrics.message(direction="in", kind=first.WhichOneof("kind") or "empty")
        if first.WhichOneof("kind") != "hello":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a Hello"
            )
        try:
            hello = convert.hello(first.hello)
        except errors.InvalidArgument as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
        if hello.cluster_id != cluster_id:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"this token belongs to cluster {cluster_id}, not {hello.cluster_id}",
            )
        return hello

    def _welcome(self, session: _Session) -> sync_pb2.Welcome:
        return sync_pb2.Welcome(
            session_id=session.session_id,
            store_epoch=self._ctx.db.epoch,
            heartbeat_interval_ms=int(self._ctx.settings.heartbeat_interval_s * 1000),
        )

    # -- writer -------------------------------------------------------------------------------

    async def _outgoing(
        self, session: _Session, reader: asyncio.Task[None]
    ) -> AsyncIterator[sync_pb2.HubMessage]:
        while True:
            if not session.outbox.empty():
                item = session.outbox.get_nowait()
                if isinstance(item, _Close):
                    return
                yield self._out(item)
                continue
            if reader.done():
                return  # the agent closed its side
            if session.woken.is_set():
                session.woken.clear()
                delta = sync_service.desired_since(
                    self._ctx,
                    session.cluster_id,
                    epoch=self._ctx.db.epoch,
                    applied_revision=session.sent_revision,
                )
                if not delta.empty:
                    session.sent_revision = delta.revision
                    yield self._out(self._desired(delta))
                continue
            waiter = asyncio.create_task(session.woken.wait())
            done, _ = await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                waiter.cancel()

    def _desired(self, delta: sync_service.DesiredDelta) -> sync_pb2.HubMessage:
        message = sync_pb2.HubMessage(
            desired=sync_pb2.DesiredState(
                revision=delta.revision,
                snapshot=delta.snapshot,
                from_revision=delta.from_revision,
                store_epoch=self._ctx.db.epoch,
                upserts=[convert.deployment_spec(d) for d in delta.upserts],
                removals=list(delta.removals),
            )
        )
        self._metrics.desired_sent(
            snapshot=delta.snapshot,
            deployments=len(delta.upserts),
            removals=len(delta.removals),
            size=message.ByteSize(),
        )
        return message

    def _out(self, message: sync_pb2.HubMessage) -> sync_pb2.HubMessage:
        self._metrics.message(direction="out", kind=message.WhichOneof("kind") or "empty")
        return message

    # -- reader -------------------------------------------------------------------------------

    async def _read(
        self, session: _Session, request_iterator: AsyncIterator[sync_pb2.AgentMessage]
    ) -> None:
        try:
            async for message in request_iterator:
                kind = message.WhichOneof("kind") or "empty"
                self._metrics.message(direction="in", kind=kind)
                self._liveness.seen(session.cluster_id)
                try:
                    self._handle(session, kind, message)
                except errors.PermissionDenied as e:
                    session.close(grpc.StatusCode.PERMISSION_DENIED, e.message)
                    return
                except errors.WingsmithError as e:
                    session.outbox.put_nowait(
                        sync_pb2.HubMessage(
                            problem=sync_pb2.Problem(
                                seq=message.observations.seq if kind == "observations" else 0,
                                code=e.grpc_code.name,
                                message=e.message,
                            )
                        )
                    )
                    session.woken.set()
        except grpc.aio.AioRpcError:
            return  # the stream broke; the handler's finally cleans up

    def _handle(self, session: _Session, kind: str, message: sync_pb2.AgentMessage) -> None:
        if kind == "heartbeat":
            return
        if kind == "observations":
            check = convert.Checker(
                now_ns=time.time_ns(),
                max_skew_ns=int(self._ctx.settings.max_clock_skew_s * 1e9),
            )
            batch = convert.observations(message.observations, check)
            if batch.seq <= session.last_seq:
                raise errors.InvalidArgument(
                    "observations.seq", f"must increase: {batch.seq} after {session.last_seq}"
                )
            sync_service.authorize(self._ctx, session.cluster_id, batch)
            session.last_seq = batch.seq
            self._ingest.put(session.cluster_id, batch)
            return
        if kind == "ack":
            revision = message.ack.revision
            if not 0 <= revision <= session.sent_revision:
                raise errors.InvalidArgument(
                    "ack.revision",
                    f"{revision} was never sent (latest sent: {session.sent_revision})",
                )
            self._liveness.applied(session.cluster_id, revision)
            return
        if kind == "reject":
            deployment_id, rejection = convert.reject(message.reject)
            sync_service.record_rejection(
                self._ctx,
                cluster_id=session.cluster_id,
                deployment_id=deployment_id,
                rejection=rejection,
            )
            return
        if kind == "hello":
            raise errors.InvalidArgument("hello", "only the first message may be a Hello")
        raise errors.InvalidArgument(
            "", "empty message: set one of hello, ack, reject, observations, heartbeat"
        )
