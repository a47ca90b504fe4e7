"""/metrics carries what an operator alerts on, read from the hub's real state: per cluster,
per project and class, the control API's RED metrics, the store, the process; it passes
`promtool check metrics` in both exposition formats (docs/operations.md "Monitoring")."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from collections.abc import Callable

import grpc
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until, workload
from tests.unit.deploy import promql
from wingsmith.v1 import control_pb2, control_pb2_grpc

H100 = "H100-80GB"


def _scrape(hub: Hub, accept: str = "") -> tuple[str, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{hub.http_port}/metrics", headers={"Accept": accept} if accept else {}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode(), response.headers["Content-Type"]


def _fleet(hub: Hub, agents: Callable[..., SimAgent]) -> tuple[SimAgent, str]:
    """east (2 nodes x 8) and west (1 x 4); project search with 8 H100s: `fits` runs on east
    (1 replica of 4 devices); `too-big` (2 of 4) gets one replica and waits on quota for the
    other."""
    token = hub.register_cluster("east")
    east = agents(cluster_id="east", token=token)
    agents(
        cluster_id="west",
        token=hub.register_cluster("west"),
        spec="nodes=1,gpus=4,class=H100-80GB,ready_after=0.3s",
    )
    hub.create_project("search", H100_80GB=8)
    for cluster in ("east", "west"):
        wait_until(lambda c=cluster: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    hub.post("/v1/workloads", workload("fits", replicas=1, clusters=("east",)))
    hub.post("/v1/workloads", workload("too-big", replicas=2, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/fits")["phase"] == "running", what="running")
    return east, token


def test_per_cluster_series_follow_the_clusters_devices_revisions_and_streams(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    east, token = _fleet(hub, agents)
    devices = {
        state: (lambda s=state: hub.metric("wingsmith_cluster_devices", cluster="east", state=s))
        for state in ("verified", "allocated", "reserved", "free", "unusable")
    }
    wait_until(lambda: devices["allocated"]() == 8, what="8 devices allocated (2 replicas)")
    assert devices["verified"]() == 16
    assert devices["reserved"]() == 0 and devices["free"]() == 8
    assert devices["unusable"]() == 0
    # The same figures the cluster's own view shows.
    shown = hub.get("/v1/clusters/east")["devices"][H100]
    assert {state: devices[state]() for state in ("allocated", "reserved", "free", "unusable")} == {
        state: shown[state] for state in ("allocated", "reserved", "free", "unusable")
    }
    assert devices["verified"]() == shown["total"]
    assert hub.metric("wingsmith_cluster_devices", cluster="west", state="free") == 4
    for cluster in ("east", "west"):
        assert hub.metric("wingsmith_cluster_connected", cluster=cluster) == 1
        assert hub.metric("wingsmith_cluster_stale", cluster=cluster) == 0
        assert 0 <= hub.metric("wingsmith_cluster_last_seen_age_seconds", cluster=cluster) < 30
        assert hub.metric("wingsmith_cluster_stream_opens_total", cluster=cluster) == 1
    # east has desired state; its agent applies it: the lag closes, the revisions agree.
    wait_until(
        lambda: (
            hub.metric("wingsmith_cluster_applied_revision", cluster="east")
            == hub.metric("wingsmith_cluster_desired_revision", cluster="east")
            > 0
        ),
        what="east applied its desired revision",
    )
    assert hub.metric("wingsmith_cluster_revision_lag", cluster="east") == 0
    cluster = hub.get("/v1/clusters/east")
    for field in ("desired_revision", "applied_revision", "leader_term"):
        assert hub.metric(f"wingsmith_cluster_{field}", cluster="east") == int(cluster[field])

    # The agent goes: the cluster shows disconnected; it comes back: one more stream opened.
    east.stop()
    wait_until(lambda: hub.metric("wingsmith_cluster_connected", cluster="east") == 0)
    agents(cluster_id="east", token=token)
    wait_until(lambda: hub.metric("wingsmith_cluster_connected", cluster="east") == 1)
    assert hub.metric("wingsmith_cluster_stream_opens_total", cluster="east") == 2


def test_per_project_series_show_quota_use_and_what_waits_and_how_long_admission_took(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    _fleet(hub, agents)
    key = {"project": "search", "device_class": H100}
    waiting = {**key, "reason": "insufficient_quota"}
    assert hub.metric("wingsmith_project_quota_devices", **key) == 8
    wait_until(lambda: hub.metric("wingsmith_project_used_devices", **key) == 8, what="used 8")
    assert hub.metric("wingsmith_project_reserved_devices", **key) == 0
    assert hub.get("/v1/projects/search")["usage"][H100] == {"used": 8, "reserved": 0, "limit": 8}
    assert hub.metric("wingsmith_pending_deployments", **waiting) == 1
    assert hub.metric("wingsmith_pending_devices", **waiting) == 4  # too-big's second replica
    assert hub.metric("wingsmith_pending_oldest_age_seconds", **waiting) >= 0
    # fits and too-big's first replica were admitted as they were created.
    assert hub.metric("wingsmith_admission_wait_seconds_count", **key) == 2

    # More quota: too-big's second replica is admitted, its wait observed; nothing waits.
    hub.patch("/v1/projects/search", {"quotas": {H100: 12}})
    assert hub.metric("wingsmith_admission_wait_seconds_count", **key) == 3
    assert hub.metric("wingsmith_pending_deployments", **waiting) == 0
    assert hub.metric("wingsmith_project_quota_devices", **key) == 12


def test_the_control_api_has_red_metrics_over_rest_and_grpc_and_the_store_its_timings(
    hub: Hub,
) -> None:
    hub.create_project("search", H100_80GB=8)
    hub.get("/v1/projects/search")
    status, _ = hub.rest("GET", "/v1/projects/nope", check=False)
    assert status == 404
    status, _ = hub.rest("GET", "/v1/projects", token="wrong-token-0123456789", check=False)
    assert status == 401
    hub.rest("GET", "/no/such/path/123", check=False)
    with grpc.insecure_channel(hub.grpc_target) as channel:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        auth = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        stub.GetProject(control_pb2.GetProjectRequest(name="search"), metadata=auth)
        with pytest.raises(grpc.RpcError) as missing:
            stub.GetProject(control_pb2.GetProjectRequest(name="nope"), metadata=auth)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetProject(control_pb2.GetProjectRequest(name="search"))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

    route = "/v1/projects/{name}"
    assert hub.metric("wingsmith_http_requests_total", route=route, method="GET", code="200") == 1
    assert hub.metric("wingsmith_http_requests_total", route=route, method="GET", code="404") == 1
    assert hub.metric("wingsmith_http_requests_total", route="/v1/projects", code="401") == 1
    assert hub.metric("wingsmith_http_requests_total", route="/v1/projects", code="200") == 1
    assert hub.metric("wingsmith_http_requests_total", route="unmatched", code="404") == 1
    assert hub.metric("wingsmith_http_request_duration_seconds_count", route=route) == 2
    grpc_key = {"grpc_service": "wingsmith.v1.ControlService", "grpc_method": "GetProject"}
    for code in ("OK", "NOT_FOUND", "UNAUTHENTICATED"):
        assert hub.metric("wingsmith_grpc_server_handled_total", **grpc_key, grpc_code=code) == 1
    assert hub.metric("wingsmith_grpc_server_handling_seconds_count", **grpc_key) == 3
    assert hub.metric("wingsmith_store_transaction_seconds_count", kind="write") >= 1
    assert hub.metric("wingsmith_store_transaction_seconds_count", kind="read") >= 1
    assert hub.metric("wingsmith_store_lock_wait_seconds_count") >= 1


def test_process_build_info_no_created_samples_and_openmetrics_when_asked(hub: Hub) -> None:
    text, content_type = _scrape(hub)
    assert content_type.startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    info = families["wingsmith_build_info"].samples[0]
    assert info.value == 1 and info.labels["version"] and info.labels["python_version"]
    assert families["process_resident_memory_bytes"].samples[0].value > 0
    assert "python_info" in families and "python_gc_objects_collected" in families
    names = {s.name for f in families.values() for s in f.samples}
    assert not [n for n in names if n.endswith("_created")]

    body, content_type = _scrape(hub, accept="application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF") and "_created" not in body


@pytest.mark.skipif(
    not shutil.which("promtool"), reason="promtool missing: apt-get install prometheus"
)
def test_promtool_accepts_the_exposition_of_a_live_fleet(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    _fleet(hub, agents)
    hub.rest("GET", "/v1/projects/nope", check=False)
    text, _ = _scrape(hub)
    assert "wingsmith_cluster_devices{" in text and "wingsmith_pending_devices{" in text
    # promtool reads the text format 0.0.4 (the default exposition) and lints its names.
    checked = subprocess.run(
        ["promtool", "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # promtool has no OpenMetrics linter: the strict OpenMetrics parser reads that one whole.
    body, _ = _scrape(hub, "application/openmetrics-text; version=1.0.0")
    families = {f.name for f in openmetrics_families(body)}
    assert {"wingsmith_cluster_devices", "wingsmith_admission_wait_seconds"} <= families


# Series of other exporters the alert rules read: Prometheus's own `up`, kube-state-metrics.
FOREIGN = {"up", "kube_deployment_status_replicas_available", "kube_deployment_spec_replicas"}
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("_count", "_sum", ""),
}


def _exported(hub: Hub) -> set[str]:
    """Every sample name the hub can export, from the families it declares (a family with no
    child yet still says its name and type)."""
    names = set()
    for family in text_string_to_metric_families(hub.metrics()):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def test_every_dashboard_query_and_alert_rule_names_metrics_the_hub_exports(hub: Hub) -> None:
    exported = _exported(hub)
    queries = promql.dashboard_expressions()
    for expr in queries:
        names = promql.metric_names(expr)
        assert names, f"{expr}: names no metric"
        assert names <= exported | {"up"}, f"dashboard: {expr} reads {names - exported}"
    for rule in promql.alerts():
        names = promql.metric_names(rule["expr"])
        assert names and names <= exported | FOREIGN, f"{rule['alert']}: {names - exported}"
    # and the check can fail: a name the hub does not export
    assert not promql.metric_names("rate(wingsmith_no_such_total[5m])") <= exported
