"""The control API over gRPC: a generic handler built from the ControlService descriptor.

Every RPC of the descriptor is routed to the same dispatcher the REST gateway uses, so gRPC and
REST cannot drift apart; hub.errors become status codes here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import grpc
from google.protobuf import descriptor, message_factory
from google.protobuf.message import Message

from hub import errors
from hub.api.control import Dispatch, StreamDispatch

log = logging.getLogger(__name__)


def generic_handler(
    service: descriptor.ServiceDescriptor, dispatch: Dispatch, stream: StreamDispatch
) -> grpc.GenericRpcHandler:
    handlers = {
        method.name: (
            grpc.unary_stream_rpc_method_handler(
                _stream(method, stream),
                request_deserializer=message_factory.GetMessageClass(method.input_type).FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler(
                _call(method, dispatch),
                request_deserializer=message_factory.GetMessageClass(method.input_type).FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
        )
        for method in service.methods
    }
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _stream(
    method: descriptor.MethodDescriptor, stream: StreamDispatch
) -> Callable[[Message, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Message]]:
    """A server-streaming call as the async generator gRPC (and hub/api/grpc_edge.py's
    interceptors) expect: the dispatch runs in its own task and hands each message over one at
    a time, so a client that does not read holds at most one message here; the feed's own
    bounded queue decides when it is cut off (hub/api/watch.py)."""

    async def call(
        request: Message, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Message]:
        metadata = {key.lower(): value for key, value in context.invocation_metadata() or ()}
        handed: asyncio.Queue[Message] = asyncio.Queue(1)
        task: asyncio.Future[None] = asyncio.ensure_future(
            stream(method, request, metadata, handed.put)
        )
        getter: asyncio.Future[Message] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(handed.get())
                either: set[asyncio.Future[Any]] = {getter, task}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                getter.cancel()
                while not handed.empty():
                    yield handed.get_nowait()
                task.result()
                return
        except errors.WingsmithError as e:
            await context.abort(e.grpc_code, e.message)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception:
            log.exception("%s failed", method.full_name)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the hub's log")
        finally:
            if getter is not None and not getter.done():
                getter.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    return call


def _call(
    method: descriptor.MethodDescriptor, dispatch: Dispatch
) -> Callable[[Message, grpc.aio.ServicerContext[Any, Any]], Coroutine[Any, Any, Message]]:
    async def call(request: Message, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
        metadata = {key.lower(): value for key, value in context.invocation_metadata() or ()}
        try:
            return await dispatch(method, request, metadata)
        except errors.WingsmithError as e:
            await context.abort(e.grpc_code, e.message)
        except Exception:
            log.exception("%s failed", method.full_name)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the hub's log")
        raise AssertionError("unreachable: abort raises")

    return call
