"""One change, one trace: a control call, its admission, the delta sent down the stream, the
agent's render and apply, and the observation batch that reports back share one trace,
continuing the caller's traceparent (docs/operations.md "Tracing"); with tracing off nothing
rides on the stream."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent import tracing as agent_tracing
from hub import tracing as hub_tracing
from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until, workload

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hub_tracing.use(provider)
    agent_tracing.use(provider)
    yield exporter
    hub_tracing.use(None)
    agent_tracing.use(None)
    provider.shutdown()


def _create(hub_: Hub, body: dict[str, object], traceparent: str) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{hub_.http_port}/v1/workloads",
        method="POST",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {ADMIN_TOKEN}",
            "traceparent": traceparent,
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def _named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert found, f"no span {name!r} among {[s.name for s in spans]}"
    return found[0]


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_workload_from_call_to_cluster_and_back_is_one_trace(
    hub: Hub, agents: Callable[..., SimAgent], spans: InMemorySpanExporter
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8)
    agents(cluster_id="east", token=token)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    spans.clear()

    _create(hub, workload("traced", clusters=("east",)), f"00-{TRACE_ID}-{CALLER_SPAN}-01")

    def ours() -> list[ReadableSpan]:
        return [
            s
            for s in spans.get_finished_spans()
            if s.context is not None and f"{s.context.trace_id:032x}" == TRACE_ID
        ]

    wait_until(
        lambda: any(s.name == "receive observations" for s in ours()),
        what="the observation reporting on the apply, in the caller's trace",
    )
    chain = ours()
    deployment_id = hub.get("/v1/deployments/traced.east")["deployment_id"]
    call = _named(chain, "wingsmith.v1.ControlService/CreateWorkload")
    admission = _named(chain, "admission")
    sent = _named(chain, "send desired")
    applied = _named(chain, "apply desired")
    render = _named(chain, "render")
    apply = _named(chain, "apply")
    received = _named(chain, "receive observations")
    assert call.context is not None and admission.context is not None
    assert sent.context is not None and applied.context is not None
    # the caller's span -> the call -> its admission, and the delta it caused
    assert _parent(call) == int(CALLER_SPAN, 16)
    assert _parent(admission) == call.context.span_id
    assert deployment_id in (admission.attributes or {})["wingsmith.admission.admitted"]
    assert _parent(sent) == call.context.span_id
    assert (sent.attributes or {})["wingsmith.cluster"] == "east"
    # down the stream: the agent's handling of that delta, its render and apply
    assert _parent(applied) == sent.context.span_id
    assert _parent(render) == applied.context.span_id
    assert _parent(apply) == applied.context.span_id
    assert (apply.attributes or {})["wingsmith.deployment"] == deployment_id
    # and back up: the first observation batch reporting on it
    assert _parent(received) == applied.context.span_id
    assert deployment_id in (received.attributes or {})["wingsmith.deployments"]


def test_without_a_tracer_nothing_rides_on_the_stream(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    """Tracing off (no provider installed): no span records, so no context is carried."""
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8)
    sim = agents(cluster_id="east", token=token)
    _create(hub, workload("plain", clusters=("east",)), f"00-{TRACE_ID}-{CALLER_SPAN}-01")
    wait_until(lambda: hub.get("/v1/workloads/plain")["phase"] == "running", what="running")
    assert sim.agent._trace_pending is None
    assert hub_tracing.current_carrier() is None


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    """A real OTLP/gRPC trace collector on 127.0.0.1: keeps what it is sent."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def Export(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def test_a_hub_given_an_otlp_endpoint_exports_its_spans_there(tmp_path: Path) -> None:
    collector = _Collector()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    ready = tmp_path / "ready.json"
    hub_process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hub",
            "--db",
            str(tmp_path / "hub.db"),
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--ready-file",
            str(ready),
            "--otlp-endpoint",
            f"http://127.0.0.1:{port}",
            "--log-format",
            "json",
        ],
        env={**os.environ, "WINGSMITH_ADMIN_TOKEN": ADMIN_TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: ready.exists() and ready.read_text(), timeout=60, what="hub up")
        http = json.loads(ready.read_text())["http"]
        request = urllib.request.Request(
            f"http://{http}/v1/projects",
            data=json.dumps({"name": "search", "quotas": {"H100-80GB": 8}}).encode(),
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
    finally:
        hub_process.send_signal(signal.SIGTERM)  # the exporter flushes as the process exits
        _, errors = hub_process.communicate(timeout=60)
    server.stop(grace=None)
    assert hub_process.returncode == 0, errors
    spans = [
        (resource, span)
        for request in collector.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = {span.name for _, span in spans}
    assert "wingsmith.v1.ControlService/CreateProject" in names, names
    services = {
        a.value.string_value
        for resource, _ in spans
        for a in resource.resource.attributes
        if a.key == "service.name"
    }
    assert services == {"wingsmith-hub"}
    # --log-format json: every line an object, the start and the stop among them
    lines = [json.loads(line) for line in errors.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    messages = [line["message"] for line in lines]
    assert any(m.startswith("hub ") and " up: grpc " in m for m in messages), messages
    assert "shutting down" in messages


def test_a_json_log_line_names_the_trace_and_span_it_was_written_in(
    spans: InMemorySpanExporter,
) -> None:
    from common.logformat import JsonFormatter

    record = logging.LogRecord(
        "wingsmith.hub", logging.INFO, __file__, 1, "inside %s", ("x",), None
    )
    with hub_tracing.tracer().start_as_current_span("call") as span:
        inside = json.loads(JsonFormatter().format(record))
    outside = json.loads(JsonFormatter().format(record))
    context = span.get_span_context()
    assert inside["trace_id"] == f"{context.trace_id:032x}"
    assert inside["span_id"] == f"{context.span_id:016x}"
    assert inside["message"] == "inside x" and inside["level"] == "INFO"
    assert "trace_id" not in outside and "span_id" not in outside
