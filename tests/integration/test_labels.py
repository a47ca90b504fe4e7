"""Labels on workloads and projects, and label selectors on their lists, against a real hub:
set on create, changed by update mask, selected over REST (`?label_selector=`) and gRPC, and
refused with 400 / INVALID_ARGUMENT naming the field or parameter (docs/rest.md "Labels")."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from tests.harness import ADMIN_TOKEN, Hub, quotas_of, workload
from wingsmith.v1 import control_pb2, control_pb2_grpc, resources_pb2

AUTH = (("authorization", f"Bearer {ADMIN_TOKEN}"),)


@pytest.fixture
def stub(hub: Hub) -> Iterator[control_pb2_grpc.ControlServiceStub]:
    hub.register_cluster("east")
    for name, labels in (("search", {"team": "search"}), ("ads", {"team": "ads", "tier": "1"})):
        hub.post(
            "/v1/projects", {"name": name, "quotas": quotas_of({"H100_80GB": 64}), "labels": labels}
        )
    for name, project, labels in (
        ("a1", "search", {"app": "chat", "env": "prod"}),
        ("a2", "search", {"app": "chat", "env": "dev"}),
        ("a3", "ads", {"app": "rank"}),
        ("a4", "ads", {}),
    ):
        body = workload(name, project=project, replicas=0, clusters=("east",))
        hub.post("/v1/workloads", {**body, "labels": labels})
    channel = grpc.insecure_channel(hub.grpc_target)
    try:
        yield control_pb2_grpc.ControlServiceStub(channel)
    finally:
        channel.close()


def names(hub: Hub, path: str, selector: str, field: str, page_size: int = 0) -> list[str]:
    """Every page of a REST list with `label_selector`, joined."""
    found: list[str] = []
    token = ""
    while True:
        query: dict[str, Any] = {"label_selector": selector}
        if page_size:
            query["page_size"] = page_size
        if token:
            query["page_token"] = token
        page = hub.get(f"{path}?{urllib.parse.urlencode(query)}")
        found += [item["name"] for item in page.get(field, [])]
        token = page.get("next_page_token", "")
        if not token:
            return found


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a1", "a2", "a3", "a4"]),
        ("app=chat", ["a1", "a2"]),
        ("app==chat,env!=prod", ["a2"]),
        ("app!=chat", ["a3", "a4"]),
        ("env", ["a1", "a2"]),
        ("!app", ["a4"]),
    ],
)
def test_rest_lists_workloads_by_selector_on_every_page(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub, selector: str, expected: list[str]
) -> None:
    assert names(hub, "/v1/workloads", selector, "workloads") == expected
    # Pages of one: the selector is applied before the page is cut, so none is lost.
    assert names(hub, "/v1/workloads", selector, "workloads", page_size=1) == expected


def test_labels_are_stored_and_shown(hub: Hub, stub: control_pb2_grpc.ControlServiceStub) -> None:
    assert hub.get("/v1/workloads/a1")["labels"] == {"app": "chat", "env": "prod"}
    assert hub.get("/v1/projects/ads")["labels"] == {"team": "ads", "tier": "1"}
    assert names(hub, "/v1/projects", "team=ads", "projects") == ["ads"]
    assert names(hub, "/v1/projects", "!tier", "projects") == ["search"]


def test_grpc_lists_by_selector(hub: Hub, stub: control_pb2_grpc.ControlServiceStub) -> None:
    answer = stub.ListWorkloads(
        control_pb2.ListWorkloadsRequest(label_selector="app=chat", project="search", page_size=1),
        metadata=AUTH,
    )
    assert [w.name for w in answer.workloads] == ["a1"] and answer.next_page_token
    projects = stub.ListProjects(
        control_pb2.ListProjectsRequest(label_selector="tier=1"), metadata=AUTH
    )
    assert [p.name for p in projects.projects] == ["ads"]


def test_labels_change_by_update_mask_over_rest_and_grpc(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    changed = hub.patch("/v1/workloads/a4", {"labels": {"app": "rank", "env": "prod"}})
    assert changed["labels"] == {"app": "rank", "env": "prod"}
    assert changed["replicas"] == 0, "only the labels changed"
    assert names(hub, "/v1/workloads", "app=rank", "workloads") == ["a3", "a4"]
    request = control_pb2.UpdateWorkloadRequest(
        ref="a1",
        workload=resources_pb2.Workload(labels={"app": "search"}),
        update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
    )
    assert dict(stub.UpdateWorkload(request, metadata=AUTH).labels) == {"app": "search"}
    # An empty map under the mask clears them.
    cleared = control_pb2.UpdateProjectRequest(
        name="ads",
        project=resources_pb2.Project(),
        update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
    )
    answer = stub.UpdateProject(cleared, metadata=AUTH)
    assert dict(answer.labels) == {} and dict(answer.quotas) == {"H100-80GB": 64}
    assert hub.get("/v1/projects/ads").get("labels", {}) == {}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("GET", "/v1/workloads?label_selector=app%20in%20(a)", None, "label_selector"),
        ("GET", "/v1/projects?label_selector=team%3D", None, ""),
        ("GET", "/v1/projects?label_selector=%3Dx", None, "label_selector"),
        ("PATCH", "/v1/workloads/a1", {"labels": {"-bad": "v"}}, "workload.labels.-bad"),
        ("PATCH", "/v1/projects/ads", {"labels": {"k": "v" * 64}}, "project.labels.k"),
        ("POST", "/v1/projects", {"name": "p9", "labels": {"a/b/c": "v"}}, "project.labels.a/b/c"),
    ],
)
def test_bad_labels_and_selectors_are_400_naming_the_field(
    hub: Hub,
    stub: control_pb2_grpc.ControlServiceStub,
    method: str,
    path: str,
    body: Any,
    field: str,
) -> None:
    status, payload = hub.rest(method, path, body, check=False)
    if not field:  # "team=" is a valid selector: the empty value
        assert status == 200, payload
        return
    assert status == 400, payload
    assert field in str(payload), payload
    assert hub.get("/v1/workloads/a1")["labels"] == {"app": "chat", "env": "prod"}


def test_a_bad_selector_over_grpc_is_invalid_argument(
    hub: Hub, stub: control_pb2_grpc.ControlServiceStub
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListWorkloads(control_pb2.ListWorkloadsRequest(label_selector="a,,b"), metadata=AUTH)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "label_selector" in (caught.value.details() or "")
