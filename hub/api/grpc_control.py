"""The control API over gRPC: a generic handler built from the ControlService descriptor.

Every RPC of the descriptor is routed to the same dispatcher the REST gateway uses, so gRPC and
REST cannot drift apart; hub.errors become status codes here and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
from google.protobuf import descriptor, message_factory
from google.protobuf.message import Message

from hub import errors
from hub.api.control import Dispatch

log = logging.getLogger(__name__)


def generic_handler(
    service: descriptor.ServiceDescriptor, dispatch: Dispatch
) -> grpc.GenericRpcHandler:
    handlers = {
        method.name: grpc.unary_unary_rpc_method_handler(
            _call(method, dispatch),
            request_deserializer=message_factory.GetMessageClass(method.input_type).FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        for method in service.methods
    }
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


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
