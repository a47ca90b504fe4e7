"""The hub's OpenTelemetry tracing: off unless configured, OTLP over gRPC when it is.

One change, one trace (docs/operations.md "Tracing"): a control call's span (hub/api/control.py,
continuing a caller's W3C `traceparent` from its gRPC metadata or HTTP headers) holds the
admission pass it runs (hub/service/admit.py); the fan-out remembers, per cluster, the context
of the last change published for it (hub/sync/fanout.py), and the pump's span sending that
cluster's delta continues it and puts it on the DesiredState (`trace_context`); the agent's
render and apply continue it there, and the observation batch that first reports on them
carries it back up, where the hub's span receiving it ends the chain.

Spans are made through the OpenTelemetry API, whose tracer does nothing until a tracer
provider is installed: `configure` installs one exporting to an OTLP endpoint; tests install
their own with an in-memory exporter. This module is the only one that knows the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context, propagate, trace

TRACER = "wingsmith.hub"

Carrier = dict[str, str]


# A provider of the caller's instead of the global one (tests: an in-memory exporter).
_provider: trace.TracerProvider | None = None


def use(provider: trace.TracerProvider | None) -> None:
    """Make spans with `provider` (None: the global provider, which `configure` installs)."""
    global _provider
    _provider = provider


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER, tracer_provider=_provider)


def configure(endpoint: str, *, service: str = "wingsmith-hub") -> None:
    """Export every span to the OTLP collector at `endpoint` (e.g. http://otel:4317), in
    batches off the serving threads."""
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


def current_carrier() -> Carrier | None:
    """The current span's context as W3C headers, or None when no span records (tracing off,
    or no traced call in progress): nothing is carried then."""
    if not trace.get_current_span().is_recording():
        return None
    carrier: Carrier = {}
    propagate.inject(carrier)
    return carrier or None


def extracted(carrier: Mapping[str, str]) -> context.Context:
    """A context continuing the trace `carrier` names (the root context when it names none)."""
    return propagate.extract(dict(carrier))
