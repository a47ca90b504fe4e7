"""The gRPC server's edge, before any servicer runs: malformed requests and early refusals.

Two server interceptors, installed by hub/app/listeners.py on every service:

- `MalformedRequests`: a request whose bytes are not the method's message (bad wire format,
  a string field that is not UTF-8) is INVALID_ARGUMENT naming the message type. Left to
  grpc, the deserializer's exception becomes UNKNOWN with a Python exception's text. It wraps
  each method's deserializer (a parse failure becomes a marker value) and behaviour (the
  marker is answered INVALID_ARGUMENT; on a request stream, when the marker is read).
- `Authenticated`: the methods of the services given are refused UNAUTHENTICATED when their
  metadata fails the check, before the request message is read: a client without a token
  cannot make the hub buffer and parse a message up to the receive limit.
- `Measured` (outermost): every call's status code, and a unary call's latency, told to a
  recorder (the hub's RED metrics); refusals of the two above included.

This module knows no Wingsmith message; it must not touch the store or the service layer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import grpc

from hub import errors

Metadata = Mapping[str, str]
# Told of a malformed request: the method's path ("/pkg.Service/Method"), the call's metadata
# and the refusal (the audit log records it, hub/api/control.py).
Refused = Callable[[str, Metadata, errors.WingsmithError], Awaitable[None]]
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]]


class _Malformed:
    """What a request that could not be parsed deserializes to."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _checked_deserializer(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as e:  # DecodeError, and whatever a parser raises on garbage
            return _Malformed(errors.capped(str(e)))

    return deserialize


_Refuse = Callable[[_Malformed, grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]


def _refuser(method: str, refused: Refused | None) -> _Refuse:
    async def refuse(request: _Malformed, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        message = (
            f"malformed request (not a valid protobuf message of this method): {request.problem}"
        )
        if refused is not None:
            metadata = {
                key.lower(): value
                for key, value in context.invocation_metadata() or ()
                if isinstance(value, str)
            }
            await refused(method, metadata, errors.InvalidArgument("", message))
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)

    return refuse


def _unary_behaviour(behaviour: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, _Malformed):
            await refuse(request, context)
        return await behaviour(request, context)

    return call


def _unary_stream_behaviour(behaviour: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        if isinstance(request, _Malformed):
            await refuse(request, context)
        async for response in behaviour(request, context):
            yield response

    return call


def _checked_stream(
    requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any], refuse: _Refuse
) -> AsyncIterator[Any]:
    async def checked() -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Malformed):
                await refuse(request, context)
            yield request

    return checked()


def _stream_unary_behaviour(behaviour: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    async def call(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        return await behaviour(_checked_stream(requests, context, refuse), context)

    return call


def _stream_stream_behaviour(behaviour: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    async def call(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        async for response in behaviour(_checked_stream(requests, context, refuse), context):
            yield response

    return call


class MalformedRequests(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """`refused`, when given, is told of each malformed request before it is answered."""

    def __init__(self, refused: Refused | None = None) -> None:
        self._refused = refused

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        deserializer = _checked_deserializer(handler.request_deserializer)
        refuse = _refuser(handler_call_details.method or "", self._refused)
        if handler.unary_unary is not None:
            behaviour = {"unary_unary": _unary_behaviour(handler.unary_unary, refuse)}
        elif handler.unary_stream is not None:
            behaviour = {"unary_stream": _unary_stream_behaviour(handler.unary_stream, refuse)}
        elif handler.stream_unary is not None:
            behaviour = {"stream_unary": _stream_unary_behaviour(handler.stream_unary, refuse)}
        else:
            behaviour = {"stream_stream": _stream_stream_behaviour(handler.stream_stream, refuse)}
        return handler._replace(request_deserializer=deserializer, **behaviour)


class Authenticated(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuse the calls of `services` whose metadata `check` rejects (hub.errors
    Unauthenticated or PermissionDenied), without reading their request."""

    def __init__(
        self, services: Iterable[str], check: Callable[[Metadata], Awaitable[None]]
    ) -> None:
        self._prefixes = tuple(f"/{name}/" for name in services)
        self._check = check

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method or ""
        if not method.startswith(self._prefixes):
            return await continuation(handler_call_details)
        metadata = {
            key.lower(): value
            for key, value in handler_call_details.invocation_metadata or ()
            if isinstance(value, str)
        }
        try:
            await self._check(metadata)
        except errors.WingsmithError as e:
            return _refusal(e)
        return await continuation(handler_call_details)


def _refusal(error: errors.WingsmithError) -> grpc.RpcMethodHandler:
    # A request-streaming handler never reads its request: nothing is buffered or parsed.
    async def refuse(_: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.abort(error.grpc_code, error.message)

    return grpc.stream_unary_rpc_method_handler(refuse)


# (service, method, code name, seconds or None for a streaming call)
Record = Callable[[str, str, str, float | None], None]


class Measured(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Tell `record` how each call of a known method ended: its status code, and for a call
    with one response its latency. Unknown methods (no handler) are not recorded: their
    names come from the client and would make the label set unbounded."""

    def __init__(self, record: Record) -> None:
        self._record = record

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        service, _, method = (handler_call_details.method or "").lstrip("/").rpartition("/")
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._single(handler.unary_unary, service, method))
        if handler.stream_unary is not None:
            return handler._replace(
                stream_unary=self._single(handler.stream_unary, service, method)
            )
        if handler.unary_stream is not None:
            return handler._replace(
                unary_stream=self._streaming(handler.unary_stream, service, method)
            )
        return handler._replace(
            stream_stream=self._streaming(handler.stream_stream, service, method)
        )

    def _single(self, behaviour: Callable[..., Any], service: str, method: str) -> Any:
        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            start = time.perf_counter()
            code = "OK"
            try:
                response = await behaviour(request, context)
                code = _code_name(context, None)
                return response
            except BaseException as e:
                code = _code_name(context, e)
                raise
            finally:
                self._record(service, method, code, time.perf_counter() - start)

        return call

    def _streaming(self, behaviour: Callable[..., Any], service: str, method: str) -> Any:
        async def call(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            code = "OK"
            try:
                async for response in behaviour(request, context):
                    yield response
                code = _code_name(context, None)
            except BaseException as e:
                code = _code_name(context, e)
                raise
            finally:
                self._record(service, method, code, None)

        return call


def _code_name(context: grpc.aio.ServicerContext[Any, Any], error: BaseException | None) -> str:
    """The status a call ended with: what the handler set (context.abort or set_code), else
    OK when it returned, CANCELLED when the client went away, UNKNOWN when it raised."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    if isinstance(code, int):
        for status in grpc.StatusCode:
            if status.value[0] == code:
                return str(status.name)
    if error is None:
        return "OK"
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return "CANCELLED"
    return "UNKNOWN"
