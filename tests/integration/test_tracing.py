"""One change, one trace: a control call, its admission, the delta sent down the stream, the
agent's render and apply, and the observation batch that reports back share one trace,
continuing the caller's traceparent (docs/operations.md "Tracing"); with tracing off nothing
rides on the stream."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator

import pytest
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
