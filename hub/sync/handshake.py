"""The first steps of an agent stream (docs/stream.md, steps 1-3): the cluster token and, with
mutual TLS, the client certificate checked; the handshake slot taken (or RESOURCE_EXHAUSTED
with when to retry); the Hello read and checked against the token's cluster; the Welcome
built. hub/sync/session.py runs the stream from there.

Refusals of an identified cluster are audited (never those of an unknown token: a flood of
bad credentials must not fill the database).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import Executor
from typing import Any, NoReturn, TypeVar

import grpc

from hub import errors
from hub.service import clusters as cluster_service
from hub.service.context import ServiceContext
from hub.sync import convert
from hub.sync.ratelimit import TokenBucket
from hub.sync.stream import StreamSession
from hub.tls import peer_certificate_fingerprint, peer_cluster_id
from wingsmith.v1 import sync_pb2

T = TypeVar("T")

HELLO_TIMEOUT_S = 10.0
# Trailing metadata of a refused handshake: milliseconds until the agent's slot.
RETRY_AFTER_KEY = "wingsmith-retry-after-ms"

# (cluster id, action, outcome, message): audit a connection event, off the event loop.
Audit = Callable[[str, str, str, str], Awaitable[None]]


def bearer_token(metadata: Any) -> str:
    for key, value in metadata or ():
        if key.lower() == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return ""


class Handshake:
    def __init__(
        self,
        *,
        ctx: ServiceContext,
        handshakes: TokenBucket,
        count: Callable[..., None],
        audit: Audit,
        require_client_identity: bool = False,
        writer: Executor | None = None,
    ) -> None:
        self._ctx = ctx
        self._handshakes = handshakes
        # Counts a message read (`direction`, `kind`): the hub's wingsmith_messages_total.
        self._count = count
        self._audit = audit
        # Mutual TLS: the client certificate must name the token's cluster.
        self._require_client_identity = require_client_identity
        # The store-writer thread: the certificate check records what it saw.
        self._writer = writer

    async def _in_writer(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, call)

    async def authenticate(
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

    async def hello(
        self,
        request_iterator: AsyncIterator[sync_pb2.AgentMessage],
        context: grpc.aio.ServicerContext[Any, Any],
        cluster_id: str,
    ) -> sync_pb2.Hello:
        try:
            first = await asyncio.wait_for(anext(request_iterator), HELLO_TIMEOUT_S)
        except (StopAsyncIteration, TimeoutError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected a Hello first")
        self._count(direction="in", kind=first.WhichOneof("kind") or "empty")
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

    def welcome(
        self,
        session: StreamSession,
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
