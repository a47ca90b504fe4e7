"""ClusterSync.Sync: one agent stream, from handshake to close (docs/stream.md).

1. Authenticate the cluster token from the metadata (UNAUTHENTICATED otherwise); refuse the
   handshake when the hub is taking too many at once (RESOURCE_EXHAUSTED: retry later).
2. The first message must be a Hello for the token's own cluster (PERMISSION_DENIED for any
   other cluster id, INVALID_ARGUMENT for anything else).
3. Send Welcome, then the desired-state delta since the agent's revision (or a snapshot; or
   nothing when the agent is up to date).
4. Then two loops: the reader validates and handles each agent message; the writer sends what
   is put in the session's outbox: deltas from the pump (hub/sync/pump.py) whenever the
   cluster's desired state changes, problems, fences. A malformed observation batch is answered with
   a Problem and changes nothing; writing another cluster's deployments closes the stream with
   PERMISSION_DENIED. A newer stream in the same slot supersedes this one (ABORTED).

A cluster may have several streams (a DaemonSet, one agent per node: docs/daemonset.md).
Each reports its own node only (another node's is PERMISSION_DENIED; the leader may also
report other nodes absent: they left the cluster); cluster-level state (deployments,
discovered workloads, rejects) is accepted only from the leader (hub/sync/leadership.py: a
Lease term claimed, or for read-only node agents a hub grant): from anyone else it is refused
with a Problem and the stream is fenced. An agent of a whole cluster (no node name) leads and
reports every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypeVar

import grpc
from opentelemetry import trace

from hub import errors, tracing
from hub.model import AgentSession, ObservationBatch
from hub.service import access as access_service
from hub.service import clusters as cluster_service
from hub.service import sync as sync_service
from hub.service.context import ServiceContext
from hub.sync import convert
from hub.sync.fanout import WHOLE_CLUSTER, Fanout
from hub.sync.ingest import IngestQueue
from hub.sync.leadership import Leadership
from hub.sync.liveness import LivenessRecorder
from hub.sync.pump import desired_message
from hub.sync.ratelimit import TokenBucket
from hub.tls import peer_certificate_fingerprint, peer_cluster_id
from wingsmith.v1 import sync_pb2, sync_pb2_grpc

log = logging.getLogger(__name__)
T = TypeVar("T")

HELLO_TIMEOUT_S = 10.0
# Trailing metadata of a refused handshake: milliseconds until the agent's slot.
RETRY_AFTER_KEY = "wingsmith-retry-after-ms"


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


# Put in the outbox when the reader ends (the agent closed its side, or the stream broke).
_READER_DONE = object()


class _Session:
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
        # Deployment ids already seen to be this cluster's (hub/service/sync.py authorize).
        self.own_deployments: set[str] = set()
        self.sent_revision = 0
        self.last_seq = 0
        self.outbox: asyncio.Queue[sync_pb2.HubMessage | _Close | object] = asyncio.Queue()
        self.closing: _Close | None = None
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
        """An observation batch held records the store refused (hub/service/sync.py)."""
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
            self.closing = _Close(code, message)
            self.outbox.put_nowait(self.closing)


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
        self._handshakes = handshakes
        self._metrics = metrics
        # Mutual TLS: the client certificate must name the token's cluster.
        self._require_client_identity = require_client_identity
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
        cluster_id, token_hash = await self._authenticate(request_iterator, context)
        hello = await self._hello(request_iterator, context, cluster_id)
        session = _Session(cluster_id, token_hash, hello)
        # Registered before the session is recorded: a rotation or deletion committed from
        # here on closes it, and one committed before is seen by open_session.
        self._fanout.register(cluster_id, session.slot, session)
        reader: asyncio.Task[None] | None = None
        opened = False
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
                            leader=False,
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
            welcome = self._welcome(session, newest_term, held)
            yield self._out(sync_pb2.HubMessage(welcome=welcome))
            await self._lead(session, hello.leader_term, read_only=hello.read_only)
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
            reader.add_done_callback(lambda _: session.outbox.put_nowait(_READER_DONE))
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

    # -- handshake ----------------------------------------------------------------------------

    async def _authenticate(
        self,
        request_iterator: AsyncIterator[sync_pb2.AgentMessage],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> tuple[str, str]:
        """The token's cluster and the token's hash (the stream's identity)."""

        async def refuse(code: grpc.StatusCode, message: str) -> NoReturn:
            await self._refuse(request_iterator, context, code, message)

        token = bearer_token(context.invocation_metadata())
        if not token:
            await refuse(
                grpc.StatusCode.UNAUTHENTICATED, "missing 'authorization: Bearer <cluster token>'"
            )
        try:
            cluster_id = cluster_service.authenticate(self._ctx, token)
        except errors.Unauthenticated as e:
            await refuse(grpc.StatusCode.UNAUTHENTICATED, e.message)
        if self._require_client_identity:
            named = peer_cluster_id(context.auth_context())
            if named is None:
                await refuse(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "the client certificate names no cluster (SPIFFE id, DNS name or CN)",
                )
            if named != cluster_id:
                await self._audit(
                    cluster_id,
                    "agent.refused",
                    "PERMISSION_DENIED",
                    f"client certificate of cluster {named}",
                )
                await refuse(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"the client certificate belongs to cluster {named}, the token to {cluster_id}",
                )
            fingerprint = peer_certificate_fingerprint(context.auth_context())
            if fingerprint:
                try:
                    await self._in_writer(
                        functools.partial(
                            cluster_service.check_certificate,
                            self._ctx,
                            cluster_id=cluster_id,
                            fingerprint=fingerprint,
                        )
                    )
                except errors.Unauthenticated as e:
                    await refuse(grpc.StatusCode.UNAUTHENTICATED, e.message)
        if not self._handshakes.try_take():
            retry_ms = int(self._handshakes.retry_after() * 1000)
            context.set_trailing_metadata(((RETRY_AFTER_KEY, str(retry_ms)),))
            await refuse(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many stream handshakes; retry in {retry_ms} ms ({RETRY_AFTER_KEY})",
            )
        return cluster_id, cluster_service.token_hash(token)

    @staticmethod
    async def _refuse(
        request_iterator: AsyncIterator[sync_pb2.AgentMessage],
        context: grpc.aio.ServicerContext[Any, Any],
        code: grpc.StatusCode,
        message: str,
    ) -> NoReturn:
        """End a handshake refused before its Hello was read, once the Hello is in.

        The agent writes its Hello as soon as the call starts. If the hub ends the call first,
        that write fails inside grpc, and grpc's asyncio client then gives the call its own
        status, INTERNAL "Internal error from Core", in place of the one the hub sent: the
        agent, and the operator reading its log, lose why it was refused (a revoked
        certificate, a wrong token, the slot of a handshake pushback). How often depends on
        timing alone: 5 refusals in 1,000 on a machine kept busy. So the refusal waits for the
        first message (or the end of the client's side), at most HELLO_TIMEOUT_S as an
        accepted stream would, and then ends the call: by then the write is done and the
        status arrives whole. What the message says is not looked at.
        """
        with contextlib.suppress(Exception):  # ended, broken or silent: refuse all the same
            await asyncio.wait_for(anext(request_iterator), HELLO_TIMEOUT_S)
        await context.abort(code, message)
        raise AssertionError("unreachable: abort raises")

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
            await self._audit(
                cluster_id,
                "agent.refused",
                "PERMISSION_DENIED",
                f"Hello for cluster {hello.cluster_id[:64]!r}",
            )
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"this token belongs to cluster {cluster_id}, not {hello.cluster_id}",
            )
        return hello

    def _welcome(
        self,
        session: _Session,
        leader_term: int,
        held: tuple[Mapping[str, int], Mapping[str, int]],
    ) -> sync_pb2.Welcome:
        deployments, nodes = held
        return sync_pb2.Welcome(
            session_id=session.session_id,
            store_epoch=self._ctx.db.epoch,
            heartbeat_interval_ms=int(self._ctx.settings.heartbeat_interval_s * 1000),
            leader_term=leader_term,
            held=[
                *(
                    sync_pb2.HeldObservation(deployment_id=i, observe_unix_nanos=ns)
                    for i, ns in deployments.items()
                ),
                *(
                    sync_pb2.HeldObservation(node_id=i, observe_unix_nanos=ns)
                    for i, ns in nodes.items()
                ),
            ],
        )

    async def _lead(self, session: _Session, term: int, *, read_only: bool) -> None:
        """A whole-cluster agent leads by being the only one; a node agent by its Lease term,
        or, read-only (no Lease), by the hub's grant."""
        if session.whole:
            session.leading = True
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

    async def _outgoing(self, session: _Session) -> AsyncIterator[sync_pb2.HubMessage]:
        while True:
            item = await session.outbox.get()
            if item is _READER_DONE or isinstance(item, _Close):
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
        self, session: _Session, request_iterator: AsyncIterator[sync_pb2.AgentMessage]
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

    async def _handle(self, session: _Session, kind: str, message: sync_pb2.AgentMessage) -> None:
        if kind == "heartbeat":
            convert.heartbeat(message.heartbeat, self._checker())
            return
        if kind == "leadership":
            await self._leadership_message(session, message.leadership)
            return
        if kind == "observations":
            batch = convert.observations(message.observations, self._checker())
            if batch.seq <= session.last_seq:
                raise errors.InvalidArgument(
                    "observations.seq", f"must increase: {batch.seq} after {session.last_seq}"
                )
            self._authorize_scope(session, batch)
            sync_service.authorize(
                self._ctx, session.cluster_id, batch, known=session.own_deployments
            )
            session.last_seq = batch.seq
            self._ingest.put(
                sync_service.Report(session.cluster_id, session.token_hash, batch), session
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

    async def _leadership_message(self, session: _Session, leadership: sync_pb2.Leadership) -> None:
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

    def _authorize_scope(self, session: _Session, batch: ObservationBatch) -> None:
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

    def _require_leader(self, session: _Session, what: str) -> None:
        if session.leading:
            return
        term = self._leadership.term(session.cluster_id)
        session.fence(term, f"not the leader of cluster {session.cluster_id}")
        raise errors.FailedPrecondition(
            f"{what} are accepted only from the cluster's leader (term {term})"
        )
