"""The gateway's route table, read off the google.api.http rules: path templates parsed
(google/api/http.proto's grammar), one `Route` per rule and additional binding checked
against its request type, a segment trie that matches a request path to its route, and
`describe_routes`, the same table as data for the OpenAPI document (hub/api/openapi.py).

The REST gateway (hub/api/rest.py) binds and dispatches what this matches. Nothing here
names a Wingsmith message or method; it knows only descriptors.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# googleapis-common-protos ships .pyi stubs but no py.typed marker, so mypy will not read them.
from google.api import annotations_pb2, http_pb2
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
    MethodDescriptor,
    ServiceDescriptor,
)

from hub.api import jsonmap

_HTTP_PATTERNS = ("get", "put", "post", "delete", "patch")
# Well-known types a single query or path value can spell (their JSON is a string or scalar).
_TEXT_MESSAGE_TYPES = jsonmap.SPECIAL_JSON_TYPES - {
    "google.protobuf.Any",
    "google.protobuf.ListValue",
    "google.protobuf.Struct",
    "google.protobuf.Value",
}

# --------------------------------------------------------------------------------------------
# Path templates (google/api/http.proto grammar):
#   Template = "/" Segments [ ":" Verb ] ; Segment = "*" | "**" | LITERAL | Variable ;
#   Variable = "{" FieldPath [ "=" Segments ] "}"


@dataclass(frozen=True)
class _Segment:
    kind: Literal["literal", "star", "double_star"]
    text: str = ""


@dataclass(frozen=True)
class _Variable:
    field_path: tuple[str, ...]
    start: int  # template segment indices [start, end) the variable spans
    end: int


@dataclass(frozen=True)
class _Template:
    text: str
    segments: tuple[_Segment, ...]
    variables: tuple[_Variable, ...]
    verb: str


def _parse_template(text: str) -> _Template:
    if not text.startswith("/"):
        raise ValueError(f"path template {text!r} must start with '/'")
    path, verb = _split_verb(text)
    segments: list[_Segment] = []
    variables: list[_Variable] = []
    for token in _tokens(path[1:], text):
        if token.startswith("{"):
            variables.append(_parse_variable(token, start=len(segments), into=segments, text=text))
        else:
            segments.append(_parse_segment(token, text))
    for i, segment in enumerate(segments):
        if segment.kind == "double_star" and i != len(segments) - 1:
            raise ValueError(f"path template {text!r}: '**' must be the last segment")
    return _Template(text, tuple(segments), tuple(variables), verb)


def _split_verb(text: str) -> tuple[str, str]:
    colon = text.rfind(":")
    if colon > text.rfind("/") and colon > text.rfind("}"):
        return text[:colon], text[colon + 1 :]
    return text, ""


def _tokens(path: str, text: str) -> Iterator[str]:
    """Split on '/' outside braces: "{name=a/*}/b" -> "{name=a/*}", "b"."""
    depth, current = 0, ""
    for char in path:
        if char == "/" and depth == 0:
            yield current
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth not in (0, 1):
            raise ValueError(f"path template {text!r}: unbalanced or nested braces")
        current += char
    if depth:
        raise ValueError(f"path template {text!r}: unbalanced braces")
    yield current


def _parse_variable(token: str, *, start: int, into: list[_Segment], text: str) -> _Variable:
    inner = token[1:-1]
    name, _, pattern = inner.partition("=")
    field_path = tuple(name.split("."))
    if not all(part.isidentifier() for part in field_path):
        raise ValueError(f"path template {text!r}: bad variable {token!r}")
    for part in (pattern or "*").split("/"):
        into.append(_parse_segment(part, text))
    return _Variable(field_path, start, len(into))


def _parse_segment(token: str, text: str) -> _Segment:
    if token == "*":
        return _Segment("star")
    if token == "**":
        return _Segment("double_star")
    if not token or any(c in token for c in "{}*=:"):
        raise ValueError(f"path template {text!r}: bad segment {token!r}")
    return _Segment("literal", token)


# --------------------------------------------------------------------------------------------
# Routes: one per rule (and per additional binding), checked against the request type.


@dataclass(frozen=True)
class Route:
    method: MethodDescriptor
    http_method: str
    template: _Template
    body: str  # "", "*", or a top-level field name
    response_body: str
    path_fields: tuple[tuple[tuple[str, ...], FieldDescriptor], ...]

    @property
    def request_type(self) -> Descriptor:
        return self.method.input_type


def routes_of(service: ServiceDescriptor) -> Iterator[Route]:
    for method in service.methods:
        rule = _http_rule(method)
        if rule is None:
            continue  # a gRPC-only method (the agent stream, for example)
        if method.client_streaming:
            # A server stream is served as Server-Sent Events; a client stream has no REST form.
            raise ValueError(
                f"{method.full_name}: client-streaming methods cannot have an HTTP rule"
            )
        for binding in (rule, *rule.additional_bindings):
            yield _route(method, binding)


def _http_rule(method: MethodDescriptor) -> http_pb2.HttpRule | None:
    options = method.GetOptions()
    extension: Any = annotations_pb2.http
    if not options.HasExtension(extension):
        return None
    rule: http_pb2.HttpRule = options.Extensions[extension]
    return rule


def _route(method: MethodDescriptor, rule: http_pb2.HttpRule) -> Route:
    pattern = rule.WhichOneof("pattern")
    if pattern in _HTTP_PATTERNS:
        http_method, text = pattern.upper(), getattr(rule, pattern)
    elif pattern == "custom":
        http_method, text = rule.custom.kind.upper(), rule.custom.path
    else:
        raise ValueError(f"{method.full_name}: HTTP rule without a pattern")
    template = _parse_template(text)
    where = f"{method.full_name} ({http_method} {text})"
    path_fields = tuple(
        (var.field_path, _path_variable_field(method.input_type, var.field_path, where=where))
        for var in template.variables
    )
    _check_top_level_field(method.input_type, rule.body, where, allow_star=True)
    _check_top_level_field(method.output_type, rule.response_body, where, allow_star=False)
    return Route(method, http_method, template, rule.body, rule.response_body, path_fields)


def _path_variable_field(
    desc: Descriptor, field_path: tuple[str, ...], *, where: str
) -> FieldDescriptor:
    field = resolve(desc, field_path)
    if field is None or not is_text_field(field) or field.is_repeated:
        name = ".".join(field_path)
        raise ValueError(f"{where}: path variable {name!r} is not a singular scalar field")
    return field


def _check_top_level_field(desc: Descriptor, name: str, where: str, *, allow_star: bool) -> None:
    if not name or (allow_star and name == "*"):
        return
    if name not in desc.fields_by_name:
        raise ValueError(f"{where}: {desc.full_name} has no field {name!r}")


def resolve(desc: Descriptor, field_path: Sequence[str]) -> FieldDescriptor | None:
    """The field a dotted proto path names, through singular message fields only."""
    field: FieldDescriptor | None = None
    current: Descriptor | None = desc
    for name in field_path:
        if current is None:
            return None
        field = current.fields_by_name.get(name)
        if field is None:
            return None
        current = jsonmap.message_type(field) if jsonmap.is_plain_message(field) else None
    return field


def is_text_field(field: FieldDescriptor) -> bool:
    """A field one URL value can set: a scalar, an enum, or a well-known type spelled as text."""
    if jsonmap.is_map(field):
        return False
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return jsonmap.message_type(field).full_name in _TEXT_MESSAGE_TYPES
    return field.type != FieldDescriptor.TYPE_GROUP


# --------------------------------------------------------------------------------------------
# Matching: a trie of template segments. Routes ending at a node are keyed by verb, then by
# HTTP method, so one walk finds both "this path" and "which methods it allows".


@dataclass
class _Node:
    literals: dict[str, _Node] = dataclasses.field(default_factory=dict)
    star: _Node | None = None
    double_star: _Node | None = None
    routes: dict[str, dict[str, Route]] = dataclasses.field(default_factory=dict)

    def child(self, segment: _Segment) -> _Node:
        if segment.kind == "literal":
            return self.literals.setdefault(segment.text, _Node())
        if segment.kind == "star":
            self.star = self.star or _Node()
            return self.star
        self.double_star = self.double_star or _Node()
        return self.double_star


Spans = tuple[tuple[int, int], ...]  # per template segment: the request segments it matched


@dataclass(frozen=True)
class _Match:
    route: Route
    path_values: Mapping[tuple[str, ...], str]


@dataclass(frozen=True)
class NotAllowed:
    allowed: tuple[str, ...]


class Matcher:
    def __init__(self, routes: Iterable[Route]) -> None:
        self._root = _Node()
        self._verbs: set[str] = set()
        for route in routes:
            self._add(route)

    def _add(self, route: Route) -> None:
        node = self._root
        for segment in route.template.segments:
            node = node.child(segment)
        by_method = node.routes.setdefault(route.template.verb, {})
        other = by_method.get(route.http_method)
        if other is not None:
            raise ValueError(
                f"{route.method.full_name} and {other.method.full_name} both route "
                f"{route.http_method} {route.template.text}"
            )
        by_method[route.http_method] = route
        if route.template.verb:
            self._verbs.add(route.template.verb)

    def resolve(self, http_method: str, raw_path: str) -> _Match | NotAllowed | None:
        verb, raw_segments = self._split_verb(raw_path)
        segments = [urllib.parse.unquote(s) for s in raw_segments]
        allowed: set[str] = set()
        for node, spans in _walk(self._root, segments, i=0, spans=()):
            by_method = node.routes.get(verb, {})
            route = by_method.get(http_method)
            if route is not None:
                return _Match(route, _bind(route, segments, spans=spans))
            allowed.update(by_method)
        return NotAllowed(tuple(sorted(allowed))) if allowed else None

    def _split_verb(self, raw_path: str) -> tuple[str, list[str]]:
        # A known verb after the last ':' of the raw last segment is always the verb (as in
        # Envoy's transcoder); an id that ends so spells its ':' as %3A, which never splits.
        raw_segments = raw_path[1:].split("/")
        head, colon, verb = raw_segments[-1].rpartition(":")
        if colon and verb in self._verbs:
            return verb, [*raw_segments[:-1], head]
        return "", raw_segments


def _walk(
    node: _Node, segments: list[str], *, i: int, spans: Spans
) -> Iterator[tuple[_Node, Spans]]:
    """Every node the path reaches, best first: literal, then variable, then '**'."""
    if i == len(segments):
        yield node, spans
    else:
        literal = node.literals.get(segments[i])
        if literal is not None:
            yield from _walk(literal, segments, i=i + 1, spans=(*spans, (i, i + 1)))
        if node.star is not None and segments[i]:
            yield from _walk(node.star, segments, i=i + 1, spans=(*spans, (i, i + 1)))
    if node.double_star is not None:
        yield node.double_star, (*spans, (i, len(segments)))


def _bind(route: Route, segments: list[str], *, spans: Spans) -> dict[tuple[str, ...], str]:
    values: dict[tuple[str, ...], str] = {}
    for var in route.template.variables:
        first, last = spans[var.start][0], spans[var.end - 1][1]
        values[var.field_path] = "/".join(segments[first:last])
    return values


@dataclass(frozen=True)
class RouteDescription:
    """One served route: a rule (or additional binding) of one method, as the gateway reads it.

    `path_fields` are the template's variables with the fields they bind; `query_fields` every
    dotted field path a query parameter may set (through singular message fields), the ones
    the path or body binds left out."""

    method: MethodDescriptor
    http_method: str
    template: str
    path_fields: tuple[tuple[str, FieldDescriptor], ...]
    body: str
    response_body: str
    query_fields: tuple[tuple[str, FieldDescriptor], ...]

    @property
    def path_variables(self) -> tuple[str, ...]:
        """The template's variables (dotted proto paths), in template order."""
        return tuple(name for name, _ in self.path_fields)


def describe_routes(services: Sequence[ServiceDescriptor]) -> list[RouteDescription]:
    """Every route `build_rest_app(services=...)` serves, in the services' method order."""
    found: list[RouteDescription] = []
    for service in services:
        for route in routes_of(service):
            found.append(
                RouteDescription(
                    method=route.method,
                    http_method=route.http_method,
                    template=route.template.text,
                    path_fields=tuple((".".join(p), f) for p, f in route.path_fields),
                    body=route.body,
                    response_body=route.response_body,
                    query_fields=tuple(_query_fields(route, route.request_type, prefix=())),
                )
            )
    return found


def dry_run_field(route: Route) -> FieldDescriptor | None:
    """The request's AIP-163 switch: `?validate_only=true` asks any mutating route for a dry
    run, also one whose body carries every other field (`POST /v1/clusters/east:drain`)."""
    field: FieldDescriptor | None = route.request_type.fields_by_name.get("validate_only")
    return field


def _query_fields(
    route: Route, desc: Descriptor, *, prefix: tuple[str, ...]
) -> Iterator[tuple[str, FieldDescriptor]]:
    if route.body == "*":
        dry = dry_run_field(route)
        if dry is not None and not prefix:
            yield dry.name, dry
        return
    for field in desc.fields:
        path = (*prefix, field.name)
        if bound_by(route, path):
            continue
        if is_text_field(field):
            yield ".".join(path), field
        elif jsonmap.is_plain_message(field) and len(path) < 8:  # no endless recursion
            yield from _query_fields(route, jsonmap.message_type(field), prefix=path)


def bound_by(route: Route, field_path: tuple[str, ...]) -> str:
    def overlaps(other: tuple[str, ...]) -> bool:
        shorter = min(len(other), len(field_path))
        return other[:shorter] == field_path[:shorter]

    if any(overlaps(path) for path, _ in route.path_fields):
        return "path"
    if route.body and overlaps((route.body,)):
        return "body"
    return ""
