"""Server-streaming RPCs over REST as Server-Sent Events (docs/rest.md "Watch").

The REST gateway (hub/api/rest.py) hands a streaming method's request here. Each response
message becomes one event: `id:` its `revision` field (what `Last-Event-ID` resumes from),
`event:` its `type` field's word, `data:` its JSON (jsonmap, as every REST answer). An error
before the first event is an ordinary JSON error answer with its HTTP status; after it, an
`error` event carrying the same {"error": {...}} document, then the end of the stream.

A client that does not read must not make the hub hold its events: the socket's send buffer
and the transport's buffer are kept small for these responses, so the stream's own bounded
queue (hub/api/watch.py) fills and the client is cut off. Knows descriptors, not Wingsmith.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from hub import errors
from hub.api import jsonmap

# The request field a `Last-Event-ID` header fills, and the response fields an event names.
RESUME_FIELD = "since_revision"
_ID_FIELD = "revision"
_TYPE_FIELD = "type"
# Bytes a slow client may leave in the kernel's send buffer and in the transport's.
SEND_BUFFER_BYTES = 32 * 1024
# How long the closing error event and end of stream may wait on a client that reads nothing.
_CLOSE_WAIT_S = 2.0
_ABORT_AFTER_S = 60.0

Write = Callable[[Message], Awaitable[None]]
StreamDispatch = Callable[
    [MethodDescriptor, Message, Mapping[str, str], Write],
    Awaitable[None],
]

_log = logging.getLogger(__name__)


def event_bytes(message: Message) -> bytes:
    document = jsonmap.to_json(message)
    lines = []
    if _ID_FIELD in document:
        lines.append(f"id: {document[_ID_FIELD]}")
    kind = document.get(_TYPE_FIELD)
    if isinstance(kind, str):
        lines.append(f"event: {kind}")
    lines.append("data: " + json.dumps(document, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def error_bytes(error: errors.WingsmithError) -> bytes:
    document = {
        "error": {
            "code": error.http_status,
            "status": error.grpc_code.name,
            "message": error.message,
        }
    }
    return ("event: error\ndata: " + json.dumps(document) + "\n\n").encode()


async def serve(
    request: web.Request,
    method: MethodDescriptor,
    message: Message,
    metadata: Mapping[str, str],
    stream: StreamDispatch | None,
) -> web.StreamResponse:
    if stream is None:
        raise errors.WingsmithError(f"{method.full_name} is not served over REST")
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # a buffering proxy would hold events back
        }
    )
    # A watch holds its connection for its life; when it ends, the connection goes too.
    response.force_close()

    async def write(answer: Message) -> None:
        if not response.prepared:
            await response.prepare(request)
            _small_buffers(request)
        await response.write(event_bytes(answer))

    try:
        await stream(method, message, metadata, write)
    except errors.WingsmithError as e:
        if not response.prepared:
            raise  # nothing sent yet: the ordinary JSON error answer
        await _bounded(response.write(error_bytes(e)))
    except ConnectionError:
        return response  # the client went away
    if not response.prepared:
        await response.prepare(request)
    await _bounded(response.write_eof())
    transport = request.transport
    if transport is not None and not transport.is_closing():
        # Closing waits for the client to read what is buffered; one that never reads is
        # dropped after a grace period rather than held for ever.
        asyncio.get_running_loop().call_later(_ABORT_AFTER_S, transport.abort)
    return response


def _small_buffers(request: web.Request) -> None:
    transport = request.transport
    if transport is None:
        return
    transport.set_write_buffer_limits(high=SEND_BUFFER_BYTES)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


async def _bounded(step: Awaitable[None]) -> None:
    """A last write to a client that may not read: queued (bounded by the buffers above) and
    waited for a moment; the connection closes after it either way."""
    with contextlib.suppress(TimeoutError, ConnectionError):
        await asyncio.wait_for(step, _CLOSE_WAIT_S)
