"""ClusterSync.Sync: one agent stream, from handshake to close (docs/stream.md).

1. Authenticate the cluster token from the metadata (UNAUTHENTICATED otherwise); refuse the
   handshake when the hub is taking too many at once (RESOURCE_EXHAUSTED: retry later).
2. The first message must be a Hello for the token's own cluster (PERMISSION_DENIED for any
   other cluster id, INVALID_ARGUMENT for anything else).
3. Send Welcome, then the desired-state delta since the agent's revision (or a snapshot; or
   nothing when the agent is up to date).
4. Then two loops: the reader validates and handles each agent message (an observation
   batch's fields are checked in a thread of its own, hub/sync/offloop.py, in order); the
   writer sends what is put in the session's outbox: deltas from the pump (hub/sync/pump.py)
   whenever the cluster's desired state changes, problems, fences. A malformed observation
   batch is answered with a Problem and changes nothing; writing another cluster's deployments
   closes the stream with PERMISSION_DENIED. A newer stream in the same slot supersedes this
   one (ABORTED).

A cluster may have several streams (a DaemonSet, one agent per node: docs/daemonset.md).
Each reports its own node only (another node's is PERMISSION_DENIED; the leader may also
report other nodes absent: they left the cluster); cluster-level state (deployments,
discovered workloads, rejects) is accepted only from the leader (hub/sync/leadership.py: a
Lease term claimed, or for read-only node agents a hub grant): from anyone else it is refused
with a Problem and the stream is fenced. An agent of a whole cluster (no node name) leads and
reports every node.

Steps 1 and 2, and the Welcome, are hub/sync/handshake.py; the stream's state, which the
fanout, the pump and leadership hold, is hub/sync/stream.py; this module runs the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from typing import Protocol, TypeVar

import grpc
from opentelemetry import trace

from hub import errors, tracing
from hub.model import AgentSession, ObservationBatch
from hub.service import access as access_service
from hub.service import clusters as cluster_service
from hub.service import ingest as ingest_service
from hub.service import sync as sync_service
from hub.service.context import ServiceContext
from hub.sync import convert
from hub.sync.fanout import Fanout
from hub.sync.handshake import Handshake
from hub.sync.ingest import IngestQueue
from hub.sync.leadership import Leadership
from hub.sync.liveness import LivenessRecorder
from hub.sync.offloop import Validator
from hub.sync.pump import desired_message
from hub.sync.ratelimit import TokenBucket
from hub.sync.stream import READER_DONE, Close, StreamSession
from wingsmith.v1 import sync_pb2, sync_pb2_grpc

log = logging.getLogger(__name__)
T = TypeVar("T")


class SyncMetrics(Protocol):
    def message(self, *, direction: str, kind: str) -> None: ...

    def desired_sent(
        self, *, snapshot: bool, deployments: int, removals: int, size: int
    ) -> None: ...

    def desired_delivered(self, seconds: float) -> None: ...

    def stream_opened(self, cluster_id: str) -> None: ...


# What of an agent's trace context the hub reads (W3C; a longer value is not a trace context).
_TRACE_KEYS = ("traceparent", "tracestate")
_TRACE_VALUE_MAX = 512


def _received(cluster_id: str, batch: sync_pb2.ObservationBatch) -> None:
    """The span of the hub receiving the observation batch that first reports on a traced
    apply: the end of the change's trace (hub/tracing.py)."""
    carrier = {
        key: value
        for key, value in batch.trace_context.items()
        if key in _TRACE_KEYS and len(value) <= _TRACE_VALUE_MAX
    }
    with tracing.tracer().start_as_current_span(
        "receive observations",
        context=tracing.extracted(carrier),
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "wingsmith.cluster": cluster_id,
            "wingsmith.seq": batch.seq,
            "wingsmith.deployments": [d.deployment_id for d in batch.deployments][:100],
        },
    ):
        pass


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
        require_client_identity: bool = False,
        writer: Executor | None = None,
    ) -> None:
        self._ctx = ctx
        # Where the stream's own writes run (session bookkeeping, rejects, certificates): the
        # hub's store-writer thread, never the event loop that serves every stream.
        self._writer = writer
        self._fanout = fanout
        self._ingest = ingest
        self._liveness = liveness
        self._metrics = metrics
        # Observation batches are validated in a thread of their own, off the loop
        # (hub/sync/offloop.py); everything else of a message is decided here, on the loop.
        self._validator = Validator()
        self._handshake = Handshake(
            ctx=ctx,
            handshakes=handshakes,
            count=metrics.message,
            audit=self._audit,
            require_client_identity=require_client_identity,
            writer=writer,
        )
        self.leadership = self._leadership = Leadership(
            persist=lambda cluster_id, term: sync_service.raise_leader_term(
                ctx, cluster_id=cluster_id, term=term
            ),
            next_term=lambda cluster_id: sync_service.next_leader_term(ctx, cluster_id=cluster_id),
            mark=lambda cluster_id, session_id: sync_service.set_leader(
                ctx, cluster_id=cluster_id, session_id=session_id
            ),
            node_ids=lambda cluster_id: [
                n.node_id for n in cluster_service.get(ctx, cluster_id).nodes
            ],
            # Its writes wait for the store's lock in the writer thread, not on the loop.
            run=self._in_writer,
        )

    async def Sync(
        self,
        request_iterator: AsyncIterator[sync_pb2.AgentMessage],
        context: grpc.aio.ServicerContext[sync_pb2.AgentMessage, sync_pb2.HubMessage],
    ) -> AsyncIterator[sync_pb2.HubMessage]:
        cluster_id, token_hash = await self._handshake.authenticate(request_iterator, context)
        hello = await self._handshake.hello(request_iterator, context, cluster_id)
        session = StreamSession(cluster_id, token_hash, hello)
        # Registered before the session is recorded: a rotation or deletion committed from
        # here on closes it, and one committed before is seen by open_session.
        self._fanout.register(cluster_id, session.slot, session)
        reader: asyncio.Task[None] | None = None
        opened = False
        # A whole-cluster agent leads: marked in the transaction that records its session
        # (one trip to the writer thread), unless a leadership decision of the cluster is under
        # way, which may mark another session: then after it, in turn (`_lead`).
        marked = session.whole and not self._leadership.pending(cluster_id)
        try:
            try:
                newest_term = await self._in_writer(
                    functools.partial(
                        sync_service.open_session,
                        self._ctx,
                        cluster_id=cluster_id,
                        session=AgentSession(
                            session_id=session.session_id,
                            instance=session.instance,
                            node_name=session.node_name,
                            leader=marked,
                            agent_version=hello.agent_version,
                            connect_time=time.time(),
                        ),
                        read_only=hello.read_only,
                        token_hash=token_hash,
                        slot=session.slot,
                    )
                )
            except errors.Unauthenticated as e:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.message)
            opened = True
            self._metrics.stream_opened(cluster_id)
            held = sync_service.held_observations(
                self._ctx, cluster_id, node_name=session.node_name
            )
            welcome = self._handshake.welcome(session, newest_term, held)
            yield self._out(sync_pb2.HubMessage(welcome=welcome))
            await self._lead(session, hello.leader_term, read_only=hello.read_only, marked=marked)
            first = sync_service.desired_since(
                self._ctx,
                cluster_id,
                epoch=hello.store_epoch,
                applied_revision=hello.applied_revision,
            )
            session.sent_revision = first.revision if not first.empty else hello.applied_revision
            if session.leading and not first.snapshot and hello.applied_revision > 0:
                # The Hello re-acknowledges what the agent applied: an ack taken just before a
                # crash (liveness is flushed in batches) is not lost, and an agent already up
                # to date, sent nothing after a restart, still converges at once.
                self._liveness.applied(cluster_id, hello.applied_revision)
            # Everything committed so far is in `first`: the pump takes over from here.
            session.ready, session.missed = True, False
            if not first.empty:
                yield self._out(self._desired(first))
            reader = asyncio.create_task(self._read(session, request_iterator))
            reader.add_done_callback(lambda _: session.outbox.put_nowait(READER_DONE))
            async for message in self._outgoing(session):
                yield message
            if session.closing is not None:
                if session.closing.code == grpc.StatusCode.ABORTED:
                    await self._audit(
                        cluster_id, "agent.superseded", "ABORTED", session.closing.message
                    )
                await context.abort(session.closing.code, session.closing.message)
        finally:
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
            self._fanout.unregister(cluster_id, session.slot, session)
            # Not awaited either: the release is written, and the next leader granted, in turn
            # with the cluster's other leadership changes.
            self._leadership.release_soon(cluster_id, session)
            if opened:
                # Not awaited (the stream may be cancelled): the writer runs it after the open.
                asyncio.get_running_loop().run_in_executor(
                    self._writer, self._close_session, session.session_id
                )

    def close(self) -> None:
        """Let the validation thread end (hub stop, after the gRPC server stopped)."""
        self._validator.close()

    def _close_session(self, session_id: str) -> None:
        try:
            sync_service.close_session(self._ctx, session_id=session_id)
        except Exception as e:
            log.warning("could not record the close of session %s: %s", session_id, e)

    async def _in_writer(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, call)

    async def _audit(self, cluster_id: str, action: str, outcome: str, message: str) -> None:
        """Audit a connection event of an identified cluster (never of an unknown token: a
        flood of bad credentials must not fill the database), off the event loop."""
        record = sync_service.agent_event(
            cluster_id, action, now=time.time(), outcome=outcome, message=message
        )
        try:
            await asyncio.to_thread(access_service.record, self._ctx, record)
        except Exception:  # auditing never changes how a handshake ends
            log.exception("audit record of %s lost", action)

    async def _lead(
        self, session: StreamSession, term: int, *, read_only: bool, marked: bool
    ) -> None:
        """A whole-cluster agent leads by being the only one (`marked`: already marked the
        leader when its session was recorded); a node agent by its Lease term, or, read-only
        (no Lease), by the hub's grant."""
        if session.whole:
            session.leading = True
            if not marked:
                await self._leadership.mark_whole(session.cluster_id, session.session_id)
            return
        # `leading` is set by what leadership tells the session (grant, fence), in turn with
        # the cluster's other decisions; not from a result read after the await.
        if term > 0:
            await self._leadership.claim(
                session.cluster_id, session, session_id=session.session_id, term=term
            )
        if read_only:
            await self._leadership.stand(session.cluster_id, session, session_id=session.session_id)

    # -- writer -------------------------------------------------------------------------------

    async def _outgoing(self, session: StreamSession) -> AsyncIterator[sync_pb2.HubMessage]:
        while True:
            item = await session.outbox.get()
            if item is READER_DONE or isinstance(item, Close):
                return  # the agent closed its side, or the hub closes the stream
            assert isinstance(item, sync_pb2.HubMessage)
            desired = item.HasField("desired")
            yield self._out(item)
            if desired and session.desired_waiting:
                # Written: the pump may hand this stream its next delta.
                self._metrics.desired_delivered(time.monotonic() - session.desired_changed_at)
                session.desired_waiting = False
                if session.missed:
                    session.missed = False
                    self._fanout.desired_changed([session.cluster_id])

    def _desired(self, delta: sync_service.DesiredDelta) -> sync_pb2.HubMessage:
        message = desired_message(self._ctx, delta)
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
        self, session: StreamSession, request_iterator: AsyncIterator[sync_pb2.AgentMessage]
    ) -> None:
        try:
            async for message in request_iterator:
                kind = message.WhichOneof("kind") or "empty"
                self._metrics.message(direction="in", kind=kind)
                self._liveness.seen(session.cluster_id)
                try:
                    await self._handle(session, kind, message)
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
        except grpc.aio.AioRpcError:
            return  # the stream broke; the handler's finally cleans up

    async def _handle(
        self, session: StreamSession, kind: str, message: sync_pb2.AgentMessage
    ) -> None:
        if kind == "heartbeat":
            convert.heartbeat(message.heartbeat, self._checker())
            return
        if kind == "leadership":
            await self._leadership_message(session, message.leadership)
            return
        if kind == "observations":
            batch = await self._validator.observations(message.observations, self._checker())
            if batch.seq <= session.last_seq:
                raise errors.InvalidArgument(
                    "observations.seq", f"must increase: {batch.seq} after {session.last_seq}"
                )
            self._authorize_scope(session, batch)
            ingest_service.authorize(
                self._ctx, session.cluster_id, batch, known=session.own_deployments
            )
            session.last_seq = batch.seq
            self._ingest.put(
                ingest_service.Report(session.cluster_id, session.token_hash, batch), session
            )
            if message.observations.trace_context:
                _received(session.cluster_id, message.observations)
            return
        if kind == "cluster_info":
            self._require_leader(session, "cluster info")
            dgd_version = convert.cluster_info(message.cluster_info)
            await self._in_writer(
                functools.partial(
                    sync_service.set_dgd_version,
                    self._ctx,
                    cluster_id=session.cluster_id,
                    dgd_version=dgd_version,
                )
            )
            return
        if kind == "ack":
            revision = message.ack.revision
            if not 0 <= revision <= session.sent_revision:
                raise errors.InvalidArgument(
                    "ack.revision",
                    f"{revision} was never sent (latest sent: {session.sent_revision})",
                )
            if session.leading:
                self._liveness.applied(session.cluster_id, revision)
            return
        if kind == "reject":
            self._require_leader(session, "rejects")
            deployment_id, rejection = convert.reject(message.reject)
            if rejection.revision > session.sent_revision:
                raise errors.InvalidArgument(
                    "reject.revision",
                    f"{rejection.revision} was never sent (latest sent: {session.sent_revision})",
                )
            await self._in_writer(
                functools.partial(
                    sync_service.record_rejection,
                    self._ctx,
                    cluster_id=session.cluster_id,
                    deployment_id=deployment_id,
                    rejection=rejection,
                    token_hash=session.token_hash,
                )
            )
            return
        if kind == "hello":
            raise errors.InvalidArgument("hello", "only the first message may be a Hello")
        raise errors.InvalidArgument(
            "", "empty message: set one of hello, ack, reject, observations, heartbeat"
        )

    def _checker(self) -> convert.Checker:
        return convert.Checker(
            now_ns=time.time_ns(), max_skew_ns=int(self._ctx.settings.max_clock_skew_s * 1e9)
        )

    async def _leadership_message(
        self, session: StreamSession, leadership: sync_pb2.Leadership
    ) -> None:
        if session.whole:
            raise errors.InvalidArgument(
                "leadership", "an agent of a whole cluster leads without a Lease"
            )
        if leadership.term < 0:
            raise errors.InvalidArgument("leadership.term", "must be >= 0")
        if leadership.leading:
            await self._leadership.claim(
                session.cluster_id, session, session_id=session.session_id, term=leadership.term
            )
        else:
            session.leading = False
            await self._leadership.release(session.cluster_id, session)

    def _authorize_scope(self, session: StreamSession, batch: ObservationBatch) -> None:
        """A node agent reports its own node; cluster-level state comes from the leader."""
        if not session.whole:
            # The leader also reports nodes that left the cluster (absent): their own agent
            # never will.
            foreign = sorted(
                n.node_id
                for n in batch.nodes
                if n.node_id != session.node_name and not (n.absent and session.leading)
            )
            if foreign:
                raise errors.PermissionDenied(
                    f"the agent of node {session.node_name} may not report node(s) "
                    + ", ".join(foreign[:5])
                )
        if batch.deployments or batch.discovered:
            self._require_leader(session, "deployment and discovered observations")

    def _require_leader(self, session: StreamSession, what: str) -> None:
        if session.leading:
            return
        term = self._leadership.term(session.cluster_id)
        session.fence(term, f"not the leader of cluster {session.cluster_id}")
        raise errors.FailedPrecondition(
            f"{what} are accepted only from the cluster's leader (term {term})"
        )
