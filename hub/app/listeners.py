"""The hub's two listeners: the gRPC server (ClusterSync, ControlService, health, reflection)
and the HTTP server (the REST gateway, the dashboard at /ui/, /metrics, /healthz, the OpenAPI
document), each with its limits, interceptors and metrics. Built by `hub.app.server.HubServer`
from the parts it wires."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import grpc
from aiohttp import web
from google.protobuf import descriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from hub import __version__
from hub.api import control, grpc_control, grpc_edge, measured, openapi, rest, watch
from hub.api.auth import Authenticator
from hub.errors import WingsmithError
from hub.metrics import HubMetrics, exposition
from hub.service import access as access_service
from hub.service import history as history_service
from hub.service.context import ServiceContext
from hub.sync.session import SyncServicer
from hub.tls import TlsConfig, http_context, server_credentials
from hub.ui.dashboard import Dashboard, SessionStore
from wingsmith.v1 import control_pb2, sync_pb2, sync_pb2_grpc

# What the hub reads: an agent's largest observation batch (10,000 records, a few MB) or a
# control request fits many times over; a bigger message is refused (RESOURCE_EXHAUSTED)
# before it is buffered whole. What it sends (a desired-state snapshot of a large cluster)
# may be larger: the agent reads up to 64 MiB.
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
MAX_SEND_BYTES = 64 * 1024 * 1024

CONTROL_SERVICE = control_pb2.DESCRIPTOR.services_by_name["ControlService"]


async def start_grpc(
    *,
    listen: str,
    tls: TlsConfig | None,
    max_connection_age_s: float,
    max_connection_age_grace_s: float,
    metrics: HubMetrics,
    authenticator: Authenticator,
    refused: grpc_edge.Refused,
    sync: SyncServicer,
    dispatch: control.Dispatch,
    streams: control.StreamDispatch,
) -> tuple[grpc.aio.Server, int]:
    """The gRPC server, started on `listen`, and the port it bound."""
    control_service = CONTROL_SERVICE

    def measured(service: str, method: str, code: str, seconds: float | None) -> None:
        metrics.grpc_call(service=service, method=method, code=code, seconds=seconds)

    server = grpc.aio.server(
        # The token is checked before the request is read; then a request that does not
        # parse is INVALID_ARGUMENT (hub/api/grpc_edge.py).
        interceptors=[
            grpc_edge.Measured(measured),
            grpc_edge.Authenticated([control_service.full_name], authenticator.check_before_body),
            grpc_edge.MalformedRequests(refused),
        ],
        options=[
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
            ("grpc.max_send_message_length", MAX_SEND_BYTES),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            # grpc core cancels calls beyond these while the loop is busy (a fleet
            # reconnecting at once); let the handshake token bucket shed load instead.
            ("grpc.max_pending_requests", 20_000),
            ("grpc.max_pending_requests_hard_limit", 50_000),
            ("grpc.max_connection_age_ms", int(max_connection_age_s * 1000)),
            ("grpc.max_connection_age_grace_ms", int(max_connection_age_grace_s * 1000)),
        ],
    )
    sync_pb2_grpc.add_ClusterSyncServicer_to_server(sync, server)
    server.add_generic_rpc_handlers(
        [grpc_control.generic_handler(control_service, dispatch, streams)]
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [
        control_service.full_name,
        sync_pb2.DESCRIPTOR.services_by_name["ClusterSync"].full_name,
        health.SERVICE_NAME,
    ]
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection([*names, reflection.SERVICE_NAME], server)
    if tls is not None:
        port = server.add_secure_port(listen, server_credentials(tls))
    else:
        port = server.add_insecure_port(listen)
    await server.start()
    return server, port


def grpc_refusals(
    handlers: control.ControlHandlers,
    authenticator: Authenticator,
    ctx: ServiceContext,
    service: descriptor.ServiceDescriptor = CONTROL_SERVICE,
) -> grpc_edge.Refused:
    """A malformed ControlService request goes to the audit log (the agent stream's
    messages are the agents' own writes, never audited per message)."""
    record = control.refusal_recorder(handlers, authenticator, ctx, edge="grpc")

    async def refused(path: str, metadata: Mapping[str, str], error: WingsmithError) -> None:
        name, _, method = path.strip("/").partition("/")
        if name == service.full_name and method in service.methods_by_name:
            await record(service.methods_by_name[method], metadata, error)

    return refused


async def start_http(
    *,
    host: str,
    port: int,
    tls: TlsConfig | None,
    metrics: HubMetrics,
    admin_token: str,
    ctx: ServiceContext,
    handlers: control.ControlHandlers,
    authenticator: Authenticator,
    dispatch: control.AnswerDispatch,
    streams: control.StreamDispatch,
    feed: watch.WatchFeed | None = None,
) -> tuple[web.AppRunner, int]:
    """The HTTP server, started on host:port, and the port it bound."""
    dashboard = Dashboard(
        service=CONTROL_SERVICE,
        dispatch=control.principal_dispatcher(handlers, ctx, edge="dashboard"),
        admin_token=admin_token,
        authenticate=lambda token: authenticator.check({"authorization": f"Bearer {token}"}),
        store=SessionStore(
            open=lambda nonce, actor, expiry: access_service.open_session(
                ctx, nonce=nonce, actor=actor, expire_time=expiry
            ),
            principal_of=lambda nonce: access_service.session_principal(ctx, nonce),
            end=lambda nonce: access_service.end_session(ctx, nonce),
        ),
        secure_cookies=tls is not None,
        charts=history_service.ChartHistory(ctx),
        watch=control.principal_watch(feed) if feed else None,
    )

    async def to_dashboard(_: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/ui/")

    async def metrics_page(request: web.Request) -> web.Response:
        # In a thread: some gauges read the store (phases: a view of every deployment).
        # OpenMetrics when the scraper's Accept asks for it, else the text format 0.0.4.
        body, content_type = await asyncio.to_thread(
            exposition, metrics.registry, request.headers.get("Accept", "")
        )
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "serving"})

    services = [CONTROL_SERVICE]
    # Built once: the routes and messages are fixed for the life of the process.
    contract = openapi.document(services, version=__version__)

    async def openapi_document(_: web.Request) -> web.Response:
        return web.json_response(contract)

    app = rest.build_rest_app(
        services=services,
        dispatch=dispatch,
        authenticate=authenticator.check_before_body,
        refused=control.refusal_recorder(handlers, authenticator, ctx, edge="rest"),
        extra_routes=[
            web.get("/metrics", metrics_page),
            web.get("/healthz", healthz),
            web.get(openapi.OPENAPI_PATH, openapi_document),
            web.get("/ui", to_dashboard),
        ],
        mounts={"/ui": dashboard.app()},
        stream=streams,
    )

    def request_done(route: str, method: str, code: int, seconds: float) -> None:
        metrics.http_request(route=route, method=method, code=code, seconds=seconds)

    app.middlewares.append(measured.middleware(request_done))
    # Request bodies are read as sent: a compressed one is refused (415, hub/api/rest.py).
    runner = web.AppRunner(app, access_log=None, auto_decompress=False)
    await runner.setup()
    ssl_context = http_context(tls) if tls else None
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or ()
    return runner, (sockets[0].getsockname()[1] if sockets else port)
