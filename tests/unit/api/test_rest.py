"""The REST gateway over ControlService: real aiohttp server, real HTTP client, fake dispatch."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from google.api import annotations_pb2
from google.protobuf.descriptor import MethodDescriptor

from hub import errors
from hub.api import rest
from wingsmith.v1 import control_pb2
from wingsmith.v1 import resources_pb2 as pb

from . import builders
from .server import FakeDispatch, Reply, call, serving

CONTROL = control_pb2.DESCRIPTOR.services_by_name["ControlService"]
AUTH = {"Authorization": "Bearer admin-token"}

_dispatch = FakeDispatch()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    app = rest.build_rest_app(services=[CONTROL], dispatch=_dispatch, stream=_dispatch.stream)
    with serving(app) as url:
        yield url


@pytest.fixture
def dispatch() -> Iterator[FakeDispatch]:
    _dispatch.reset()
    yield _dispatch
    _dispatch.reset()


def _rule(method: MethodDescriptor) -> Any:
    return method.GetOptions().Extensions[annotations_pb2.http]


def _concrete(template: str) -> str:
    return re.sub(r"\{[^}]*\}", "x1", template)


def _error(reply: Reply) -> dict[str, Any]:
    assert set(reply.body) == {"error"}
    error: dict[str, Any] = reply.body["error"]
    assert set(error) == {"code", "status", "message"}
    assert error["code"] == reply.status
    return error


# --------------------------------------------------------------------------------------------
# Every RPC is routed


@pytest.mark.parametrize("method", list(CONTROL.methods), ids=lambda m: m.name)
def test_every_control_rpc_has_an_http_rule_that_reaches_its_handler(
    base: str, dispatch: FakeDispatch, method: MethodDescriptor
) -> None:
    options = method.GetOptions()
    assert options.HasExtension(annotations_pb2.http), f"{method.name} has no google.api.http"
    rule = _rule(method)
    verb = rule.WhichOneof("pattern")
    body = {} if rule.body else None

    reply = call(base, verb.upper(), _concrete(getattr(rule, verb)), body=body, headers=AUTH)

    assert reply.status == 200, reply.body
    assert dispatch.last.method.full_name == method.full_name
    assert type(dispatch.last.request).DESCRIPTOR.full_name == method.input_type.full_name


# --------------------------------------------------------------------------------------------
# Binding


def test_path_variables_bind_url_decoded_to_their_fields(base: str, dispatch: FakeDispatch) -> None:
    call(base, "GET", "/v1/workloads/llama%2F70b%20x")
    assert dispatch.last.request == control_pb2.GetWorkloadRequest(ref="llama/70b x")

    call(base, "GET", "/v1/clusters/east-1")
    assert dispatch.last.request == control_pb2.GetClusterRequest(cluster_id="east-1")


def test_a_body_field_rule_binds_the_json_body_to_that_field(
    base: str, dispatch: FakeDispatch
) -> None:
    project = {"name": "team-a", "quotas": {"H100-80GB": 16, "A100-40GB": 4}}

    reply = call(base, "POST", "/v1/projects", body=project)

    assert reply.status == 200
    assert dispatch.last.request == control_pb2.CreateProjectRequest(
        project=pb.Project(name="team-a", quotas={"H100-80GB": 16, "A100-40GB": 4})
    )


def test_a_workload_body_is_read_with_enum_words(base: str, dispatch: FakeDispatch) -> None:
    body = {
        "name": "llama-70b",
        "project": "team-a",
        "replicas": 4,
        "device_class": "H100-80GB",
        "serving": {"engine": "vllm", "mode": "disaggregated", "router_mode": "ROUTER_MODE_KV"},
        "placement": {"clusters": ["east", "west"]},
    }

    call(base, "POST", "/v1/workloads", body=body)

    workload = dispatch.last.request.workload  # type: ignore[attr-defined]
    assert workload.serving.engine == pb.ENGINE_VLLM
    assert workload.serving.mode == pb.SERVING_MODE_DISAGGREGATED
    assert workload.serving.router_mode == pb.ROUTER_MODE_KV
    assert list(workload.placement.clusters) == ["east", "west"]


def test_query_parameters_bind_to_the_list_filters(base: str, dispatch: FakeDispatch) -> None:
    call(base, "GET", "/v1/deployments?workload_id=wl_1&cluster_id=east&page_size=50")

    assert dispatch.last.request == control_pb2.ListDeploymentsRequest(
        workload_id="wl_1", cluster_id="east", page_size=50
    )


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({"replicas": 6}, ["replicas"]),
        ({"serving": {"engine_version": "0.12"}}, ["serving.engine_version"]),
        ({"placement": {"clusters": ["a"]}}, ["placement.clusters"]),
        ({"placement": {"cluster_selector": {"tier": "gold"}}}, ["placement.cluster_selector"]),
        (
            {"replicas": 2, "serving": {"engine": "vllm", "kv_cache": {"dtype": "fp8"}}},
            ["replicas", "serving.engine", "serving.kv_cache.dtype"],
        ),
        ({"serving": {}}, ["serving"]),
        ({"serving": None}, ["serving"]),
        ({"serving": {"engineVersion": "0.12"}}, ["serving.engine_version"]),
        ({}, []),
    ],
)
def test_patch_infers_the_update_mask_from_the_fields_present_in_the_body(
    base: str, dispatch: FakeDispatch, body: dict[str, Any], paths: list[str]
) -> None:
    reply = call(base, "PATCH", "/v1/workloads/llama-70b", body=body)

    assert reply.status == 200, reply.body
    request = dispatch.last.request
    assert isinstance(request, control_pb2.UpdateWorkloadRequest)
    assert request.ref == "llama-70b"
    assert request.HasField("update_mask")
    assert list(request.update_mask.paths) == paths


def test_a_map_in_the_body_is_one_mask_path(base: str, dispatch: FakeDispatch) -> None:
    call(base, "PATCH", "/v1/projects/team-a", body={"quotas": {"H100-80GB": 8}})

    request = dispatch.last.request
    assert isinstance(request, control_pb2.UpdateProjectRequest)
    assert list(request.update_mask.paths) == ["quotas"]
    assert dict(request.project.quotas) == {"H100-80GB": 8}


def test_an_update_mask_in_the_query_wins_over_inference(base: str, dispatch: FakeDispatch) -> None:
    body = {"replicas": 6, "serving": {"engine_version": "0.12"}}

    call(base, "PATCH", "/v1/workloads/llama-70b?update_mask=replicas", body=body)

    request = dispatch.last.request
    assert isinstance(request, control_pb2.UpdateWorkloadRequest)
    assert list(request.update_mask.paths) == ["replicas"]
    assert request.workload.serving.engine_version == "0.12"


def test_the_authorization_header_reaches_dispatch_as_lower_case_metadata(
    base: str, dispatch: FakeDispatch
) -> None:
    call(base, "GET", "/v1/projects", headers={"Authorization": "Bearer s3cret", "X-Trace": "t1"})

    assert dispatch.last.metadata["authorization"] == "Bearer s3cret"
    assert dispatch.last.metadata["x-trace"] == "t1"


# --------------------------------------------------------------------------------------------
# Responses


def test_the_response_is_the_rest_json_of_the_message(base: str, dispatch: FakeDispatch) -> None:
    dispatch.replies["GetDeployment"] = pb.Deployment(
        deployment_id="dep_1", admission_phase=pb.ADMISSION_PHASE_PENDING, generation=2**53 + 1
    )

    reply = call(base, "GET", "/v1/deployments/dep_1")

    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.body["admission_phase"] == "pending"
    assert reply.body["status"] is None
    assert reply.body["generation"] == 2**53 + 1


def test_a_full_deployment_comes_back_as_the_mapping_writes_it(
    base: str, dispatch: FakeDispatch
) -> None:
    dispatch.replies["GetDeployment"] = builders.deployment()

    reply = call(base, "GET", "/v1/deployments/dep_1")

    assert reply.body["authority"] == "observed"
    assert reply.body["live_digests"] == {"svg_0000": 1, "svg_ab12": 2}
    assert reply.body["status"]["observe_time"] == "2023-11-14T22:16:40Z"


def test_an_empty_response_is_an_empty_object(base: str, dispatch: FakeDispatch) -> None:
    reply = call(base, "DELETE", "/v1/projects/team-a")

    assert (reply.status, reply.body) == (200, {})


# --------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (errors.NotFound("workload", "llama"), 404, "NOT_FOUND"),
        (errors.Unauthenticated("missing bearer token"), 401, "UNAUTHENTICATED"),
        (errors.PermissionDenied("not an admin"), 403, "PERMISSION_DENIED"),
        (errors.AlreadyExists("project", "team-a"), 409, "ALREADY_EXISTS"),
        (errors.FailedPrecondition("project has workloads", ["llama"]), 409, "FAILED_PRECONDITION"),
        (errors.Conflict("concurrent update"), 409, "ABORTED"),
        (errors.InvalidArgument("workload.replicas", "must be >= 0"), 400, "INVALID_ARGUMENT"),
        (errors.ResourceExhausted("slow down"), 429, "RESOURCE_EXHAUSTED"),
        (errors.StoreError("database is locked"), 503, "UNAVAILABLE"),
    ],
)
def test_a_wingsmith_error_from_dispatch_becomes_its_status_and_the_error_shape(
    base: str, dispatch: FakeDispatch, error: errors.WingsmithError, status: int, code: str
) -> None:
    dispatch.replies["GetWorkload"] = error

    reply = call(base, "GET", "/v1/workloads/llama")

    assert reply.status == status
    assert _error(reply) == {"code": status, "status": code, "message": error.message}


def test_any_other_exception_is_a_logged_500_that_leaks_nothing(
    base: str, dispatch: FakeDispatch, caplog: pytest.LogCaptureFixture
) -> None:
    dispatch.replies["GetWorkload"] = RuntimeError("secret detail at /srv/hub.py")

    with caplog.at_level(logging.ERROR, logger="hub.api.rest"):
        reply = call(base, "GET", "/v1/workloads/llama")

    assert reply.status == 500
    assert _error(reply)["status"] == "INTERNAL"
    assert "secret" not in reply.body["error"]["message"]
    assert any(r.exc_info and r.name == "hub.api.rest" for r in caplog.records)


@pytest.mark.parametrize(
    ("method", "path", "raw", "field"),
    [
        ("POST", "/v1/workloads", b'{"name": "llama",', ""),
        ("POST", "/v1/workloads", b'{"name": "a", "name": "b"}', ""),
        ("POST", "/v1/workloads", b'{"replicas": NaN}', ""),
        ("POST", "/v1/workloads", b"\xff\xfe", ""),
        ("POST", "/v1/workloads", b'{"nmae": "llama"}', "workload.nmae"),
        ("POST", "/v1/workloads", b'{"serving": {"engine": "vlm"}}', "workload.serving.engine"),
        ("POST", "/v1/workloads", b'{"replicas": "six"}', "workload.replicas"),
        ("PATCH", "/v1/projects/a", b'{"quotas": {"H100": -1.5}}', 'project.quotas["H100"]'),
        ("GET", "/v1/deployments?workload=wl_1", None, "workload"),
        ("GET", "/v1/deployments?page_size=ten", None, "page_size"),
        ("GET", "/v1/deployments?cluster_id=a&cluster_id=b", None, "cluster_id"),
        ("GET", "/v1/workloads/llama?ref=other", None, "ref"),
        ("PATCH", "/v1/workloads/llama?workload.replicas=3", b"{}", "workload.replicas"),
        ("GET", "/v1/projects", b'{"page_size": 5}', ""),
        ("DELETE", "/v1/projects/a", b'{"force": true}', ""),
    ],
)
def test_a_bad_request_is_a_400_naming_the_field_and_never_reaches_dispatch(
    base: str, dispatch: FakeDispatch, method: str, path: str, raw: bytes | None, field: str
) -> None:
    reply = call(base, method, path, raw=raw)

    assert reply.status == 400
    error = _error(reply)
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith(f"{field}: " if field else "")
    assert dispatch.calls == []


def test_a_malformed_json_body_says_so(base: str, dispatch: FakeDispatch) -> None:
    reply = call(base, "POST", "/v1/projects", raw=b"{not json")

    assert reply.status == 400
    assert "malformed JSON body" in _error(reply)["message"]


def test_a_known_path_with_the_wrong_method_is_405_with_allow(
    base: str, dispatch: FakeDispatch
) -> None:
    collection = call(base, "DELETE", "/v1/projects")
    resource = call(base, "PUT", "/v1/workloads/llama")

    assert (collection.status, collection.headers["Allow"]) == (405, "GET, POST")
    assert (resource.status, resource.headers["Allow"]) == (405, "DELETE, GET, PATCH")
    assert _error(resource)["code"] == 405
    assert dispatch.calls == []


@pytest.mark.parametrize(
    "path", ["/", "/v2/projects", "/v1/projects/a/b", "/v1/projects/", "/v1//projects", "/v1"]
)
def test_an_unknown_path_is_a_json_404(base: str, dispatch: FakeDispatch, path: str) -> None:
    reply = call(base, "GET", path)

    assert reply.status == 404
    assert _error(reply)["status"] == "NOT_FOUND"
    assert dispatch.calls == []


def test_a_path_value_with_a_newline_still_reaches_the_gateway(
    base: str, dispatch: FakeDispatch
) -> None:
    # aiohttp's catch-all route once matched `.*`, which stops at a decoded newline: such a
    # path got aiohttp's own text/plain 404 instead of the gateway (found by schemathesis).
    reply = call(base, "GET", "/v1/projects/a%0Ab")
    assert reply.status == 200, reply.body
    assert dispatch.last.request == control_pb2.GetProjectRequest(name="a\nb")
    reply = call(base, "GET", "/v1/nothing%0Ahere")
    assert _error(reply)["status"] == "NOT_FOUND"


# --------------------------------------------------------------------------------------------
# Server-streaming methods: Server-Sent Events (hub/api/sse.py)


def test_a_server_stream_is_served_as_server_sent_events_with_the_revision_as_id(
    base: str, dispatch: FakeDispatch
) -> None:
    dispatch.replies["Watch"] = control_pb2.WatchEvent(
        type=control_pb2.WatchEvent.TYPE_ADDED, revision=7, cluster=pb.Cluster(cluster_id="east")
    )
    reply = call(base, "GET", "/v1/watch?kinds=clusters", headers=AUTH)
    assert reply.status == 200 and reply.headers["Content-Type"] == "text/event-stream"
    lines = reply.body.strip().split("\n")
    assert lines[:2] == ["id: 7", "event: added"]
    assert lines[2].startswith("data: {") and '"cluster_id":"east"' in lines[2]
    assert list(dispatch.last.request.kinds) == ["clusters"]


def test_last_event_id_resumes_a_stream_unless_the_query_names_a_revision(
    base: str, dispatch: FakeDispatch
) -> None:
    call(base, "GET", "/v1/watch", headers={**AUTH, "Last-Event-ID": "42"})
    assert dispatch.last.request.since_revision == 42
    call(base, "GET", "/v1/watch?since_revision=5", headers={**AUTH, "Last-Event-ID": "42"})
    assert dispatch.last.request.since_revision == 5
    reply = call(base, "GET", "/v1/watch", headers={**AUTH, "Last-Event-ID": "soon"})
    assert reply.status == 400 and "Last-Event-ID" in _error(reply)["message"]


def test_a_stream_refused_before_its_first_event_is_an_ordinary_json_error(
    base: str, dispatch: FakeDispatch
) -> None:
    dispatch.replies["Watch"] = errors.OutOfRange("since_revision 9 is no longer kept")
    reply = call(base, "GET", "/v1/watch?since_revision=9", headers=AUTH)
    assert reply.status == 410 and _error(reply)["status"] == "OUT_OF_RANGE"
