"""The REST gateway: HTTP/JSON transcoded to protobuf requests from the google.api.http rules.

`build_rest_app` serves the route table hub/api/routes.py reads off every method's
`google.api.http` option (and its additional_bindings) on aiohttp; each request becomes
the method's protobuf request message and goes to `dispatch`, the same handlers the gRPC
servicer calls. Nothing here names a Wingsmith message or method: a new RPC with a rule is
served without a change here.

One request, in order:
1. Match: one segment trie over all rules; a literal segment beats a variable, a variable
   beats `**`. A path no rule has: 404. A path known for other methods: 405 with Allow.
2. Bind: the JSON body to the rule's `body` field (or to the whole request for "*"), then
   path variables (URL-decoded; `{a.b}` binds into a nested message), then every other
   query parameter to a scalar, enum or repeated field by its dotted proto name. The merged
   document is parsed by jsonread.from_json, so every error names its field.
3. Infer the update_mask from the body's fields when the caller gave none (as grpc-gateway).
4. Dispatch, and answer 200 with jsonmap.to_json of the response, or the error as
   {"error": {"code", "status", "message"}} with the status of hub.errors' table.

Decisions (docs/rest.md): a body sent to a rule without `body` is refused (400), not ignored,
so a caller never believes a DELETE or GET body mattered; repeated query fields take repeated
keys (`?tag=a&tag=b`), commas are never split (except a FieldMask, whose syntax is commas); a
query parameter naming a field the path or body already binds is refused (400).
This module must not touch sqlite3 or the service layer; it knows only descriptors.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

# googleapis-common-protos ships .pyi stubs but no py.typed marker, so mypy will not read them.
from google.protobuf import message_factory
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
    MethodDescriptor,
    ServiceDescriptor,
)
from google.protobuf.message import Message
from multidict import MultiMapping

from hub import errors
from hub.api import jsonmap, jsonread, jsonview, routes, sse
from hub.errors import InvalidArgument, WingsmithError

# A handler's answer is a message, or (a list) its REST JSON already (hub/api/jsonview.py).
Dispatch = Callable[
    [MethodDescriptor, Message, Mapping[str, str]], Awaitable[Message | jsonview.Document]
]
# A server-streaming method: (method, request, metadata, write each response) -> until done;
# served as Server-Sent Events (hub/api/sse.py).
StreamDispatch = sse.StreamDispatch
# Checks a request's metadata before its body is read; raises a hub.errors error to refuse.
Authenticate = Callable[[Mapping[str, str]], Awaitable[None]]
# Told of a request refused after authentication but before dispatch (its body or query could
# not be read as the method's request): the audit log records it (hub/api/control.py).
Refused = Callable[[MethodDescriptor, Mapping[str, str], WingsmithError], Awaitable[None]]

_log = logging.getLogger(__name__)

_MASK_FIELD = "update_mask"
_FIELD_MASK_TYPE = "google.protobuf.FieldMask"


class _NoBody:
    """The request carried no body (distinct from a JSON `null` body)."""


_NO_BODY = _NoBody()


# --------------------------------------------------------------------------------------------
# Binding a request: body, path values and query parameters into one JSON document.


def _request_document(
    *,
    route: routes.Route,
    body: object,
    path_values: Mapping[tuple[str, ...], str],
    query: MultiMapping[str],
) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if route.body == "*" and not isinstance(body, _NoBody):
        if not isinstance(body, dict):
            raise InvalidArgument(field="", problem="the request body must be a JSON object")
        document = dict(body)
    elif route.body and not isinstance(body, _NoBody):
        document = {route.body: body}
    desc = route.request_type
    fields = dict(route.path_fields)
    for field_path, text in path_values.items():
        _put(
            document,
            desc,
            field_path=field_path,
            value=_text_value(fields[field_path], text, field_path=field_path),
        )
    _bind_query(document, route=route, query=query)
    return document


def _bind_query(document: dict[str, Any], *, route: routes.Route, query: MultiMapping[str]) -> None:
    for key in dict.fromkeys(query):
        field_path = tuple(key.split("."))
        field = _query_field(route, field_path, key=key)
        values = query.getall(key)
        if field.is_repeated:
            value: Any = [_text_value(field, text, field_path=field_path) for text in values]
        elif len(values) > 1:
            raise InvalidArgument(field=key, problem="given more than once; it is not repeated")
        else:
            value = _text_value(field, values[0], field_path=field_path)
        _put(document, route.request_type, field_path=field_path, value=value)


def _query_field(route: routes.Route, field_path: tuple[str, ...], *, key: str) -> FieldDescriptor:
    if route.body == "*":
        dry = routes.dry_run_field(route)
        if dry is not None and field_path == (dry.name,):
            return dry
        problem = "query parameters are not accepted: the request body carries every field"
        if dry is not None:
            problem += f" (only {dry.name} may also be given here)"
        raise InvalidArgument(field=key, problem=problem)
    field = routes.resolve(route.request_type, field_path)
    if field is None:
        accepted = ", ".join(_query_parameters(route)) or "none"
        problem = f"unknown query parameter; accepted: {accepted}"
        raise InvalidArgument(field=key, problem=problem)
    if not routes.is_text_field(field):
        problem = "cannot be set from the query string (a map or a message; name its fields)"
        raise InvalidArgument(field=key, problem=problem)
    bound = routes.bound_by(route, field_path)
    if bound:
        raise InvalidArgument(field=key, problem=f"is already bound by the request {bound}")
    return field


def _query_parameters(route: routes.Route) -> list[str]:
    return [
        f.name
        for f in route.request_type.fields
        if routes.is_text_field(f) and not routes.bound_by(route, (f.name,))
    ]


def _text_value(field: FieldDescriptor, text: str, *, field_path: tuple[str, ...]) -> Any:
    """A URL value as the JSON jsonmap reads; only bool differs from the text itself."""
    is_bool = field.type == FieldDescriptor.TYPE_BOOL or (
        field.type == FieldDescriptor.TYPE_MESSAGE
        and jsonmap.message_type(field).full_name == "google.protobuf.BoolValue"
    )
    if not is_bool:
        return text  # ints, floats, enum words, timestamps: jsonmap parses and checks the text
    if text in ("true", "false"):
        return text == "true"
    problem = f"expected true or false, got {text!r}"
    raise InvalidArgument(field=".".join(field_path), problem=problem)


def _put(
    document: dict[str, Any], desc: Descriptor, *, field_path: Sequence[str], value: Any
) -> None:
    """Set a dotted proto path in the document; path and query values win over the body."""
    node = document
    current = desc
    for i, name in enumerate(field_path):
        field = current.fields_by_name[name]
        if field.json_name != name:
            node.pop(field.json_name, None)  # the body may have spelled it in lowerCamelCase
        if i == len(field_path) - 1:
            node[name] = value
            return
        # Copy each object on the way down: the body is read again for mask inference, and a
        # path value must not appear there as if the caller had sent it.
        child = node.get(name)
        child = node[name] = dict(child) if isinstance(child, dict) else {}
        node, current = child, jsonmap.message_type(field)


# --------------------------------------------------------------------------------------------
# Field-mask inference (grpc-gateway's FieldMaskFromRequestBody).


def _inferred_mask(
    route: routes.Route, body: object, *, query: MultiMapping[str]
) -> list[str] | None:
    """The update_mask paths the body implies, or None when the rule does not infer one."""
    mask = route.request_type.fields_by_name.get(_MASK_FIELD)
    if mask is None or mask.type != FieldDescriptor.TYPE_MESSAGE:
        return None
    if jsonmap.message_type(mask).full_name != _FIELD_MASK_TYPE or _MASK_FIELD in query:
        return None
    if not route.body or route.body == "*":
        return None
    body_field = route.request_type.fields_by_name[route.body]
    if not jsonmap.is_plain_message(body_field):
        return None
    if not isinstance(body, dict):
        return []  # no body: nothing to update (an empty, present mask)
    return sorted(_mask_paths(jsonmap.message_type(body_field), body, prefix=""))


def _mask_paths(desc: Descriptor, body: Mapping[str, Any], *, prefix: str) -> Iterator[str]:
    # Recurse into non-empty objects of message fields; a map, a list, a scalar, an empty
    # object or null is a leaf: the whole field is replaced.
    keys = jsonmap.fields_by_json_key(desc)
    for key, value in body.items():
        field = keys[key]  # from_json has already refused unknown keys
        path = jsonmap.join_path(prefix, field.name)
        if jsonmap.is_plain_message(field) and isinstance(value, dict) and value:
            yield from _mask_paths(jsonmap.message_type(field), value, prefix=path)
        else:
            yield path


# --------------------------------------------------------------------------------------------
# The aiohttp handler.


class _Gateway:
    def __init__(
        self,
        matcher: routes.Matcher,
        dispatch: Dispatch,
        authenticate: Authenticate | None,
        refused: Refused | None,
        stream: StreamDispatch | None = None,
    ) -> None:
        self._matcher = matcher
        self._dispatch = dispatch
        self._authenticate = authenticate
        self._refused = refused
        self._stream = stream

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._handle(request)
        except WingsmithError as e:
            return _error_response(e.http_status, e.grpc_code.name, e.message)
        except web.HTTPException:
            raise  # aiohttp's own protocol answers (413 body too large, ...)
        except ConnectionError:
            # The client went away mid-request (before its body was all sent): not the hub's
            # fault, and nobody is left to read the answer.
            _log.debug("REST %s %s: the client closed the connection", request.method, request.path)
            return _error_response(499, "CANCELLED", "the client closed the connection")
        except Exception:
            _log.exception("REST %s %s failed", request.method, request.path)
            return _error_response(500, "INTERNAL", "internal error")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        found = self._matcher.resolve(request.method, request.rel_url.raw_path)
        if found is None:
            return _error_response(404, "NOT_FOUND", f"no route for {request.path}")
        if isinstance(found, routes.NotAllowed):
            message = f"{request.method} is not allowed on {request.path}"
            headers = {"Allow": ", ".join(found.allowed)}
            return _error_response(405, "UNIMPLEMENTED", message, headers=headers)
        route = found.route
        request[ROUTE_KEY] = route.template.text
        metadata = _metadata(request)
        if self._authenticate is not None:
            # Before the body is read: a caller without a token cannot make the hub buffer
            # and parse one.
            await self._authenticate(metadata)
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            # The hub reads bodies as sent (the runner has auto_decompress off): aiohttp's
            # decoding of a body that lies about its coding could leave the request waiting
            # for ever, and a decompressed body could be far larger than the 1 MiB limit.
            message = (
                f"Content-Encoding {encoding!r} is not accepted: send the JSON body uncompressed"
            )
            await self._tell_refused(route, metadata, InvalidArgument("", message))
            return _error_response(
                415, "INVALID_ARGUMENT", message, headers={"Accept-Encoding": "identity"}
            )
        try:
            body = await _read_body(request, route)
            proto_request = _build_request(
                route, body, path_values=found.path_values, query=request.rel_url.query
            )
        except WingsmithError as e:
            await self._tell_refused(route, metadata, e)
            raise
        if route.method.server_streaming:
            _resume_from_last_event_id(request, proto_request)
            return await sse.serve(request, route.method, proto_request, metadata, self._stream)
        response = await self._dispatch(route.method, proto_request, metadata)
        text = _dumped(route, response)
        if text is None:
            # Encoded in a worker thread, as the call was handled: a page of 100 deployments
            # is ~2 ms of encoding, which on the loop would hold up every agent stream and
            # every other request the hub serves meanwhile.
            text = await asyncio.to_thread(_response_text, route, response)
        return web.json_response(text=text)

    async def _tell_refused(
        self, route: routes.Route, metadata: Mapping[str, str], error: WingsmithError
    ) -> None:
        if self._refused is not None:
            await self._refused(route.method, metadata, error)


def _resume_from_last_event_id(request: web.Request, message: Message) -> None:
    """SSE's reconnect header: an EventSource resumes after the last event id it read (an
    event's revision), unless the query named a revision itself."""
    last = request.headers.get("Last-Event-ID", "").strip()
    field = message.DESCRIPTOR.fields_by_name.get(sse.RESUME_FIELD)
    if not last or field is None or getattr(message, sse.RESUME_FIELD):
        return
    if not last.isdigit() or len(last) > 19:
        raise InvalidArgument("Last-Event-ID", f"expected an event id (a revision), got {last!r}")
    setattr(message, sse.RESUME_FIELD, int(last))


def _build_request(
    route: routes.Route,
    body: object,
    *,
    path_values: Mapping[tuple[str, ...], str],
    query: MultiMapping[str],
) -> Message:
    document = _request_document(route=route, body=body, path_values=path_values, query=query)
    message_class = message_factory.GetMessageClass(route.request_type)
    message = jsonread.from_json(document, message_class)
    paths = _inferred_mask(route, body, query=query)
    if paths is not None:
        mask = getattr(message, _MASK_FIELD)
        mask.paths.extend(paths)
        mask.SetInParent()
    return message


async def _read_body(request: web.Request, route: routes.Route) -> object:
    try:
        raw = await request.read()
    except web.RequestPayloadError as e:
        # A Content-Encoding the body does not match, a truncated chunked body.
        problem = f"the request body could not be read ({e.__cause__ or e}); check Content-Encoding"
        raise InvalidArgument(field="", problem=problem) from e
    if not raw.strip():
        return _NO_BODY
    if not route.body:
        problem = f"{route.http_method} {route.template.text} takes no request body"
        raise InvalidArgument(field="", problem=problem)
    try:
        return json.loads(
            raw.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant
        )
    except RecursionError as e:
        problem = "malformed JSON body: nested too deeply"
        raise InvalidArgument(field="", problem=problem) from e
    except (UnicodeDecodeError, ValueError) as e:
        # ValueError includes an integer beyond Python's int-string limit (4,300 digits).
        raise InvalidArgument(field="", problem=f"malformed JSON body: {e}") from e


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise ValueError(f"duplicate key {key!r}")
        document[key] = value
    return document


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _metadata(request: web.Request) -> dict[str, str]:
    # gRPC metadata keys are lower-case; a repeated header joins as HTTP allows (RFC 9110 5.3).
    metadata: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        metadata[key] = f"{metadata[key]}, {value}" if key in metadata else value
    return metadata


def _dumped(route: routes.Route, response: Message | jsonview.Document) -> str | None:
    """The answer's text when the call dumped it already (a list's jsonview.Document)."""
    if not isinstance(response, jsonview.Document) or not response.text or route.response_body:
        return None
    if response.type_name != route.method.output_type.full_name:
        raise TypeError(f"{route.method.full_name} returned a {response.type_name}")
    return response.text


def _response_text(route: routes.Route, response: Message | jsonview.Document) -> str:
    # json.dumps, as web.json_response writes a document: the same bytes as before.
    return json.dumps(_response_json(route, response))


def _response_json(route: routes.Route, response: Message | jsonview.Document) -> Any:
    if isinstance(response, jsonview.Document):
        actual, document = response.type_name, response.body
    else:
        actual = jsonmap.descriptor_of(response).full_name
        document = jsonmap.to_json(response)
    if actual != route.method.output_type.full_name:
        raise TypeError(f"{route.method.full_name} returned a {actual}")
    if route.response_body:
        return document[route.response_body]
    return document


def _error_response(
    status: int, code: str, message: str, *, headers: Mapping[str, str] | None = None
) -> web.Response:
    body = {"error": {"code": status, "status": code, "message": errors.capped(message)}}
    return web.json_response(body, status=status, headers=headers)


# --------------------------------------------------------------------------------------------
# aiohttp's own log: a client's unreadable body is the client's error, not the hub's.


class _ClientBodyErrors(logging.Filter):
    """aiohttp answers a request it cannot parse (bad headers, a body that does not match its
    Content-Encoding) with 400 itself, and drains an unread body after our response; either
    way it logs the client's mistake as an ERROR with a traceback. Those become one INFO
    line: the client was answered, the hub is fine."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        client_error = isinstance(error, web.RequestPayloadError) or (
            isinstance(error, HttpProcessingError) and 400 <= error.code < 500
        )
        if client_error:
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "refused a malformed HTTP request: %s", (error,)
            record.exc_info, record.exc_text = None, None
        return True


_CLIENT_BODY_ERRORS = _ClientBodyErrors()


def _quiet_client_body_errors() -> None:
    logger = logging.getLogger("aiohttp.server")
    if _CLIENT_BODY_ERRORS not in logger.filters:
        logger.addFilter(_CLIENT_BODY_ERRORS)


# --------------------------------------------------------------------------------------------
# Public entry points.


# The HTTP rule's path template a request matched (for per-route metrics: hub/app/listeners.py).
ROUTE_KEY = web.RequestKey("route", str)


def build_rest_app(
    *,
    services: Sequence[ServiceDescriptor],
    dispatch: Dispatch,
    authenticate: Authenticate | None = None,
    refused: Refused | None = None,
    extra_routes: Iterable[web.AbstractRouteDef] = (),
    mounts: Mapping[str, web.Application] = MappingProxyType({}),
    stream: StreamDispatch | None = None,
) -> web.Application:
    """An aiohttp app serving every HTTP rule of `services`; `extra_routes` (/metrics,
    /healthz) are matched first, then the sub-applications of `mounts` (prefix -> app).
    `authenticate` checks each request's headers before its body is read; `refused` is told
    of each request refused after that but before dispatch. Raises ValueError for a rule it
    cannot serve."""
    matcher = routes.Matcher(route for service in services for route in routes.routes_of(service))
    gateway = _Gateway(matcher, dispatch, authenticate, refused, stream)
    _quiet_client_body_errors()
    app = web.Application()
    app.add_routes(extra_routes)
    for prefix, sub_app in mounts.items():
        app.add_subapp(prefix, sub_app)  # before the catch-all below, so matched first
    # [\s\S], not '.': a decoded path may hold a newline, and it is still ours to answer.
    app.router.add_route("*", "/{tail:[\\s\\S]*}", gateway.handle)
    return app
