"""The agent's OpenTelemetry tracing: off unless configured, OTLP over gRPC when it is.

The hub puts the trace context of the change behind a desired-state delta on the message
(DesiredState.trace_context); the agent's span handling that delta continues the trace, with
the render (reconcile's plan) and each apply inside it, and the first observation batch that
reports on the deployments it applied carries the apply's context back to the hub
(ObservationBatch.trace_context). docs/operations.md "Tracing".

Nothing is traced outside such a change: a periodic resync makes no trace of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from opentelemetry import context, propagate, trace

TRACER = "wingsmith.agent"
# What of the hub's trace context the agent reads (W3C).
_KEYS = ("traceparent", "tracestate")
_VALUE_MAX = 512

Carrier = dict[str, str]


# A provider of the caller's instead of the global one (tests: an in-memory exporter).
_provider: trace.TracerProvider | None = None


def use(provider: trace.TracerProvider | None) -> None:
    """Make spans with `provider` (None: the global provider, which `configure` installs)."""
    global _provider
    _provider = provider


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER, tracer_provider=_provider)


def configure(endpoint: str, *, service: str = "wingsmith-agent") -> None:
    """Export every span to the OTLP collector at `endpoint`, in batches."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(
        # http://HOST:4317: plaintext; https://: TLS (the exporter reads the scheme).
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))
    )
    trace.set_tracer_provider(provider)


def extracted(carrier: Mapping[str, str]) -> context.Context:
    return propagate.extract(
        {k: v for k, v in carrier.items() if k in _KEYS and len(v) <= _VALUE_MAX}
    )


def current_carrier() -> Carrier | None:
    if not trace.get_current_span().is_recording():
        return None
    carrier: Carrier = {}
    propagate.inject(carrier)
    return carrier or None


@contextlib.contextmanager
def child(name: str, **attributes: str | int | list[str]) -> Iterator[None]:
    """A span inside the current traced change; nothing when none is in progress."""
    if not trace.get_current_span().is_recording():
        yield
        return
    with tracer().start_as_current_span(name, attributes=attributes):
        yield
