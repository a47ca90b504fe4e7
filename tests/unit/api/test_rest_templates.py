"""The gateway is generic: template features and binding rules ControlService does not use.

Served from the test-only `wstest.Things` service (things.py), built from descriptors alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiohttp import web
from google.protobuf import empty_pb2

from hub.api import rest

from . import things
from .server import FakeDispatch, call, serving

_dispatch = FakeDispatch()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    app = rest.build_rest_app(services=[things.service("Things")], dispatch=_dispatch)
    with serving(app) as url:
        yield url


@pytest.fixture
def dispatch() -> Iterator[FakeDispatch]:
    _dispatch.reset()
    yield _dispatch
    _dispatch.reset()


def _request(dispatch: FakeDispatch) -> object:
    return dispatch.last.request


# --------------------------------------------------------------------------------------------
# Matching


@pytest.mark.parametrize(
    ("method", "path", "rpc"),
    [
        ("GET", "/v1/things/special", "GetSpecialThing"),
        ("GET", "/v1/things/ordinary", "GetThing"),
        ("GET", "/v1/things", "ListThings"),
        ("GET", "/v1/shelves/s1/things", "ListThings"),
        ("POST", "/v1/things/t1:archive", "ArchiveThing"),
        ("PURGE", "/v1/things/t1", "PurgeThing"),
        ("GET", "/v1/files/a/b/c.txt", "GetFile"),
        ("GET", "/v1/files", "GetFile"),
    ],
)
def test_each_rule_and_additional_binding_routes_to_its_method(
    base: str, dispatch: FakeDispatch, method: str, path: str, rpc: str
) -> None:
    reply = call(base, method, path, body={} if method == "POST" else None)

    assert reply.status == 200, reply.body
    assert dispatch.last.method.name == rpc


def test_a_literal_segment_beats_a_variable_but_only_for_methods_it_has(
    base: str, dispatch: FakeDispatch
) -> None:
    reply = call(base, "PATCH", "/v1/things/special", body={"count": 1})

    assert reply.status == 200
    assert dispatch.last.method.name == "UpdateThing"
    assert dispatch.last.request == things.ThingRequest(
        thing=things.Thing(name="special", count=1), update_mask={"paths": ["count"]}
    )


def test_a_known_verb_with_the_wrong_method_is_405_and_an_escaped_colon_is_data(
    base: str, dispatch: FakeDispatch
) -> None:
    wrong_method = call(base, "GET", "/v1/things/t1:archive")
    escaped = call(base, "GET", "/v1/things/t1%3Aarchive")

    assert (wrong_method.status, wrong_method.headers["Allow"]) == (405, "POST")
    assert escaped.status == 200
    assert dispatch.last.request == things.ThingRequest(thing=things.Thing(name="t1:archive"))


# --------------------------------------------------------------------------------------------
# Binding


def test_a_dotted_variable_binds_into_the_nested_message(base: str, dispatch: FakeDispatch) -> None:
    call(base, "GET", "/v1/things/t%2F1")

    assert dispatch.last.request == things.ThingRequest(thing=things.Thing(name="t/1"))


def test_a_multi_segment_variable_binds_the_segments_it_spans(
    base: str, dispatch: FakeDispatch
) -> None:
    call(base, "GET", "/v1/shelves/s1/things")
    assert dispatch.last.request == things.ThingRequest(parent="shelves/s1")

    call(base, "GET", "/v1/files/a/b/c.txt")
    assert dispatch.last.request == things.ThingRequest(path="a/b/c.txt")


def test_a_path_variable_wins_over_the_same_field_in_the_body(
    base: str, dispatch: FakeDispatch
) -> None:
    call(base, "PATCH", "/v1/things/t1", body={"name": "other", "count": 2})

    request = _request(dispatch)
    assert isinstance(request, things.ThingRequest)
    assert request.thing.name == "t1"
    assert list(request.update_mask.paths) == ["count", "name"]


def test_a_star_body_binds_the_whole_request_and_takes_no_query_parameters(
    base: str, dispatch: FakeDispatch
) -> None:
    call(base, "POST", "/v1/things/t1:archive", body={"validate_only": True, "tags": ["x"]})
    assert dispatch.last.request == things.ThingRequest(
        thing=things.Thing(name="t1"), validate_only=True, tags=["x"]
    )

    refused = call(base, "POST", "/v1/things/t1:archive?limit=3", body={})
    not_object = call(base, "POST", "/v1/things/t1:archive", body=[1])
    assert (refused.status, not_object.status) == (400, 400)


def test_query_parameters_bind_scalars_enums_repeated_and_nested_fields(
    base: str, dispatch: FakeDispatch
) -> None:
    query = (
        "validate_only=true&tags=a&tags=b,c&color=dark_blue&colors=red&colors=COLOR_DARK_BLUE"
        "&limit=9007199254740993&filter.min_count=3&since=2025-01-31T12:00:00Z&ratio=0.5"
        "&update_mask=thing.count,thing.inner.size"
    )

    reply = call(base, "GET", f"/v1/things?{query}")

    assert reply.status == 200, reply.body
    request = _request(dispatch)
    assert isinstance(request, things.ThingRequest)
    assert request.validate_only is True
    assert list(request.tags) == ["a", "b,c"]  # commas are data, never a separator
    assert request.color == 2
    assert list(request.colors) == [1, 2]
    assert request.limit == 2**53 + 1
    assert request.filter.min_count == 3
    assert request.since.seconds == 1_738_324_800
    assert request.ratio == 0.5
    assert list(request.update_mask.paths) == ["thing.count", "thing.inner.size"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("validate_only=yes", "validate_only"),
        ("limit=1e3", "limit"),
        ("limit=99999999999999999999", "limit"),
        ("color=green", "color"),
        ("colors=red&colors=teal", "colors[1]"),
        ("since=today", "since"),
        ("ratio=half", "ratio"),
        ("labels=a", "labels"),
        ("filter=a", "filter"),
        ("filter.max_count=3", "filter.max_count"),
        ("tags.x=1", "tags.x"),
        ("thing=t1", "thing"),
        ("parent=a&parent=b", "parent"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(
    base: str, dispatch: FakeDispatch, query: str, field: str
) -> None:
    reply = call(base, "GET", f"/v1/things?{query}")

    assert reply.status == 400, reply.body
    assert reply.body["error"]["message"].startswith(f"{field}: ")
    assert dispatch.calls == []


def test_a_query_parameter_bound_by_the_path_is_refused(base: str, dispatch: FakeDispatch) -> None:
    reply = call(base, "GET", "/v1/things/t1?thing.name=t2")

    assert reply.status == 400
    assert dispatch.calls == []


# --------------------------------------------------------------------------------------------
# Responses and rules


def test_response_body_answers_with_that_field_alone(base: str, dispatch: FakeDispatch) -> None:
    dispatch.replies["GetThingName"] = things.Thing(name="t1", count=3)

    reply = call(base, "GET", "/v1/names/t1")

    assert (reply.status, reply.body) == (200, "t1")


def test_a_custom_method_returning_empty_answers_an_empty_object(
    base: str, dispatch: FakeDispatch
) -> None:
    reply = call(base, "PURGE", "/v1/things/t1")

    assert (reply.status, reply.body) == (200, {})


def test_a_response_of_the_wrong_type_is_a_500(base: str, dispatch: FakeDispatch) -> None:
    dispatch.replies["GetThing"] = empty_pb2.Empty()

    reply = call(base, "GET", "/v1/things/t1")

    assert reply.status == 500


def test_extra_routes_are_matched_before_the_rules() -> None:
    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = rest.build_rest_app(
        services=[things.service("Things")],
        dispatch=FakeDispatch(),
        extra_routes=[web.get("/v1/things/healthz", health)],
    )
    with serving(app) as url:
        assert call(url, "GET", "/v1/things/healthz").body == {"ok": True}


@pytest.mark.parametrize(
    "service",
    ["RepeatedVariable", "UnknownVariable", "UnknownBody", "DuplicateRoute", "StreamingWithRule"],
)
def test_a_rule_the_gateway_cannot_serve_fails_at_build_time(service: str) -> None:
    with pytest.raises(ValueError):
        rest.build_rest_app(services=[things.service(service)], dispatch=FakeDispatch())
