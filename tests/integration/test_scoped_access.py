"""Scoped tokens and the audit log, walked over every control route of a real hub.

A fleet with two projects (a, b), one cluster with an agent, a workload in each project and an
unmanaged DGD the agent discovered. An operator of project a, a viewer and a second admin then
call every route in turn. `CALLS` names one request per ControlService method (a test fails if
an RPC is missing from it), aimed *outside* project a; the operator must be refused (403, a
message naming what it lacks) on every change there, and nothing of project b may move. Every
mutating call, allowed or refused, must leave an audit record naming who, what and the outcome.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from hub.service import access as access_service
from hub.service.context import Settings
from hub.store.port import open_store
from tests.harness import FAST, Hub, LoopThread, SimAgent, running_hub, wait_until, workload
from tests.integration.rawstream import RawStream
from tests.integration.test_adoption import legacy_dgd, seeded
from wingsmith.v1 import control_pb2, control_pb2_grpc

METHODS = [m.name for m in control_pb2.DESCRIPTOR.services_by_name["ControlService"].methods]


def fleet(hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path) -> dict[str, str]:
    """Projects a and b with a workload each on cluster east; returns refs by role."""
    token = hub.register_cluster("east")
    hub.create_project("a", H100_80GB=16)
    hub.create_project("b", H100_80GB=16)
    agents(cluster_id="east", token=token, seed_path=seeded(tmp_path, legacy_dgd()))
    a = hub.post("/v1/workloads", workload("aw", project="a", tp=1))
    b = hub.post("/v1/workloads", workload("bw", project="b", tp=1))
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")
    return {
        "a_workload": a["workload_id"],
        "b_workload": b["workload_id"],
        "b_deployment": b["deployments"][0]["deployment_id"],
        "a_deployment": a["deployments"][0]["deployment_id"],
        "discovered": hub.get("/v1/discovered")["discovered"][0]["discovered_id"],
        "agent_token": token,
    }


def make_token(hub: Hub, name: str, role: str, *projects: str) -> str:
    body: dict[str, Any] = {"name": name, "role": role}
    if projects:
        body["projects"] = list(projects)
    answer = hub.post("/v1/tokens", body)
    assert answer["token"]["name"] == name
    return str(answer["secret"])


def calls(refs: dict[str, str]) -> dict[str, tuple[str, str, Any]]:
    """One request per RPC, aimed outside project a (or at what only an admin may do)."""
    b_wl, b_dep = refs["b_workload"], refs["b_deployment"]
    discovered = refs["discovered"]
    return {
        "CreateProject": ("POST", "/v1/projects", {"name": "c", "quotas": {}}),
        "GetProject": ("GET", "/v1/projects/b", None),
        "ListProjects": ("GET", "/v1/projects", None),
        # Its own project: quota stays the admin's.
        "UpdateProject": ("PATCH", "/v1/projects/a", {"quotas": {"H100-80GB": 1000}}),
        "DeleteProject": ("DELETE", "/v1/projects/b", None),
        "CreateCluster": ("POST", "/v1/clusters", {"cluster_id": "west"}),
        "GetCluster": ("GET", "/v1/clusters/east", None),
        "ListClusters": ("GET", "/v1/clusters", None),
        "UpdateCluster": ("PATCH", "/v1/clusters/east", {"labels": {"region": "x"}}),
        "DeleteCluster": ("DELETE", "/v1/clusters/east", None),
        "RotateClusterToken": ("POST", "/v1/clusters/east:rotateToken", {}),
        "CordonCluster": ("POST", "/v1/clusters/east:cordon", {}),
        "UncordonCluster": ("POST", "/v1/clusters/east:uncordon", {}),
        "DrainCluster": ("POST", "/v1/clusters/east:drain", {}),
        "CreateWorkload": ("POST", "/v1/workloads", workload("bx", project="b", tp=1)),
        "GetWorkload": ("GET", f"/v1/workloads/{b_wl}", None),
        "ListWorkloads": ("GET", "/v1/workloads", None),
        "UpdateWorkload": ("PATCH", f"/v1/workloads/{b_wl}", {"replicas": 2}),
        "DeleteWorkload": ("DELETE", f"/v1/workloads/{b_wl}", None),
        "ResumeWorkloadRollout": ("POST", f"/v1/workloads/{b_wl}:resume", {}),
        "PauseWorkloadRollout": ("POST", f"/v1/workloads/{b_wl}:pause", {}),
        "AbortWorkloadRollout": ("POST", f"/v1/workloads/{b_wl}:abort", {}),
        "ListDeployments": ("GET", "/v1/deployments", None),
        "GetDeployment": ("GET", f"/v1/deployments/{b_dep}", None),
        "UpdateDeployment": ("PATCH", f"/v1/deployments/{b_dep}", {"enabled": False}),
        "SetDeploymentAuthority": (
            "POST",
            f"/v1/deployments/{b_dep}/authority",
            {"authority": "observed"},
        ),
        "ReviewDeployment": ("GET", f"/v1/deployments/{b_dep}/review", None),
        "GetAppliedObject": ("GET", f"/v1/deployments/{b_dep}/applied", None),
        "ListDiscovered": ("GET", "/v1/discovered", None),
        "GetDiscovered": ("GET", f"/v1/discovered/{discovered}", None),
        # Bound to no workload yet: the admin's.
        "TrackDiscovered": ("POST", f"/v1/discovered/{discovered}/track", {}),
        "IgnoreDiscovered": ("POST", f"/v1/discovered/{discovered}/ignore", {}),
        "PromoteDiscovered": (
            "POST",
            f"/v1/discovered/{discovered}/promote",
            {"project": "b"},
        ),
        "ListReplicas": ("GET", "/v1/replicas", None),
        "GetReplica": ("GET", "/v1/replicas/ghost-replica", None),
        "ListAllocations": ("GET", "/v1/allocations", None),
        "CreateApiToken": ("POST", "/v1/tokens", {"name": "sneaky", "role": "admin"}),
        "ListApiTokens": ("GET", "/v1/tokens", None),
        "RevokeApiToken": ("DELETE", "/v1/tokens/viewer", None),
        "ListAuditRecords": ("GET", "/v1/audit", None),
        # A reader's watch (a revision never handed out, so the answer comes at once: 410);
        # what a scoped one sees is tests/integration/test_watch.py's.
        "Watch": ("GET", "/v1/watch?since_revision=999999999", None),
    }


READS = {m for m in METHODS if m.startswith(("Get", "List", "Review", "Watch"))} - {
    "ListApiTokens",
    "ListAuditRecords",
}


def test_every_rpc_has_a_call_in_this_walk() -> None:
    assert set(calls(dict.fromkeys(("b_workload", "b_deployment", "discovered"), "x"))) == set(
        METHODS
    ), "a new RPC needs a line in calls(): decide who may call it"


def test_an_operator_is_refused_everything_outside_its_projects(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    _, hub = env
    refs = fleet(hub, agents, tmp_path)
    operator = make_token(hub, "team-a", "operator", "a")
    make_token(hub, "viewer", "fleet_viewer")
    before_b = hub.get(f"/v1/workloads/{refs['b_workload']}")
    before_project_a = hub.get("/v1/projects/a")["quotas"]

    for method, (verb, path, body) in calls(refs).items():
        status, answer = hub.rest(verb, path, body, token=operator, check=False)
        if method in READS:
            # Reads: the fleet's facts, and of workloads only its own project's (project b's
            # resources read as none: test_a_project_scoped_token_reads_only_its_projects).
            assert status != 403, f"{method}: an operator reads ({answer})"
            continue
        assert status == 403, f"{method} {verb} {path}: expected 403, got {status} {answer}"
        message = answer["error"]["message"]
        assert "token/team-a" in message and "operator of a" in message, message
        assert answer["error"]["status"] == "PERMISSION_DENIED"

    # Nothing of project b (nor a's quota) moved.
    after_b = hub.get(f"/v1/workloads/{refs['b_workload']}")
    assert after_b["replicas"] == before_b["replicas"]
    assert hub.get(f"/v1/deployments/{refs['b_deployment']}")["enabled"] is True
    assert hub.get("/v1/projects/a")["quotas"] == before_project_a
    assert "c" not in {p["name"] for p in hub.get("/v1/projects")["projects"]}

    # Inside its project it works: create, scale, disable, delete.
    created = hub.rest("POST", "/v1/workloads", workload("ax", project="a", tp=1), token=operator)
    assert created[0] == 200
    scaled = hub.rest(
        "PATCH", f"/v1/workloads/{refs['a_workload']}", {"replicas": 2}, token=operator
    )
    assert scaled[1]["replicas"] == 2
    disabled = hub.rest(
        "PATCH", f"/v1/deployments/{refs['a_deployment']}", {"enabled": False}, token=operator
    )
    assert disabled[1]["enabled"] is False
    assert (
        hub.rest("DELETE", f"/v1/workloads/{created[1]['workload_id']}", token=operator)[0] == 200
    )


def test_a_fleet_viewer_reads_everything_and_changes_nothing_over_rest_and_grpc(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    _, hub = env
    refs = fleet(hub, agents, tmp_path)
    viewer = make_token(hub, "viewer", "fleet_viewer")
    for method, (verb, path, body) in calls(refs).items():
        status, answer = hub.rest(verb, path, body, token=viewer, check=False)
        if method in READS:
            assert status != 403, f"{method}: a viewer reads ({answer})"
        else:
            assert status == 403, f"{method}: expected 403, got {status} {answer}"
            assert "token/viewer (fleet_viewer)" in answer["error"]["message"]

    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        metadata = (("authorization", f"Bearer {viewer}"),)
        listed = stub.ListWorkloads(control_pb2.ListWorkloadsRequest(), metadata=metadata)
        assert len(listed.workloads) == 2
        with pytest.raises(grpc.RpcError) as refused:
            stub.DeleteWorkload(
                control_pb2.DeleteWorkloadRequest(ref=refs["a_workload"]), metadata=metadata
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert hub.get(f"/v1/workloads/{refs['a_workload']}")["name"] == "aw"


def test_a_project_scoped_token_reads_only_its_projects(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    """Issue 20: a viewer or operator of project a reads a's workloads, deployments, replicas
    and allocations, and none of b's (NOT_FOUND, as if they did not exist; a list filtered by
    b is refused); clusters and projects stay fleet facts. A fleet_viewer reads everything."""
    _, hub = env
    refs = fleet(hub, agents, tmp_path)
    wait_until(lambda: len(hub.get("/v1/replicas")["replicas"]) >= 2, what="both replicas")
    wait_until(lambda: len(hub.get("/v1/allocations")["allocations"]) >= 2, what="allocations")
    every = {
        "workloads": hub.get("/v1/workloads")["workloads"],
        "deployments": hub.get("/v1/deployments")["deployments"],
        "replicas": hub.get("/v1/replicas")["replicas"],
        "allocations": hub.get("/v1/allocations")["allocations"],
    }
    a_deployments = {refs["a_deployment"]}
    for token in (
        make_token(hub, "team-a-view", "viewer", "a"),
        make_token(hub, "team-a", "operator", "a"),
    ):

        def read(path: str, token: str = token) -> tuple[int, dict[str, Any]]:
            return hub.rest("GET", path, token=token, check=False)

        assert [w["name"] for w in read("/v1/workloads")[1]["workloads"]] == ["aw"]
        assert {d["deployment_id"] for d in read("/v1/deployments")[1]["deployments"]} == (
            a_deployments
        )
        replicas = read("/v1/replicas")[1]["replicas"]
        assert replicas and {r["deployment_id"] for r in replicas} == a_deployments
        allocations = read("/v1/allocations")[1]["allocations"]
        assert allocations and {a["project"] for a in allocations} == {"a"}
        b_replica = next(
            r["replica_id"] for r in every["replicas"] if r["deployment_id"] == refs["b_deployment"]
        )
        for path in (
            f"/v1/workloads/{refs['b_workload']}",
            "/v1/workloads/bw",
            f"/v1/deployments/{refs['b_deployment']}",
            f"/v1/deployments/{refs['b_deployment']}/review",
            f"/v1/deployments/{refs['b_deployment']}/applied",
            f"/v1/replicas/{b_replica}",
            f"/v1/deployments?workload_id={refs['b_workload']}",
            f"/v1/replicas?deployment_id={refs['b_deployment']}",
            f"/v1/allocations?deployment_id={refs['b_deployment']}",
        ):
            status, answer = read(path)
            assert status == 404, (path, answer)
            assert "bw" not in json.dumps(answer) or "bw" in path
        for path in ("/v1/workloads?project=b", "/v1/allocations?project=b"):
            status, answer = read(path)
            assert status == 403 and "reads only its own projects" in answer["error"]["message"]
        # Its own, and the fleet's facts, it reads.
        assert read(f"/v1/workloads/{refs['a_workload']}")[0] == 200
        assert read("/v1/clusters/east")[0] == 200
        assert {p["name"] for p in read("/v1/projects")[1]["projects"]} == {"a", "b"}

    fleet_viewer = make_token(hub, "sre", "fleet_viewer")
    for kind in every:
        # What the admin reads at the same moment: replicas and allocations move on (states,
        # ages, a late allocation) after `every` was read, which made this fail under load.
        def same(k: str = kind) -> bool:
            viewed = hub.rest("GET", f"/v1/{k}", token=fleet_viewer)[1][k]
            return bool(viewed == hub.get(f"/v1/{k}")[k])

        wait_until(same, what=f"a fleet viewer to read every {kind} the admin reads")
    assert hub.rest("GET", f"/v1/workloads/{refs['b_workload']}", token=fleet_viewer)[0] == 200
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        scoped = (("authorization", f"Bearer {make_token(hub, 'grpc-a', 'viewer', 'a')}"),)
        listed = stub.ListWorkloads(control_pb2.ListWorkloadsRequest(), metadata=scoped)
        assert [w.name for w in listed.workloads] == ["aw"]
        with pytest.raises(grpc.RpcError) as hidden:
            stub.GetWorkload(control_pb2.GetWorkloadRequest(ref="bw"), metadata=scoped)
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND


def test_tokens_are_shown_once_stored_hashed_and_revoked_at_once(
    env: tuple[LoopThread, Hub], tmp_path: Path
) -> None:
    _, hub = env
    hub.create_project("a", H100_80GB=4)
    secret = make_token(hub, "ci", "operator", "a")
    listed = hub.get("/v1/tokens")["tokens"]
    assert [t["name"] for t in listed] == ["ci"]
    assert listed[0]["role"] == "operator" and listed[0]["projects"] == ["a"]
    assert listed[0]["created_by"] == "admin"
    assert secret not in str(listed)
    db = open_store(hub.db_path)
    try:
        with db.read() as conn:
            stored = [tuple(r) for r in conn.execute("SELECT * FROM api_tokens").fetchall()]
    finally:
        db.close()
    assert secret not in str(stored), "the secret must never be stored"

    assert hub.rest("GET", "/v1/workloads", token=secret)[0] == 200
    revoked = hub.rest("DELETE", "/v1/tokens/ci")[1]
    assert revoked["revoke_time"]
    status, answer = hub.rest("GET", "/v1/workloads", token=secret, check=False)
    assert status == 401 and "revoked" in answer["error"]["message"]
    assert hub.get("/v1/tokens")["tokens"] == []
    assert [t["name"] for t in hub.get("/v1/tokens?include_revoked=true")["tokens"]] == ["ci"]

    for body, field in (
        ({"name": "x", "role": "operator"}, "token.projects"),
        ({"name": "x", "role": "fleet_viewer", "projects": ["a"]}, "token.projects"),
        ({"name": "x", "role": "viewer"}, "token.projects"),
        ({"name": "x", "role": "root"}, "token.role"),
        ({"name": "Bad Name", "role": "viewer"}, "token.name"),
    ):
        status, answer = hub.rest("POST", "/v1/tokens", body, check=False)
        assert status == 400 and field in answer["error"]["message"], (body, answer)
    status, answer = hub.rest(
        "POST", "/v1/tokens", {"name": "x", "role": "operator", "projects": ["nope"]}, check=False
    )
    assert status == 404
    status, _ = hub.rest("POST", "/v1/tokens", {"name": "ci", "role": "fleet_viewer"}, check=False)
    assert status == 409, "a revoked token's name stays taken (its audit records name it)"


def test_a_scoped_token_is_looked_up_once_per_call_and_revocation_holds_on_a_kept_connection(
    env: tuple[LoopThread, Hub], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edge's check before the body proves the token; the dispatcher takes that proof
    for the same request instead of hashing and reading the store again. A connection kept
    alive never lends one request's proof to the next: a revoked token is refused at once."""
    _, hub = env
    hub.create_project("a", H100_80GB=4)
    secret = make_token(hub, "ci", "viewer", "a")
    lookups: list[str] = []
    lookup = access_service.principal_for_secret

    def counted(ctx: Any, presented: str) -> Any:
        lookups.append(presented)
        return lookup(ctx, presented)

    monkeypatch.setattr(access_service, "principal_for_secret", counted)
    assert hub.rest("GET", "/v1/projects/a", token=secret)[0] == 200
    assert len(lookups) == 1, "REST: one lookup per call"
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        stub.GetProject(
            control_pb2.GetProjectRequest(name="a"),
            metadata=(("authorization", f"Bearer {secret}"),),
        )
    assert len(lookups) == 2, "gRPC: one lookup per call"

    connection = http.client.HTTPConnection("127.0.0.1", hub.http_port, timeout=10)
    try:
        headers = {"authorization": f"Bearer {secret}"}
        connection.request("GET", "/v1/projects/a", headers=headers)
        first = connection.getresponse()
        first.read()
        assert first.status == 200
        hub.rest("DELETE", "/v1/tokens/ci")
        connection.request("GET", "/v1/projects/a", headers=headers)
        second = connection.getresponse()
        second.read()
        assert second.status == 401, "the same connection, the token revoked in between"
    finally:
        connection.close()


def test_every_mutating_call_leaves_an_audit_record(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    _, hub = env
    refs = fleet(hub, agents, tmp_path)
    operator = make_token(hub, "team-a", "operator", "a")
    mutating = [m for m in METHODS if m not in READS | {"ListApiTokens", "ListAuditRecords"}]
    walk = calls(refs)
    started = time.time()
    for method in mutating:  # refused: the operator calls outside its project
        verb, path, body = walk[method]
        hub.rest(verb, path, body, token=operator, check=False)

    records = audit_records(hub, f"actor=token/team-a&since={_rfc3339(started - 1)}")
    by_action = {r["action"]: r for r in records}
    assert set(by_action) == set(mutating), set(mutating) ^ set(by_action)
    for record in records:
        assert record["outcome"] == "PERMISSION_DENIED" and record["edge"] == "rest"
        assert record["role"] == "operator" and record["message"]
    assert by_action["DeleteWorkload"]["target"] == f"workload/{refs['b_workload']}"

    # Allowed calls too, with their outcome, over gRPC as well.
    hub.rest("PATCH", f"/v1/workloads/{refs['a_workload']}", {"replicas": 2}, token=operator)
    with grpc.insecure_channel(hub.grpc_target) as channel:
        control_pb2_grpc.ControlServiceStub(channel).UpdateProject(
            control_pb2.UpdateProjectRequest(
                name="b",
                project={"name": "b", "quotas": {"H100-80GB": 8}},
                update_mask={"paths": ["quotas"]},
            ),
            metadata=(("authorization", "Bearer test-admin-token-0123456789"),),
        )
    ok = audit_records(hub, "outcome=OK&action=UpdateWorkload")
    assert ok[0]["actor"] == "token/team-a" and ok[0]["target"].startswith("workload/")
    grpc_call = audit_records(hub, "action=UpdateProject&actor=admin")
    assert grpc_call[0]["edge"] == "grpc" and grpc_call[0]["target"] == "project/b"

    # Paging: newest first, no record twice.
    seen: list[int] = []
    token = ""
    while True:
        page = hub.get(f"/v1/audit?page_size=7&page_token={token}")
        seen += [int(r["id"]) for r in page["records"]]
        token = page.get("next_page_token", "")
        if not token:
            break
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen))
    assert hub.rest("GET", "/v1/audit?page_token=garbage", check=False)[0] == 400


def test_agent_connects_supersedes_rejections_and_refusals_are_audited(
    env: tuple[LoopThread, Hub],
) -> None:
    _, hub = env
    token = hub.register_cluster("east")
    hub.register_cluster("west")
    first = RawStream(hub.grpc_target, token)
    first.hello("east")
    first.receive_kind("welcome")
    second = RawStream(hub.grpc_target, token)
    second.hello("east")
    second.receive_kind("welcome")
    with pytest.raises(grpc.RpcError) as superseded:
        for _ in range(10):
            first.receive()
    assert superseded.value.code() == grpc.StatusCode.ABORTED
    wrong = RawStream(hub.grpc_target, token)
    wrong.hello("west")
    with pytest.raises(grpc.RpcError):
        wrong.receive()
    for stream in (first, second, wrong):
        stream.close()

    records = wait_until(
        lambda: (
            (found := audit_records(hub, "actor=cluster/east"))
            and {r["action"] for r in found}
            >= {"agent.connect", "agent.superseded", "agent.refused"}
            and found
        ),
        what="the agent events in the audit log",
    )
    actions = [r["action"] for r in records]
    assert actions.count("agent.connect") == 2
    refused = next(r for r in records if r["action"] == "agent.refused")
    assert refused["outcome"] == "PERMISSION_DENIED" and "west" in refused["message"]
    assert all(r["edge"] == "stream" and r["role"] == "agent" for r in records)
    # A bad credential names no one: not audited (a flood of them must not fill the store).
    stranger = RawStream(hub.grpc_target, "not-a-real-token-at-all")
    stranger.hello("east")
    with pytest.raises(grpc.RpcError):
        stranger.receive()
    stranger.close()
    assert not audit_records(hub, "actor=anonymous")


def test_audit_records_past_the_retention_are_pruned(tmp_path: Path) -> None:
    with running_hub(tmp_path) as (_, hub):
        hub.create_project("a")
        assert audit_records(hub, "action=CreateProject")
        hub.stop()
        time.sleep(1.2)
        hub.settings = Settings(
            stale_after_s=FAST.stale_after_s,
            heartbeat_interval_s=FAST.heartbeat_interval_s,
            audit_retention_s=1.0,
        )
        hub.start()  # prunes at start
        wait_until(
            lambda: not audit_records(hub, "action=CreateProject"), what="the old record pruned"
        )
        hub.create_project("b")
        assert [r["target"] for r in audit_records(hub, "action=CreateProject")] == ["project/b"]


def test_the_cli_creates_lists_and_revokes_tokens(env: tuple[LoopThread, Hub]) -> None:
    _, hub = env
    hub.create_project("a")
    base = [sys.executable, "-m", "cli", "--hub-url", f"http://127.0.0.1:{hub.http_port}"]
    admin = ["--token", "test-admin-token-0123456789"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *admin, *args], capture_output=True, text=True, timeout=60, check=False
        )

    created = cli("token", "create", "team-a", "--role", "operator", "--project", "a")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip().splitlines()[-1].strip()
    assert secret.startswith("wst_")
    listed = cli("token", "list")
    assert "team-a" in listed.stdout and "operator" in listed.stdout and secret not in listed.stdout
    refused = subprocess.run(
        [*base, "--token", secret, "token", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 1 and "admin role" in refused.stderr
    raise_own_quota = subprocess.run(
        [*base, "--token", secret, "set-quota", "a", "H100-80GB=1000", "--replace"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert raise_own_quota.returncode == 1 and "admin role" in raise_own_quota.stderr
    audit = cli("audit", "--actor", "token/team-a")
    assert audit.returncode == 0, audit.stderr
    assert "UpdateProject" in audit.stdout and "PERMISSION_DENIED" in audit.stdout
    assert "CreateApiToken" not in audit.stdout, "only the operator's records"
    assert "ListApiTokens" not in audit.stdout, "reads are not audited"
    created_record = cli("audit", "--action", "CreateApiToken")
    assert "admin" in created_record.stdout and "token/team-a" in created_record.stdout
    assert cli("token", "revoke", "team-a").returncode == 0
    assert "team-a" not in cli("token", "list").stdout


def audit_records(hub: Hub, query: str = "") -> list[dict[str, Any]]:
    return list(hub.get(f"/v1/audit?page_size=1000&{query}").get("records", []))


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def test_the_dashboard_takes_scoped_tokens_and_their_limits(
    env: tuple[LoopThread, Hub], agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    from tests.integration.ui.test_dashboard_access import Client

    _, hub = env
    refs = fleet(hub, agents, tmp_path)
    viewer = make_token(hub, "wall-screen", "viewer", "a")
    client = Client(hub)
    login = client.request("POST", "/ui/login", {"token": viewer, "next": "/ui/fleet"})
    assert login.status == 303 and viewer not in str(login.set_cookies)
    assert client.request("GET", "/ui/workloads").status == 200

    path = f"/ui/discovered/{refs['discovered']}/track"
    refused = client.request("POST", path, {"csrf": client.csrf("/ui/discovered")})
    assert refused.status == 403 and "token/wall-screen (viewer of a)" in refused.body
    assert hub.get(f"/v1/discovered/{refs['discovered']}")["state"] == "new"
    (record,) = audit_records(hub, "actor=token/wall-screen")
    assert record["edge"] == "dashboard" and record["action"] == "TrackDiscovered"
    assert record["outcome"] == "PERMISSION_DENIED"

    hub.rest("DELETE", "/v1/tokens/wall-screen")
    assert client.request("GET", "/ui/fleet").status == 303, "a revoked token's session ends"
