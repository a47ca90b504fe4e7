"""Fuzzing both edges of a real hub: every REST route, every ControlService RPC, the stream.

Property (issue 13): no input, however malformed, gets a 5xx, a gRPC UNKNOWN / INTERNAL /
DATA_LOSS, an error message that repeats a huge input, or a traceback (or any ERROR record) in
the hub's log; and after the whole run the data stored before it is unchanged.

Cases come from hypothesis strategies, derandomized so the suite runs the same cases every
time: text with the boundary characters validators get wrong (trailing newline, %0A, NUL,
lone surrogates, path traversal, 100 KB strings), integers beyond every range and beyond
Python's int-string limit, deeply nested JSON, bodies shaped like each route's request (every
field present, wrong types or nasty values), query strings naming the request's own fields,
non-UTF-8 headers, a Content-Encoding that lies; over gRPC, random and truncated wire bytes,
invalid UTF-8 in every string field, and typed requests with extreme values; on the stream,
corrupt bytes and every AgentMessage kind with nasty values after a valid Hello.

The routes are read from the proto's HTTP rules (hub.api.routes.describe_routes, as the OpenAPI
document reads them), the RPCs from the service descriptor: a new route or RPC is fuzzed
without a change here. Every case runs against a hub on SQLite and one on PostgreSQL (the
same input may be stored by one and refused by the other). WINGSMITH_FUZZ_EXAMPLES
(default 30) sets the examples per route / RPC; the default keeps the file near 30 s.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import http.client
import json
import logging
import os
import socket
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub.api import routes
from hub.store.port import is_postgres
from tests import stores
from tests.harness import ADMIN_TOKEN, Hub, running_hub, workload
from wingsmith.v1 import control_pb2, sync_pb2

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
EXAMPLES = int(os.environ.get("WINGSMITH_FUZZ_EXAMPLES", "30"))
# An error message may name the bad value, but never repeat a huge one.
MAX_ERROR_BYTES = 4096
CONTROL = control_pb2.DESCRIPTOR.services_by_name["ControlService"]
ROUTES = routes.describe_routes([CONTROL])
BAD_GRPC_CODES = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DATA_LOSS}
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("WINGSMITH_FUZZ_RANDOM") is None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
CASES: collections.Counter[str] = collections.Counter()

# Seeded resources: names the generated text cannot produce by chance.
SEED_PROJECT = "fz-seed-project"
SEED_CLUSTER = "fz-seed-cluster"
SEED_WORKLOAD = "fz-seed-workload"


# --------------------------------------------------------------------------------------------
# The hub under test, its log, and what it stored before the fuzzing.


class _LogTrap(logging.Handler):
    """Every record at ERROR or above, and every record carrying a traceback."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.caught: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.caught.append(record)

    def lines(self) -> list[str]:
        return [f"{r.name}: {r.getMessage()[:300]}" for r in self.caught]


@pytest.fixture(scope="module", params=stores.BACKENDS)
def fuzz_hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Hub, _LogTrap]]:
    # Every case on each backend: PostgreSQL refuses what SQLite stores (a NUL in text), so a
    # case that passes on one may be a 500 on the other.
    trap = _LogTrap()
    root = logging.getLogger()
    root.addHandler(trap)
    try:
        with running_hub(tmp_path_factory.mktemp("fuzz"), backend=str(request.param)) as (_, hub):
            hub.create_project(SEED_PROJECT, H100_80GB=8)
            hub.register_cluster(SEED_CLUSTER, region="eu")
            hub.post("/v1/workloads", workload(SEED_WORKLOAD, project=SEED_PROJECT, replicas=1))
            before = _stored(hub)
            yield hub, trap
            assert _stored(hub) == before, "the fuzzing changed seeded data"
            _integrity_ok(hub.db_path)
    finally:
        root.removeHandler(trap)


def _stored(hub: Hub) -> dict[str, Any]:
    return {
        "project": hub.get(f"/v1/projects/{SEED_PROJECT}"),
        "cluster": hub.get(f"/v1/clusters/{SEED_CLUSTER}"),
        "workload": hub.get(f"/v1/workloads/{SEED_WORKLOAD}"),
        "deployments": hub.get(f"/v1/deployments?workload_id={SEED_WORKLOAD}"),
    }


def _integrity_ok(db_path: str) -> None:
    if is_postgres(db_path):
        return  # PostgreSQL checks its own pages; the seeded rows were compared above
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _no_trouble_logged(trap: _LogTrap) -> None:
    lines = trap.lines()
    trap.caught.clear()  # each test reports what its own cases caused
    assert not lines, "the hub logged errors or tracebacks:\n" + "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Strategies.

NASTY_STRINGS = [
    "",
    " ",
    "nl\n",
    "\nnl",
    "a\r\nb",
    "a%0Ab",
    "%0A",
    "\x00",
    "a\x00b",
    "../../etc/passwd",
    "..",
    "/",
    "a/b",
    "\udcff",
    "a\ud800b",
    "\ufeffbom",
    "é",
    "😀" * 3,
    "\uff21\uff22\uff23",  # fullwidth ABC
    "-1",
    "1e309",
    "NaN",
    "9" * 5000,
    "x" * 100_000,
    "a" * 64,
    "A" * 63,
    "${jndi:ldap://x}",
    "'; DROP TABLE projects; --",
    "%",
    "%zz",
    "%ff%fe",
    "null",
    "true",
    "{}",
    "[]",
]
NASTY_INTS = [
    -1,
    0,
    1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**32,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    10**400,
]
# Beyond Python's int-string limit (4,300 digits): json.dumps could not write it, so the text
# stands in a string and is spliced into the encoded JSON as a bare number.
HUGE_NUMBER = "__huge_number__"
HUGE_DIGITS = b"9" * 5000

texts = st.one_of(
    st.sampled_from(NASTY_STRINGS),
    st.text(max_size=40),
    st.text(st.characters(codec=None, categories=["Cs", "Cc", "Zs", "So"]), max_size=8),
)
numbers = st.one_of(
    st.sampled_from([*NASTY_INTS, HUGE_NUMBER]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)
    ),
    max_leaves=12,
)


def _field_value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    """A value for one field: often of the right JSON type but a nasty value, sometimes any."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        right: st.SearchStrategy[Any] = st.dictionaries(
            texts, _single_value(value_field, depth), max_size=3
        )
    elif field.is_repeated:
        right = st.lists(_single_value(field, depth), max_size=3)
    else:
        right = _single_value(field, depth)
    return st.one_of(right, right, json_values)


def _single_value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if depth > 3 or field.message_type.full_name.startswith("google.protobuf."):
            return json_values
        return _shaped(field.message_type, depth + 1)
    if field.type == FieldDescriptor.TYPE_ENUM:
        words = [v.name for v in field.enum_type.values]
        return st.one_of(st.sampled_from(words), texts, numbers)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.one_of(st.booleans(), scalars)
    if field.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        return texts
    return numbers


def _shaped(desc: Descriptor, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object shaped like `desc`: some of its fields, each with a fuzzed value."""
    fields = {f.name: _field_value(f, depth) for f in desc.fields}
    return st.fixed_dictionaries({}, optional=fields)


# --------------------------------------------------------------------------------------------
# REST.


def _route_id(route: routes.RouteDescription) -> str:
    return f"{route.http_method} {route.template}"


def _body_strategy(route: routes.RouteDescription) -> st.SearchStrategy[bytes | None]:
    if route.body == "*":
        shaped: st.SearchStrategy[Any] = _shaped(route.method.input_type)
    elif route.body:
        shaped = _shaped(route.method.input_type.fields_by_name[route.body].message_type)
    else:
        shaped = st.just(None)
    encoded = st.one_of(shaped, shaped, json_values).map(_encode)
    raw = st.sampled_from(
        [
            b"[" * 100_000,
            b'{"a":' * 50_000,
            b"1" + b"0" * 5000,
            b'{"name": "\xff\xfe"}',
            b'{"name": "\\udcff"}',
            b"\x1f\x8b\x08\x00garbage",
            b"{",
            b"NaN",
        ]
    )
    return st.one_of(encoded, encoded, encoded, raw, st.binary(max_size=64))


def _encode(document: Any) -> bytes | None:
    if document is None:
        return None
    return json.dumps(document).encode().replace(f'"{HUGE_NUMBER}"'.encode(), HUGE_DIGITS)


def _query_strategy(route: routes.RouteDescription) -> st.SearchStrategy[list[tuple[str, str]]]:
    names = [f.name for f in route.method.input_type.fields] + ["page_token", "x", "a.b"]
    return st.lists(st.tuples(st.sampled_from(names), texts), max_size=3)


HEADER_SETS = [
    {},
    {"content-encoding": b"gzip"},
    {"content-encoding": b"deflate"},
    {"content-encoding": b"br"},
    {"content-encoding": b"identity, gzip"},
    {"content-type": b"text/plain"},
    {"content-type": b"application/json; charset=latin-1"},
    {"authorization": b"Bearer \xff\xfe\xfd"},
    {"authorization": b"Bearer " + ADMIN_TOKEN.encode() + b"\xc3"},
    {"authorization": b"Basic dXNlcjpwYXNz"},
    {"authorization": b"Bearer"},
    {"authorization": b"Bearer " + b"x" * 8000},
    {"authorization": None},
    {"x-forwarded-for": b"\xff"},
]


def _quote(text: str) -> str:
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe="")


def _path(route: routes.RouteDescription, values: list[str]) -> str:
    path = route.template
    for variable, value in zip(route.path_variables, values, strict=True):
        path = path.replace(f"{{{variable}}}", _quote(value), 1)
    return path


# aiohttp's request-line limit: past it the protocol refuses the request without the hub.
AIOHTTP_MAX_LINE = 8190


class _Http:
    """Raw requests, one connection each: a malformed request may leave a kept-alive
    connection in aiohttp's lingering close, which would only slow the next case down."""

    def __init__(self, port: int) -> None:
        self.port = port

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, bytes | None]
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            sent = {"authorization": b"Bearer " + ADMIN_TOKEN.encode(), **headers}
            for name, value in sent.items():
                if value is not None:
                    conn.putheader(name, value)
            conn.putheader("content-length", str(len(body or b"")))
            conn.putheader("connection", "close")
            # The hub may answer before the request is all sent (a request line past aiohttp's
            # limit is refused at once, and the connection closed): read that answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.endheaders(body or b"")
            try:
                response = conn.getresponse()
            except ConnectionResetError:
                if len(path) > AIOHTTP_MAX_LINE:
                    return 400, b""  # refused by the protocol; the reset lost its answer
                raise
            if response.getheader("Content-Type") == "text/event-stream":
                return response.status, response.readline()  # a stream: it has begun well
            return response.status, response.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def http_client(fuzz_hub: tuple[Hub, _LogTrap]) -> _Http:
    return _Http(fuzz_hub[0].http_port)


def _check_http(status: int, payload: bytes, what: str) -> None:
    assert status < 500, f"{what} -> {status}: {payload[:500]!r}"
    if status >= 400:
        assert len(payload) <= MAX_ERROR_BYTES, f"{what} -> {len(payload)} bytes of error"
        if payload.startswith(b"{"):
            error = json.loads(payload)["error"]
            assert error["message"], what


@pytest.mark.parametrize("route", ROUTES, ids=_route_id)
def test_no_rest_request_gets_a_5xx_or_a_traceback(
    route: routes.RouteDescription, fuzz_hub: tuple[Hub, _LogTrap], http_client: _Http
) -> None:
    @FUZZ
    @given(
        values=st.lists(
            texts, min_size=len(route.path_variables), max_size=len(route.path_variables)
        ),
        body=_body_strategy(route),
        query=_query_strategy(route),
        headers=st.sampled_from(HEADER_SETS),
        suffix=st.sampled_from(["", "", "", "/", "%0A", "/..", ":verb", "//"]),
    )
    def run(
        values: list[str],
        body: bytes | None,
        query: list[tuple[str, str]],
        headers: dict[str, bytes | None],
        suffix: str,
    ) -> None:
        path = _path(route, values) + suffix
        if query:
            path += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in query)
        status, payload = http_client.send(route.http_method, path, body, headers)
        CASES["rest"] += 1
        _check_http(status, payload, f"{route.http_method} {path[:200]} body={body!r:.200}")

    run()
    _no_trouble_logged(fuzz_hub[1])


# --------------------------------------------------------------------------------------------
# gRPC: the control service.


def _string_field_numbers(desc: Descriptor) -> list[int]:
    return [f.number for f in desc.fields if f.cpp_type == FieldDescriptor.CPPTYPE_STRING]


def _bad_utf8(number: int) -> bytes:
    payload = b"ok\xff\xfe"
    return bytes([(number << 3) | 2, len(payload)]) + payload


def _wire_strategy(desc: Descriptor) -> st.SearchStrategy[bytes]:
    strings = _string_field_numbers(desc) or [1]
    return st.one_of(
        st.binary(max_size=200),
        st.sampled_from(strings).map(_bad_utf8),
        st.sampled_from([b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05ab", b"\xff", b"\x08"]),
    )


def _typed_strategy(desc: Descriptor) -> st.SearchStrategy[bytes]:
    """A well-formed message of the request type with nasty values (ints in range)."""
    message_class = message_factory.GetMessageClass(desc)

    def build(document: dict[str, Any]) -> bytes:
        message = message_class()
        _fill(message, document)
        return message.SerializeToString()

    return _shaped(desc).map(build)


def _fill(message: Any, document: dict[str, Any]) -> None:
    # Set what protobuf accepts; skip what it refuses (a surrogate, a wrong type, out of range).
    for name, value in document.items():
        if not name.isascii():
            # No field has such a name; and upb's lookup of a lone surrogate raises SystemError
            # (whose note made hypothesis repr the whole strategy, past the machine's memory).
            continue
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            continue  # a key of a free-form JSON object
        try:
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                if isinstance(value, dict):
                    target = getattr(message, name)
                    for key, item in value.items():
                        _set_map(target, field, key, item)
            elif field.is_repeated:
                if isinstance(value, list):
                    for item in value:
                        _append(getattr(message, name), field, item)
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                if isinstance(value, dict) and not field.message_type.full_name.startswith(
                    "google.protobuf."
                ):
                    _fill(getattr(message, name), value)
            else:
                setattr(message, name, value)
        except (TypeError, ValueError, AttributeError, UnicodeError, OverflowError):
            continue


def _set_map(target: Any, field: FieldDescriptor, key: Any, item: Any) -> None:
    value_field = field.message_type.fields_by_name["value"]
    if value_field.type == FieldDescriptor.TYPE_MESSAGE:
        if isinstance(item, dict):
            _fill(target[key], item)
    else:
        target[key] = item


def _append(target: Any, field: FieldDescriptor, item: Any) -> None:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if isinstance(item, dict):
            _fill(target.add(), item)
    else:
        target.append(item)


def _grpc_check(error: grpc.RpcError, what: str) -> None:
    assert error.code() not in BAD_GRPC_CODES, f"{what}: {error.code()} {error.details()!r:.300}"
    assert len((error.details() or "").encode()) <= MAX_ERROR_BYTES, what


@pytest.fixture(scope="module")
def grpc_channel(fuzz_hub: tuple[Hub, _LogTrap]) -> Iterator[grpc.Channel]:
    channel = grpc.insecure_channel(fuzz_hub[0].grpc_target)
    yield channel
    channel.close()


@pytest.mark.parametrize("method", list(CONTROL.methods), ids=lambda m: m.name)
def test_no_control_rpc_gets_unknown_or_internal(
    method: MethodDescriptor, fuzz_hub: tuple[Hub, _LogTrap], grpc_channel: grpc.Channel
) -> None:
    metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
    if method.server_streaming:
        streamed = grpc_channel.unary_stream(f"/{CONTROL.full_name}/{method.name}")

        def call(payload: bytes, *, metadata: Any, timeout: float) -> None:
            # A stream that starts well does not end: its first message is the answer.
            responses = streamed(payload, metadata=metadata, timeout=timeout)
            next(responses, None)
            responses.cancel()
    else:
        call = grpc_channel.unary_unary(f"/{CONTROL.full_name}/{method.name}")

    @FUZZ
    @given(
        payload=st.one_of(
            _wire_strategy(method.input_type),
            _typed_strategy(method.input_type),
            _typed_strategy(method.input_type),
        )
    )
    def run(payload: bytes) -> None:
        CASES["grpc"] += 1
        try:
            call(payload, metadata=metadata, timeout=30)
        except grpc.RpcError as error:
            _grpc_check(error, f"{method.name}({payload!r:.200})")

    run()
    _no_trouble_logged(fuzz_hub[1])


def test_a_large_control_call_without_a_token_is_refused_before_it_is_read(
    fuzz_hub: tuple[Hub, _LogTrap], grpc_channel: grpc.Channel
) -> None:
    call = grpc_channel.unary_unary(f"/{CONTROL.full_name}/CreateProject")
    payload = control_pb2.CreateProjectRequest(
        project={"name": "x" * (8 * 1024 * 1024)}
    ).SerializeToString()
    with pytest.raises(grpc.RpcError) as caught:
        call(payload, timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    CASES["grpc"] += 1


# --------------------------------------------------------------------------------------------
# gRPC: the agent stream.

AGENT_KINDS = [f for f in sync_pb2.AgentMessage.DESCRIPTOR.oneofs_by_name["kind"].fields]


def _stream(channel: grpc.Channel, token: str, messages: list[bytes]) -> grpc.RpcError | None:
    call = channel.stream_stream("/wingsmith.v1.ClusterSync/Sync")
    responses = call(iter(messages), metadata=(("authorization", f"Bearer {token}"),), timeout=10)
    try:
        for _ in responses:
            pass
    except grpc.RpcError as error:
        return error
    return None


@pytest.fixture(scope="module")
def stream_token(fuzz_hub: tuple[Hub, _LogTrap]) -> str:
    return fuzz_hub[0].register_cluster("fz-stream")


def _hello() -> bytes:
    hello = sync_pb2.Hello(cluster_id="fz-stream", agent_version="fuzz", agent_instance="fz-1")
    return sync_pb2.AgentMessage(hello=hello).SerializeToString()


@pytest.mark.parametrize("kind", AGENT_KINDS, ids=lambda f: f.name)
def test_no_stream_message_gets_unknown_or_internal(
    kind: FieldDescriptor,
    fuzz_hub: tuple[Hub, _LogTrap],
    grpc_channel: grpc.Channel,
    stream_token: str,
) -> None:
    def as_agent_message(inner: bytes) -> bytes:
        tag = (kind.number << 3) | 2
        return _varint(tag) + _varint(len(inner)) + inner

    @FUZZ
    @given(
        first_is_hello=st.booleans(),
        payload=st.one_of(
            _wire_strategy(kind.message_type).map(as_agent_message),
            _typed_strategy(kind.message_type).map(as_agent_message),
            _typed_strategy(kind.message_type).map(as_agent_message),
            st.binary(max_size=64),
        ),
    )
    def run(first_is_hello: bool, payload: bytes) -> None:
        CASES["stream"] += 1
        messages = [_hello(), payload] if first_is_hello else [payload]
        error = _stream(grpc_channel, stream_token, messages)
        if error is not None:
            _grpc_check(error, f"stream {kind.name}({payload!r:.200})")

    run()
    _no_trouble_logged(fuzz_hub[1])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def test_fuzz_figures(fuzz_hub: tuple[Hub, _LogTrap]) -> None:
    """Runs last in this file: every route, RPC and message kind got its share of cases."""
    expected = {
        "rest": len(ROUTES) * EXAMPLES,
        "grpc": len(CONTROL.methods) * EXAMPLES,
        "stream": len(AGENT_KINDS) * EXAMPLES,
    }
    print(f"fuzz cases: {dict(CASES)} over {len(ROUTES)} routes, {len(CONTROL.methods)} RPCs")
    for kind, count in expected.items():
        if CASES[kind]:  # zero when -k left that part out
            assert CASES[kind] >= count * 0.8, (kind, CASES[kind], count)
    _no_trouble_logged(fuzz_hub[1])


# --------------------------------------------------------------------------------------------
# The inputs that once broke the hub (issue 13), kept as fixed cases beside the generated ones.


def _page_token(after: str) -> str:
    raw = json.dumps({"after": after}).encode()  # "\udcff" is written as its JSON escape
    return urllib.parse.quote(base64.urlsafe_b64encode(raw).decode())


KNOWN_BAD_REQUESTS = [
    ("POST", "/v1/projects", b'{"name": "q", "quotas": {"H100": ' + HUGE_DIGITS + b"}}", 400),
    ("GET", "/v1/projects?page_size=" + "9" * 5000, None, 400),
    ("GET", "/v1/deployments?page_size=-" + "9" * 5000, None, 400),
    ("POST", "/v1/projects", b'{"name": "\\udcff"}', 400),
    ("POST", "/v1/projects", b'{"name": "ok", "quotas": {"\\udcff": 1}}', 400),
    ("POST", "/v1/clusters", b'{"cluster_id": "c", "labels": {"k": "\\ud800"}}', 400),
    ("POST", "/v1/projects", b"[" * 100_000 + b"]" * 100_000, 400),
    ("POST", "/v1/projects", b'{"name": {"a": ' * 20_000 + b"1" + b"}" * 20_001, 400),
    ("GET", "/v1/projects?page_token=" + _page_token("\udcff"), None, 400),
    ("GET", "/v1/workloads?page_token=" + _page_token("\ud800x"), None, 400),
    ("POST", "/v1/projects", b'{"name": "nl\\n"}', 400),
    ("POST", "/v1/clusters", b'{"cluster_id": "east\\n"}', 400),
    ("POST", "/v1/projects", b'{"name": "ok-q", "quotas": {"H100\\n": 1}}', 400),
    ("POST", "/v1/clusters", b'{"cluster_id": "c-l", "labels": {"k": "v\\n"}}', 400),
    ("POST", "/v1/clusters", b'{"cluster_id": "c-m", "labels": {"k\\n": "v"}}', 400),
    # A control character in any string, a path value included, is a 400 naming the field
    # (docs/rest.md "String fields"); it was a 404 before the sweep.
    ("GET", "/v1/projects/nl%0A", None, 400),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    KNOWN_BAD_REQUESTS,
    ids=[f"{m} {p[:40]} {(b or b'')[:30]!r}" for m, p, b, _ in KNOWN_BAD_REQUESTS],
)
def test_the_inputs_that_once_got_a_500_are_refused(
    method: str,
    path: str,
    body: bytes | None,
    status: int,
    fuzz_hub: tuple[Hub, _LogTrap],
    http_client: _Http,
) -> None:
    got, payload = http_client.send(method, path, body, {})
    assert got == status, payload[:300]
    assert len(payload) <= MAX_ERROR_BYTES
    _no_trouble_logged(fuzz_hub[1])


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": b"Bearer \xff\xfe"},
        {"content-encoding": b"gzip"},
        {"content-encoding": b"deflate"},
    ],
    ids=["auth-not-utf8", "gzip-lie", "deflate-lie"],
)
def test_lying_or_undecodable_headers_get_a_4xx(
    headers: dict[str, bytes | None], fuzz_hub: tuple[Hub, _LogTrap], http_client: _Http
) -> None:
    status, payload = http_client.send("POST", "/v1/projects", b'{"name": "lie"}' * 50, headers)
    assert 400 <= status < 500, payload[:300]
    _no_trouble_logged(fuzz_hub[1])


@pytest.mark.parametrize("coding", [b"gzip", b"deflate", b"br", b"identity, gzip"])
def test_a_compressed_body_is_refused_at_once_every_time(
    coding: bytes, fuzz_hub: tuple[Hub, _LogTrap]
) -> None:
    # A body that lies about its coding once left about one request in four waiting for ever
    # (aiohttp decoded it and its handler never saw the end): 40 tries, each answered.
    for _ in range(40):
        conn = http.client.HTTPConnection("127.0.0.1", fuzz_hub[0].http_port, timeout=5)
        try:
            conn.putrequest("POST", "/v1/deployments/%20/authority", skip_accept_encoding=True)
            conn.putheader("authorization", f"Bearer {ADMIN_TOKEN}")
            conn.putheader("content-encoding", coding)
            conn.putheader("content-length", "2")
            conn.putheader("connection", "close")
            conn.endheaders(b"{}")
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        assert response.status == 415, payload[:300]
        assert b"uncompressed" in payload
        assert response.getheader("accept-encoding") == "identity"
    _no_trouble_logged(fuzz_hub[1])


def test_an_error_never_repeats_a_huge_input(
    fuzz_hub: tuple[Hub, _LogTrap], http_client: _Http, grpc_channel: grpc.Channel
) -> None:
    name = "x" * 900_000
    status, payload = http_client.send(
        "POST", "/v1/projects", json.dumps({"name": name}).encode(), {}
    )
    assert status == 400 and len(payload) <= MAX_ERROR_BYTES
    # 7,000 characters: under aiohttp's request-line limit, so the hub itself answers.
    status, payload = http_client.send("GET", f"/v1/projects/{'y' * 7000}", None, {})
    assert status == 404 and len(payload) <= MAX_ERROR_BYTES
    call = grpc_channel.unary_unary(f"/{CONTROL.full_name}/GetProject")
    request = control_pb2.GetProjectRequest(name="z" * 100_000).SerializeToString()
    with pytest.raises(grpc.RpcError) as caught:
        call(request, metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),), timeout=30)
    _grpc_check(caught.value, "GetProject with a 100 KB name")


def test_a_project_holds_at_most_64_quota_classes(
    fuzz_hub: tuple[Hub, _LogTrap], http_client: _Http
) -> None:
    quotas = {f"class-{i}": 1 for i in range(20_000)}
    body = json.dumps({"name": "many-classes", "quotas": quotas}).encode()
    status, payload = http_client.send("POST", "/v1/projects", body, {})
    assert status == 400, payload[:300]
    assert b"64" in payload


def test_a_client_that_hangs_up_mid_body_is_no_error_of_the_hub(
    fuzz_hub: tuple[Hub, _LogTrap],
) -> None:
    hub = fuzz_hub[0]
    with socket.create_connection(("127.0.0.1", hub.http_port), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/projects HTTP/1.1\r\nHost: hub\r\n"
            + f"Authorization: Bearer {ADMIN_TOKEN}\r\n".encode()
            + b'Content-Length: 1000\r\n\r\n{"name"'
        )
        time.sleep(0.2)  # the hub is reading the body when the client goes
    wait_for_quiet = time.monotonic() + 1.0
    while time.monotonic() < wait_for_quiet and not fuzz_hub[1].caught:
        time.sleep(0.05)
    _no_trouble_logged(fuzz_hub[1])
    assert hub.get(f"/v1/projects/{SEED_PROJECT}")["name"] == SEED_PROJECT
