"""A real aiohttp server on 127.0.0.1:0 in a background thread, a stdlib client, a fake dispatch.

The server runs on its own event loop in one thread, so tests stay synchronous (no
pytest-asyncio); `serving` stops the site, the loop and the thread before it returns. The
client bypasses any proxy configured in the environment: these requests never leave the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

_TIMEOUT_S = 10


@contextlib.contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """Serve `app` until the block ends; yields the base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="rest-test-server", daemon=True)
    thread.start()
    runner = web.AppRunner(app, access_log=None)
    try:
        port = asyncio.run_coroutine_threadsafe(_start(runner), loop).result(_TIMEOUT_S)
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_TIMEOUT_S)
        assert not thread.is_alive(), "the test server's loop did not stop"
        loop.close()


async def _start(runner: web.AppRunner) -> int:
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port: int = runner.addresses[0][1]
    return port


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: Any


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(
    base: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    raw: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """One HTTP request; any status comes back as a Reply (errors are not raised)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with _OPENER.open(request, timeout=_TIMEOUT_S) as response:
            if response.headers.get("Content-Type") == "text/event-stream":
                # Server-Sent Events: the body is the stream's text.
                return Reply(response.status, dict(response.headers), response.read().decode())
            return Reply(response.status, dict(response.headers), json.loads(response.read()))
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, dict(error.headers), json.loads(error.read()))


@dataclass(frozen=True)
class Call:
    method: MethodDescriptor
    request: Message
    metadata: Mapping[str, str]


@dataclass
class FakeDispatch:
    """Records every call; answers from `replies` (a message, or an exception to raise) by
    method name, else with an empty message of the method's output type."""

    calls: list[Call] = field(default_factory=list)
    replies: dict[str, Message | Exception] = field(default_factory=dict)

    async def __call__(
        self, method: MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Message:
        self.calls.append(Call(method, request, dict(metadata)))
        reply = self.replies.get(method.name)
        if isinstance(reply, Exception):
            raise reply
        if reply is None:
            return message_factory.GetMessageClass(method.output_type)()
        return reply

    @property
    def last(self) -> Call:
        assert self.calls, "dispatch was not called"
        return self.calls[-1]

    async def stream(
        self,
        method: MethodDescriptor,
        request: Message,
        metadata: Mapping[str, str],
        write: Callable[[Message], Awaitable[None]],
    ) -> None:
        """A server-streaming call: recorded, answered with one message, then the end."""
        await write(await self(method, request, metadata))

    def reset(self) -> None:
        self.calls.clear()
        self.replies.clear()
