"""The one entry both API edges call: authenticate, authorize (hub/access.py), run the
method's handler (hub/api/handlers.py) and audit the call when it changes something, allowed
or refused.

`dispatcher` serves the gRPC server (hub/api/grpc_control.py) and the REST gateway
(hub/api/rest.py), `principal_dispatcher` the dashboard (its session already proved who
calls), `stream_dispatcher` the Watch stream of both edges, and `refusal_recorder` audits a
mutating call an edge refused before dispatch. Before any handler runs, every string of the
request passes one sweep (`_refuse_nul`: no control character, docs/rest.md "String
fields"), whose rule is the contract's (hub/api/contract.py `STRINGS`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor
from google.protobuf.message import Message
from opentelemetry import trace

from hub import access, errors, tracing
from hub.api import coalesce, contract, convert, jsonview, permissions, watch
from hub.api.auth import Authenticator

# The handlers the dispatchers run; named here too, as the hub's wiring (hub/app/) builds
# them beside their dispatcher.
from hub.api.handlers import Answer
from hub.api.handlers import ControlHandlers as ControlHandlers
from hub.model import AuditRecord
from hub.service import access as access_service
from hub.service.context import ServiceContext
from wingsmith.v1 import control_pb2 as cpb

Dispatch = Callable[[descriptor.MethodDescriptor, Message, Mapping[str, str]], Awaitable[Message]]
# The REST gateway's: a message, or a list's REST JSON (hub/api/jsonview.py).
AnswerDispatch = Callable[
    [descriptor.MethodDescriptor, Message, Mapping[str, str]], Awaitable[Answer]
]


# The dashboard's entry: the caller is a principal its session already proved.
PrincipalDispatch = Callable[
    [descriptor.MethodDescriptor, Message, access.Principal], Awaitable[Message]
]


def dispatcher(
    handlers: ControlHandlers, auth: Authenticator, ctx: ServiceContext, *, edge: str
) -> Dispatch:
    """The one entry both edges call: authenticate, then `run` (authorize, handle, audit).
    `edge` ("grpc", "rest") is recorded in the audit log; each edge has its own dispatcher."""
    answer = _dispatcher(handlers, auth, ctx, edge=edge, output=convert.MESSAGES)

    async def dispatch(
        method: descriptor.MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Message:
        result = await answer(method, request, metadata)
        assert isinstance(result, Message)  # messages: asked for
        return result

    return dispatch


def rest_dispatcher(
    handlers: ControlHandlers, auth: Authenticator, ctx: ServiceContext
) -> AnswerDispatch:
    """`dispatcher` for the REST gateway: the list methods answer their REST JSON straight
    from the views, already dumped (a jsonview.Document; docs/rest.md "List answers, straight
    from the views"), every other method a message as on gRPC. Identical list calls share one
    read that began after each of them arrived (hub/api/coalesce.py; docs/rest.md)."""
    answer = _dispatcher(handlers, auth, ctx, edge="rest", output=convert.JSON)
    reads: coalesce.Coalescer[Answer] = coalesce.Coalescer()

    async def dispatch(
        method: descriptor.MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Answer:
        if not _coalesced(method):
            return await answer(method, request, metadata)
        # The same call by the same credentials: the same principal, so the same scope.
        key = (
            method.full_name,
            request.SerializeToString(deterministic=True),
            metadata.get("authorization", ""),
        )
        return await reads.read(key, lambda: answer(method, request, metadata))

    return dispatch


def _coalesced(method: descriptor.MethodDescriptor) -> bool:
    return method.name.startswith("List") and not permissions.rule_for(method.name).mutating


def _dispatcher(
    handlers: ControlHandlers,
    auth: Authenticator,
    ctx: ServiceContext,
    *,
    edge: str,
    output: convert.Output,
) -> AnswerDispatch:
    def call(
        method: descriptor.MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Answer:
        # Unaudited when refused: there is no one to name.
        principal = auth.check_for_dispatch(metadata)
        result = answer(handlers, ctx, method, request, principal, edge=edge, output=output)
        if isinstance(result, jsonview.Document):
            # Dumped here, in the call's worker thread (not a second thread, nor the loop), as
            # web.json_response would: the same bytes.
            return dataclasses.replace(result, text=json.dumps(result.body))
        return result

    async def dispatch(
        method: descriptor.MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Answer:
        # One span per call, continuing the caller's trace (W3C traceparent in its metadata or
        # headers); the worker thread runs in a copy of this context, so what the call does
        # (its admission pass, the change it publishes) belongs to it (hub/tracing.py).
        with tracing.tracer().start_as_current_span(
            f"{method.containing_service.full_name}/{method.name}",
            context=tracing.extracted(metadata),
            kind=trace.SpanKind.SERVER,
            attributes={
                "rpc.service": method.containing_service.full_name,
                "rpc.method": method.name,
                "wingsmith.edge": edge,
            },
        ):
            # In a worker thread: the event loop keeps serving the agents' streams while the
            # call looks its token up, reads, decides and commits (the store serializes
            # writers; reads never wait).
            result: Answer = await asyncio.to_thread(call, method, request, metadata)
            return result

    return dispatch


# A server-streaming call: (method, request, metadata, write) -> until it ends; `write` sends
# one response message. Raises hub.errors to end with an error status.
StreamDispatch = Callable[
    [
        descriptor.MethodDescriptor,
        Message,
        Mapping[str, str],
        Callable[[Message], Awaitable[None]],
    ],
    Awaitable[None],
]


def stream_dispatcher(feed: watch.WatchFeed, auth: Authenticator) -> StreamDispatch:
    """The streaming entry of both edges: authenticate and authorize as `run` does (a read:
    not audited), then serve the stream from the watch feed."""

    async def dispatch(
        method: descriptor.MethodDescriptor,
        request: Message,
        metadata: Mapping[str, str],
        write: Callable[[Message], Awaitable[None]],
    ) -> None:
        principal = await asyncio.to_thread(auth.check_for_dispatch, metadata)
        rule = permissions.rule_for(method.name)
        _refuse_nul(request)
        access.authorize(principal, action=method.name, needs=rule.needs, projects=None)
        if method.name != "Watch" or not isinstance(request, cpb.WatchRequest):
            raise errors.WingsmithError(f"{method.full_name} is not implemented")
        await feed.drive(request, principal, write)

    return dispatch


@dataclass(frozen=True)
class PrincipalWatch:
    """Watch for an edge that authenticates its callers itself (the dashboard's session):
    `drive` authorizes as `stream_dispatcher` does, then serves the stream; `head` is the last
    revision handed out (a page read now resumes from it)."""

    drive: Callable[
        [cpb.WatchRequest, access.Principal, Callable[[Message], Awaitable[None]]],
        Awaitable[None],
    ]
    head: Callable[[], Awaitable[int]]


def principal_watch(feed: watch.WatchFeed) -> PrincipalWatch:
    async def drive(
        request: cpb.WatchRequest,
        principal: access.Principal,
        write: Callable[[Message], Awaitable[None]],
    ) -> None:
        rule = permissions.rule_for("Watch")
        _refuse_nul(request)
        access.authorize(principal, action="Watch", needs=rule.needs, projects=None)
        await feed.drive(request, principal, write)

    return PrincipalWatch(drive=drive, head=feed.head)


def principal_dispatcher(
    handlers: ControlHandlers, ctx: ServiceContext, *, edge: str
) -> PrincipalDispatch:
    """For an edge that authenticates its callers itself (the dashboard's signed session):
    the same `run` as the API edges, so it can do nothing its caller's role does not allow."""

    async def dispatch(
        method: descriptor.MethodDescriptor, request: Message, principal: access.Principal
    ) -> Message:
        result: Message = await asyncio.to_thread(
            run, handlers, ctx, method, request, principal, edge=edge
        )
        return result

    return dispatch


def run(
    handlers: ControlHandlers,
    ctx: ServiceContext,
    method: descriptor.MethodDescriptor,
    request: Message,
    principal: access.Principal,
    *,
    edge: str,
) -> Message:
    """Authorize (hub/access.py), run the method's handler, and audit the call when it
    changes something, allowed or refused."""
    result = answer(handlers, ctx, method, request, principal, edge=edge, output=convert.MESSAGES)
    assert isinstance(result, Message)  # messages: asked for
    return result


def answer(
    handlers: ControlHandlers,
    ctx: ServiceContext,
    method: descriptor.MethodDescriptor,
    request: Message,
    principal: access.Principal,
    *,
    edge: str,
    output: convert.Output,
) -> Answer:
    """`run`, the list methods answering in `output` (convert.JSON: a jsonview.Document)."""
    rule = permissions.rule_for(method.name)
    handler: Callable[[Any], Answer] | None = getattr(handlers, method.name, None)
    outcome, message = "OK", ""
    try:
        _refuse_nul(request)
        projects = None
        if rule.needs == access.NEEDS_PROJECT and principal.role != access.ROLE_ADMIN:
            assert rule.project is not None
            projects = access_service.projects_of(ctx, rule.project(request))
        access.authorize(principal, action=method.name, needs=rule.needs, projects=projects)
        if handler is None:
            raise errors.WingsmithError(f"{method.full_name} is not implemented")
        return handlers.run_as(principal, handler, request, output=output)
    except errors.WingsmithError as e:
        outcome, message = e.grpc_code.name, e.message
        raise
    except Exception:
        outcome, message = "INTERNAL", "internal error; see the hub's log"
        raise
    finally:
        # A validate_only call changes nothing: like a read, it leaves no audit record
        # (docs/security.md "Audit log").
        if rule.mutating and not _validate_only(request):
            entry = AuditRecord(
                time=ctx.clock(),
                actor=principal.actor,
                role=principal.role,
                edge=edge,
                action=method.name,
                target=_target(rule, request),
                outcome=outcome,
                message=message,
            )
            if outcome == "OK":
                access_service.record(ctx, entry)
            else:
                access_service.record_refusal(ctx, handlers.refusals, entry)


# An edge's report of a call it refused before dispatch (its request could not be read or
# parsed): the method, the request's metadata, the error it answered.
Refused = Callable[
    [descriptor.MethodDescriptor, Mapping[str, str], errors.WingsmithError], Awaitable[None]
]


def refusal_recorder(
    handlers: ControlHandlers, auth: Authenticator, ctx: ServiceContext, *, edge: str
) -> Refused:
    """For the edges: audit a mutating call refused while its request was read or parsed
    (malformed JSON, an unknown field or query parameter, a bad enum word, bytes that are not
    the method's message), like a call refused by its handler, within the same budget. The
    caller was authenticated before its body was read; one that was not is not recorded."""

    def note(
        method: descriptor.MethodDescriptor,
        metadata: Mapping[str, str],
        error: errors.WingsmithError,
    ) -> None:
        rule = permissions.rule_for(method.name)
        if not rule.mutating:
            return
        try:
            principal = auth.check_for_dispatch(metadata)
        except errors.WingsmithError:
            return  # names no one (docs/security.md)
        entry = AuditRecord(
            time=ctx.clock(),
            actor=principal.actor,
            role=principal.role,
            edge=edge,
            action=method.name,
            target=rule.kind,  # the request was not read: what it named is unknown
            outcome=error.grpc_code.name,
            message=error.message,
        )
        access_service.record_refusal(ctx, handlers.refusals, entry)

    async def record(
        method: descriptor.MethodDescriptor,
        metadata: Mapping[str, str],
        error: errors.WingsmithError,
    ) -> None:
        await asyncio.to_thread(note, method, metadata, error)

    return record


def _refuse_nul(request: Message) -> None:
    """InvalidArgument naming the first string field (map keys included) that holds a NUL
    or another control character (docs/rest.md "String fields"). PostgreSQL cannot store a
    NUL in a text column (psycopg raises DataError), a NUL in a name would be cut short by C
    code further down (Kubernetes, the engines), and a CR/LF or tab in a name, a label or a
    model reference has no meaning but a forged line: refused here, on every backend, before
    anything is looked up or written."""
    for path, text in _strings(request, ""):
        if "\x00" in text:
            raise errors.InvalidArgument(path, "must not contain a NUL character (\\u0000)")
        free = contract.FREE_TEXT_PATH.search(path)
        pattern = contract.FREE_TEXT_CONTROL if free else contract.CONTROL
        found = pattern.search(text)
        if found is not None:
            raise errors.InvalidArgument(
                path,
                f"must not contain a control character (found {found.group()!r} at position"
                f" {found.start()})",
            )


def _strings(message: Message, prefix: str) -> Iterator[tuple[str, str]]:
    """Every string set in `message`, map keys included, with its field path."""
    for field, value in message.ListFields():
        path = f"{prefix}.{field.name}" if prefix else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                where = f"{path}[{key!r}]"
                if isinstance(key, str):
                    yield where, key
                yield from _strings_in(item, where)
        elif field.is_repeated:
            for index, item in enumerate(value):
                yield from _strings_in(item, f"{path}[{index}]")
        else:
            yield from _strings_in(value, path)


def _strings_in(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Message):
        yield from _strings(value, path)
    elif isinstance(value, str):
        yield path, value


def _validate_only(request: Message) -> bool:
    """The request asks for a dry run (AIP-163 validate_only)."""
    return any(
        field.name == "validate_only" and bool(value) for field, value in request.ListFields()
    )


def _target(rule: permissions.Rule, request: Message) -> str:
    try:
        # A refused call is audited with what it named, NUL shown escaped (no text column of
        # PostgreSQL can hold one: the record would be lost with the refusal).
        return rule.target(request)[:256].replace("\x00", "\\x00")
    except (AttributeError, ValueError):
        return rule.kind
