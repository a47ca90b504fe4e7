"""Calls refused while their request is read or parsed leave an audit record, within a bound.

A real hub on 127.0.0.1:0: each request below is refused before any handler runs (an unknown
field in a PATCH body, a malformed JSON body, an unknown query parameter on a DELETE, gRPC
bytes that are not the method's message, a scoped token's call with an enum word that does
not exist). Each must leave one record naming who, which call and why; a flood of the same
refusal must not leave one record per request (docs/security.md "Refusals, bounded").
"""

from __future__ import annotations

import http.client
from typing import Any

import grpc
import pytest

from hub.service import access as access_service
from tests.harness import ADMIN_TOKEN, Hub, wait_until, workload


def audit(hub: Hub, **filters: str) -> list[dict[str, Any]]:
    query = "&".join(f"{key}={value}" for key, value in filters.items())
    return list(hub.get(f"/v1/audit?page_size=1000&{query}")["records"])


def raw(hub: Hub, method: str, path: str, body: bytes, *, token: str = ADMIN_TOKEN) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", hub.http_port, timeout=30)
    try:
        conn.request(
            method,
            path,
            body=body,
            headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
        )
        return conn.getresponse().status
    finally:
        conn.close()


def test_requests_refused_while_parsed_are_audited_with_who_what_and_why(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("a", H100_80GB=8)
    created = hub.post("/v1/workloads", workload("w1", project="a", tp=1))
    wl, ref = created["workload_id"], created["deployments"][0]["deployment_id"]
    operator = hub.post("/v1/tokens", {"name": "team-a", "role": "operator", "projects": ["a"]})

    assert raw(hub, "PATCH", f"/v1/workloads/{wl}", b'{"replicas": 2, "colour": "red"}') == 400
    assert raw(hub, "POST", "/v1/projects", b'{"name": "b", "quotas": {') == 400
    assert raw(hub, "DELETE", f"/v1/workloads/{wl}?force=true", b"") == 400
    status = raw(
        hub,
        "POST",
        f"/v1/deployments/{ref}/authority",
        b'{"authority": "sovereign"}',
        token=operator["secret"],
    )
    assert status == 400
    channel = grpc.insecure_channel(hub.grpc_target)
    try:
        call = channel.unary_unary("/wingsmith.v1.ControlService/DeleteProject")
        with pytest.raises(grpc.RpcError) as refused:
            call(b"\xff\xff\xff", metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Without a credential: refused before it is read, and names no one: not audited.
        with pytest.raises(grpc.RpcError):
            call(b"\xff\xff\xff")
    finally:
        channel.close()
    # Reads refused the same way are reads: not audited.
    assert raw(hub, "GET", "/v1/workloads?colour=red", b"") == 400

    records = wait_until(
        lambda: [r for r in audit(hub, outcome="INVALID_ARGUMENT")] or None,
        what="refusal records",
    )
    by_action = {(r["action"], r["actor"], r["edge"]): r for r in records}
    assert set(by_action) == {
        ("UpdateWorkload", "admin", "rest"),
        ("CreateProject", "admin", "rest"),
        ("DeleteWorkload", "admin", "rest"),
        ("SetDeploymentAuthority", "token/team-a", "rest"),
        ("DeleteProject", "admin", "grpc"),
    }, records
    assert "colour" in by_action["UpdateWorkload", "admin", "rest"]["message"]
    assert "malformed JSON" in by_action["CreateProject", "admin", "rest"]["message"]
    assert "force" in by_action["DeleteWorkload", "admin", "rest"]["message"]
    assert "sovereign" in by_action["SetDeploymentAuthority", "token/team-a", "rest"]["message"]
    assert "malformed request" in by_action["DeleteProject", "admin", "grpc"]["message"]
    assert by_action["UpdateWorkload", "admin", "rest"]["target"] == "workload"
    assert by_action["SetDeploymentAuthority", "token/team-a", "rest"]["role"] == "operator"


def test_a_flood_of_garbage_leaves_a_bounded_number_of_records(hub: Hub) -> None:
    flood = 4 * access_service.REFUSALS_PER_KEY
    for i in range(flood):
        assert raw(hub, "POST", "/v1/projects", b"{not json %d" % i) == 400
    records = audit(hub, action="CreateProject", outcome="INVALID_ARGUMENT")
    assert len(records) == access_service.REFUSALS_PER_KEY
    # Other callers and calls keep their own budget.
    assert raw(hub, "POST", "/v1/clusters", b"{") == 400
    assert len(audit(hub, action="CreateCluster", outcome="INVALID_ARGUMENT")) == 1
