"""Wiring: the only module that knows every part of the hub.

`HubServer` opens the store, builds the service context, the sync pieces (fanout, ingest,
liveness) and both listeners: gRPC (ClusterSync, ControlService, health, reflection) and HTTP
(the REST gateway, /metrics, /healthz). `main` is `wingsmith hub` and `python -m hub`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import json
import logging
import os
import pathlib
import re
import secrets
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
from aiohttp import web
from google.protobuf import descriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from common import logformat
from hub import __version__, tracing
from hub.api import control, grpc_control, grpc_edge, measured, openapi, rest, watch
from hub.api.auth import (
    ENV_ADMIN_TOKEN,
    MIN_TOKEN_LENGTH,
    Authenticator,
    check_token,
    load_or_create_token,
)
from hub.errors import WingsmithError
from hub.metrics import HubMetrics, exposition
from hub.service import access as access_service
from hub.service import clusters as cluster_service
from hub.service import deployments as deployment_service
from hub.service import failover as failover_service
from hub.service import fleet as fleet_service
from hub.service import rollouts as rollouts_service
from hub.service import sync as sync_service
from hub.service.context import (
    DESIRED_CHANNEL,
    SUPERSEDE_CHANNEL,
    TERM_CHANNEL,
    ServiceContext,
    Settings,
)
from hub.store import port as store_port
from hub.sync.episodes import FaultEpisode
from hub.sync.fanout import Fanout
from hub.sync.ingest import IngestQueue
from hub.sync.liveness import LivenessRecorder, ReporterWatch, StalenessWatch
from hub.sync.pump import DesiredPump
from hub.sync.ratelimit import TokenBucket
from hub.sync.session import SyncServicer
from hub.tls import TlsConfig, check_exposure, http_context, server_credentials
from hub.ui.dashboard import Dashboard, SessionStore
from wingsmith.v1 import control_pb2, sync_pb2, sync_pb2_grpc

log = logging.getLogger("wingsmith.hub")

# What the hub reads: an agent's largest observation batch (10,000 records, a few MB) or a
# control request fits many times over; a bigger message is refused (RESOURCE_EXHAUSTED)
# before it is buffered whole. What it sends (a desired-state snapshot of a large cluster)
# may be larger: the agent reads up to 64 MiB.
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
MAX_SEND_BYTES = 64 * 1024 * 1024
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class HubConfig:
    db_path: str
    grpc_listen: str = "127.0.0.1:50051"
    http_listen: str = "127.0.0.1:8080"
    # None: $WINGSMITH_ADMIN_TOKEN, else generated beside the database.
    admin_token: str | None = None
    settings: Settings = field(default_factory=Settings)
    synchronous: str = "NORMAL"
    # Accept an empty --db file and create the schema in it (refused otherwise: an empty file
    # is more often the wrong path or a lost database than a wish for a new one).
    init_db: bool = False
    handshakes_per_s: float = 500.0
    handshake_burst: int = 1000
    liveness_flush_s: float = 1.0
    tls: TlsConfig | None = None
    # Accept plaintext on a non-loopback address (refused otherwise).
    insecure: bool = False
    # Long streams are closed after this age (plus grace) so agents reconnect and rebalance
    # over the hubs behind a load balancer; the agent reconnects with jittered backoff.
    max_connection_age_s: float = 30 * 60.0
    max_connection_age_grace_s: float = 5 * 60.0
    # wingsmith_deployments{phase} is recomputed at most this often.
    phase_metrics_interval_s: float = 15.0
    # The per-cluster and per-project gauges are read from the store at most this often.
    fleet_metrics_interval_s: float = 5.0


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class HubServer:
    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self.metrics = HubMetrics(version=__version__)
        self.grpc_port = 0
        self.http_port = 0
        self.admin_token = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._grpc: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self._db: store_port.Store | None = None
        self._listening: store_port.Listening | None = None
        self.watch_feed: watch.WatchFeed | None = None
        self._sync: SyncServicer | None = None
        self._liveness: LivenessRecorder | None = None
        self._writer: ThreadPoolExecutor | None = None
        self.ingest: IngestQueue | None = None
        self.ctx: ServiceContext | None = None
        self._handlers: control.ControlHandlers | None = None
        self._authenticator: Authenticator | None = None

    async def start(self) -> None:
        config = self.config
        check_exposure(
            hosts=[split_address(config.grpc_listen)[0], split_address(config.http_listen)[0]],
            tls=config.tls,
            insecure=config.insecure,
        )
        if config.admin_token:
            check_token(config.admin_token)  # before the database is opened or migrated
        elif os.environ.get(ENV_ADMIN_TOKEN, "").strip():
            check_token(os.environ[ENV_ADMIN_TOKEN].strip())
        if store_port.is_postgres(config.db_path) and not (
            config.admin_token or os.environ.get(ENV_ADMIN_TOKEN, "").strip()
        ):
            # Several hubs share the database: none may generate a token of its own.
            raise ValueError(f"a PostgreSQL store needs the admin token in ${ENV_ADMIN_TOKEN}")
        db = store_port.open_store(
            config.db_path,
            **(
                {}
                if store_port.is_postgres(config.db_path)
                else {"synchronous": config.synchronous, "init": config.init_db}
            ),
        )
        self._db = db
        self.admin_token, source = (
            (config.admin_token, "configuration")
            if config.admin_token
            else load_or_create_token(store_port.sqlite_path(config.db_path))
        )
        check_token(self.admin_token)
        log.info("admin token from %s", source)
        fanout = Fanout(asyncio.get_running_loop())
        ctx = ServiceContext(
            db=self.metrics.timed(db),
            settings=config.settings,
            publisher=fanout,
            hooks=self.metrics,
        )
        self.ctx = ctx
        ctx.hub_id = "hub_" + secrets.token_hex(6)
        # A write, like every one a running hub makes: off the loop (another hub's streams may
        # be served on it, in tests), waiting there for the store's lock if it must.
        await asyncio.to_thread(sync_service.start_hub, ctx)
        # last_seen may lag by a flush: keep that well inside the grace period.
        flush_s = min(config.liveness_flush_s, config.settings.stale_after_s / 4)
        self._liveness = LivenessRecorder(
            flush=lambda seen, applied: sync_service.record_liveness(
                ctx, last_seen=seen, applied=applied
            ),
            clock=time.time,
            interval_s=flush_s,
        )
        staleness = StalenessWatch(
            stale_now=lambda: cluster_service.stale_ids(ctx),
            changed=lambda ids: cluster_service.liveness_changed(ctx, ids),
            interval_s=flush_s,
        )
        reporters = ReporterWatch(
            unreported=lambda: sync_service.unreported_nodes(ctx),
            drop=lambda nodes: sync_service.drop_nodes(ctx, nodes),
            clock=time.monotonic,
            grace_s=config.settings.stale_after_s,
            interval_s=flush_s,
        )

        def write(reports: Sequence[sync_service.Report]) -> sync_service.IngestOutcome:
            outcome = sync_service.ingest_reports(ctx, reports)
            self.metrics.ingested(batches=len(reports), records=outcome.records)
            for refusal in outcome.device_refusals:
                self.metrics.refused_devices(cluster_id=refusal.cluster_id, kind=refusal.kind)
            return outcome

        # One thread writes what the streams bring (observations, liveness): the loop keeps
        # serving streams meanwhile, and those writes keep their order.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-writer")
        self.ingest = IngestQueue(write=write, executor=self._writer, before_write=fanout.idle)
        pump = DesiredPump(ctx=ctx, fanout=fanout, metrics=self.metrics)
        self.metrics.agents_connected.set_function(fanout.connected)
        self.metrics.backlog.set_function(lambda: self.ingest.backlog if self.ingest else 0)
        self.metrics.watch_phases(
            lambda: deployment_service.phase_counts(ctx),
            min_interval_s=config.phase_metrics_interval_s,
        )
        self.metrics.clusters_behind.set_function(lambda: sync_service.clusters_behind(ctx))
        self.metrics.watch_fleet(
            lambda: fleet_service.read(ctx),
            clock=ctx.clock,
            min_interval_s=config.fleet_metrics_interval_s,
        )
        handlers = self._handlers = control.ControlHandlers(ctx)
        authenticator = self._authenticator = Authenticator(self.admin_token, ctx)
        self.watch_feed = watch.WatchFeed(ctx)
        streams = control.stream_dispatcher(self.watch_feed, authenticator)
        await self._start_grpc(
            ctx, fanout, control.dispatcher(handlers, authenticator, ctx, edge="grpc"), streams
        )
        await self._start_http(
            control.dispatcher(handlers, authenticator, ctx, edge="rest"), streams
        )
        self._tasks = [
            asyncio.create_task(pump.run(), name="desired-pump"),
            asyncio.create_task(self._liveness.run(self._writer), name="liveness"),
            asyncio.create_task(staleness.run(self._writer), name="staleness"),
            asyncio.create_task(reporters.run(self._writer), name="reporters"),
            asyncio.create_task(self.ingest.run(), name="ingest"),
            asyncio.create_task(self._prune_tombstones(ctx), name="tombstones"),
            asyncio.create_task(self._heartbeat(ctx, fanout), name="hub-heartbeat"),
            asyncio.create_task(self._prune_audit(ctx), name="audit-retention"),
            asyncio.create_task(self._refusal_summaries(ctx), name="refusal-summaries"),
            asyncio.create_task(self._trim_memory(), name="memory-trim"),
            asyncio.create_task(self._rollout_waves(ctx), name="rollout-waves"),
            asyncio.create_task(self._failovers(ctx, flush_s), name="failovers"),
        ]
        self._listening = self._listen(db, fanout)
        log.info(
            "hub %s up: grpc %s:%d, http %s:%d, db %s (schema v%d)",
            __version__,
            split_address(config.grpc_listen)[0],
            self.grpc_port,
            split_address(config.http_listen)[0],
            self.http_port,
            _redacted(config.db_path),
            db.schema_version,
        )

    async def _start_grpc(
        self,
        ctx: ServiceContext,
        fanout: Fanout,
        dispatch: control.Dispatch,
        streams: control.StreamDispatch,
    ) -> None:
        assert self._liveness is not None and self.ingest is not None
        assert self._authenticator is not None
        control_service = control_pb2.DESCRIPTOR.services_by_name["ControlService"]
        server = grpc.aio.server(
            # The token is checked before the request is read; then a request that does not
            # parse is INVALID_ARGUMENT (hub/api/grpc_edge.py).
            interceptors=[
                grpc_edge.Measured(self._grpc_call),
                grpc_edge.Authenticated(
                    [control_service.full_name], self._authenticator.check_before_body
                ),
                grpc_edge.MalformedRequests(self._grpc_refused(ctx, control_service)),
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
                ("grpc.max_connection_age_ms", int(self.config.max_connection_age_s * 1000)),
                (
                    "grpc.max_connection_age_grace_ms",
                    int(self.config.max_connection_age_grace_s * 1000),
                ),
            ],
        )
        self._sync = SyncServicer(
            ctx=ctx,
            fanout=fanout,
            ingest=self.ingest,
            liveness=self._liveness,
            handshakes=TokenBucket(
                rate_per_s=self.config.handshakes_per_s, burst=self.config.handshake_burst
            ),
            metrics=self.metrics,
            require_client_identity=bool(self.config.tls and self.config.tls.client_ca_file),
            writer=self._writer,
        )
        sync_pb2_grpc.add_ClusterSyncServicer_to_server(self._sync, server)
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
        if self.config.tls is not None:
            credentials = server_credentials(self.config.tls)
            self.grpc_port = server.add_secure_port(self.config.grpc_listen, credentials)
        else:
            self.grpc_port = server.add_insecure_port(self.config.grpc_listen)
        await server.start()
        self._grpc = server

    def _grpc_refused(
        self, ctx: ServiceContext, service: descriptor.ServiceDescriptor
    ) -> grpc_edge.Refused:
        """A malformed ControlService request goes to the audit log (the agent stream's
        messages are the agents' own writes, never audited per message)."""
        assert self._handlers is not None and self._authenticator is not None
        record = control.refusal_recorder(self._handlers, self._authenticator, ctx, edge="grpc")

        async def refused(path: str, metadata: Mapping[str, str], error: WingsmithError) -> None:
            name, _, method = path.strip("/").partition("/")
            if name == service.full_name and method in service.methods_by_name:
                await record(service.methods_by_name[method], metadata, error)

        return refused

    async def _start_http(
        self, dispatch: control.Dispatch, streams: control.StreamDispatch
    ) -> None:
        assert self.ctx is not None and self._handlers is not None
        assert self._authenticator is not None
        ctx, authenticator = self.ctx, self._authenticator
        dashboard = Dashboard(
            service=control_pb2.DESCRIPTOR.services_by_name["ControlService"],
            dispatch=control.principal_dispatcher(self._handlers, ctx, edge="dashboard"),
            admin_token=self.admin_token,
            authenticate=lambda token: authenticator.check({"authorization": f"Bearer {token}"}),
            store=SessionStore(
                open=lambda nonce, actor, expiry: access_service.open_session(
                    ctx, nonce=nonce, actor=actor, expire_time=expiry
                ),
                principal_of=lambda nonce: access_service.session_principal(ctx, nonce),
                end=lambda nonce: access_service.end_session(ctx, nonce),
            ),
            secure_cookies=self.config.tls is not None,
        )

        async def to_dashboard(_: web.Request) -> web.Response:
            raise web.HTTPMovedPermanently("/ui/")

        async def metrics(request: web.Request) -> web.Response:
            # In a thread: some gauges read the store (phases: a view of every deployment).
            # OpenMetrics when the scraper's Accept asks for it, else the text format 0.0.4.
            body, content_type = await asyncio.to_thread(
                exposition, self.metrics.registry, request.headers.get("Accept", "")
            )
            return web.Response(body=body, headers={"Content-Type": content_type})

        async def healthz(_: web.Request) -> web.Response:
            return web.json_response({"status": "serving"})

        services = [control_pb2.DESCRIPTOR.services_by_name["ControlService"]]
        # Built once: the routes and messages are fixed for the life of the process.
        contract = openapi.document(services, version=__version__)

        async def openapi_document(_: web.Request) -> web.Response:
            return web.json_response(contract)

        app = rest.build_rest_app(
            services=services,
            dispatch=dispatch,
            authenticate=authenticator.check_before_body,
            refused=control.refusal_recorder(self._handlers, authenticator, ctx, edge="rest"),
            extra_routes=[
                web.get("/metrics", metrics),
                web.get("/healthz", healthz),
                web.get(openapi.OPENAPI_PATH, openapi_document),
                web.get("/ui", to_dashboard),
            ],
            mounts={"/ui": dashboard.app()},
            stream=streams,
        )
        app.middlewares.append(measured.middleware(self._http_request))
        # Request bodies are read as sent: a compressed one is refused (415, hub/api/rest.py).
        runner = web.AppRunner(app, access_log=None, auto_decompress=False)
        await runner.setup()
        host, port = split_address(self.config.http_listen)
        ssl_context = http_context(self.config.tls) if self.config.tls else None
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or ()
        self.http_port = sockets[0].getsockname()[1] if sockets else port
        self._http = runner

    def _grpc_call(self, service: str, method: str, code: str, seconds: float | None) -> None:
        self.metrics.grpc_call(service=service, method=method, code=code, seconds=seconds)

    def _http_request(self, route: str, method: str, code: int, seconds: float) -> None:
        self.metrics.http_request(route=route, method=method, code=code, seconds=seconds)

    async def _prune_tombstones(self, ctx: ServiceContext) -> None:
        while True:
            with contextlib.suppress(Exception):
                # A write: off the loop, in the writer thread (docs/stream.md).
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, sync_service.prune_tombstones, ctx
                )
            await asyncio.sleep(3600)

    def _listen(self, db: store_port.Store, fanout: Fanout) -> store_port.Listening:
        """Hear what other hubs on the store committed: changed desired state, streams they
        superseded, leader terms they persisted (docs/architecture.md "Several hubs")."""
        loop = asyncio.get_running_loop()

        def on_notify(channel: str, payload: str) -> None:
            if channel == DESIRED_CHANNEL:
                fanout.desired_changed(payload.split(","))
            elif channel == SUPERSEDE_CHANNEL:
                loop.call_soon_threadsafe(fanout.supersede_sessions, payload.split(","))
            elif channel == TERM_CHANNEL and self._sync is not None:
                cluster_id, _, term = payload.partition(" ")
                loop.call_soon_threadsafe(
                    self._sync.leadership.newer_term_elsewhere, cluster_id, int(term)
                )

        def on_reconnect() -> None:
            # Notifications may have been lost while the connection was down: every stream
            # here reads its delta again (a delta by revision: nothing is sent twice).
            fanout.desired_changed(fanout.cluster_ids())

        return db.listen(
            [DESIRED_CHANNEL, SUPERSEDE_CHANNEL, TERM_CHANNEL], on_notify, on_reconnect
        )

    async def _heartbeat(self, ctx: ServiceContext, fanout: Fanout) -> None:
        fault = FaultEpisode(log, "hub heartbeat")
        while True:
            await asyncio.sleep(ctx.settings.hub_heartbeat_s)
            try:
                alive = await asyncio.to_thread(sync_service.hub_heartbeat, ctx)
            except Exception as e:  # the database may be down for a while; beat again later
                fault.failed(e)
                continue
            fault.succeeded()
            if not alive:
                log.warning("this hub had been declared dead: closing its streams")
                for cluster_id in fanout.cluster_ids():
                    for listener in fanout.listeners(cluster_id):
                        listener.supersede()

    async def _trim_memory(self) -> None:
        """Give the C allocator's freed memory back to the system every minute (glibc only).
        Request bodies up to 1 MiB, and what parsing them builds, are allocated and freed on
        the event loop; glibc keeps the freed pages of its heap for reuse, so RSS after a
        burst of large requests stayed tens of MiB above what is live (docs/operations.md
        "Memory after a fuzz"). malloc_trim returns them; it takes milliseconds."""
        trim = _malloc_trim()
        if trim is None:
            return
        while True:
            await asyncio.sleep(MEMORY_TRIM_S)
            await asyncio.to_thread(trim, 0)

    async def _refusal_summaries(self, ctx: ServiceContext) -> None:
        """Each minute, the refusals not recorded one by one become summary records
        (docs/security.md "Refusals, bounded")."""
        assert self._handlers is not None
        budget = self._handlers.refusals
        while True:
            await asyncio.sleep(access_service.REFUSAL_WINDOW_S / 2)
            await asyncio.to_thread(access_service.flush_refusals, ctx, budget)

    async def _prune_audit(self, ctx: ServiceContext) -> None:
        """Audit records older than the retention go, at start and hourly after."""
        while True:
            try:
                pruned = await asyncio.to_thread(
                    access_service.prune_audit,
                    ctx,
                    retention_s=ctx.settings.audit_retention_s,
                )
                if pruned:
                    log.info("pruned %d audit records past the retention", pruned)
            except WingsmithError as e:
                log.warning("audit pruning failed: %s", e)
            await asyncio.sleep(3600)

    async def _rollout_waves(self, ctx: ServiceContext) -> None:
        """Rollouts in waves whose deadline passed pause; ones with room for a wave go on
        (observations ending a deployment's rollout decide at once; this catches time)."""
        fault = FaultEpisode(log, "rollout wave pass")
        while True:
            await asyncio.sleep(ctx.settings.rollout_sweep_s)
            try:
                await asyncio.to_thread(rollouts_service.sweep, ctx)
            except WingsmithError as e:  # the store may be down for a while: next pass
                fault.failed(e)
            else:
                fault.succeeded()

    async def _failovers(self, ctx: ServiceContext, interval_s: float) -> None:
        """Failover, failback and drain steps (hub/service/failover.py), about once a second:
        a read, and a write only when a workload's plan changes something."""
        fault = FaultEpisode(log, "failover step")
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(failover_service.tick, ctx)
            except Exception as e:  # a defect's first occurrence keeps its traceback
                fault.failed(e)
            else:
                fault.succeeded()

    async def stop(self, grace_s: float = 1.0) -> None:
        if self._listening is not None:
            await asyncio.to_thread(self._listening.close)
            self._listening = None
        if self.watch_feed is not None:
            await self.watch_feed.stop()
        if self._grpc is not None:
            await self._grpc.stop(grace_s)
        if self._http is not None:
            await self._http.cleanup()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._writer is not None:
            # A write already handed to the thread finishes before the last flush below.
            await asyncio.get_running_loop().run_in_executor(None, self._writer.shutdown)
        if self.ingest is not None:
            with contextlib.suppress(Exception):
                self.ingest.flush_now()
        if self._liveness is not None:
            with contextlib.suppress(Exception):
                self._liveness.flush()
        if self.ctx is not None and self._db is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(sync_service.stop_hub, self.ctx)
        if self._db is not None:
            self._db.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wingsmith hub",
        description="Run the Wingsmith hub. (`wingsmith hub backup --help`: online backups.)",
        epilog=f"The admin token is ${ENV_ADMIN_TOKEN} (at least {MIN_TOKEN_LENGTH} characters),"
        " else one generated on first start and kept in <db>.admin-token (mode 0600).",
    )
    parser.add_argument(
        "--db",
        "--database-url",
        dest="db",
        default="wingsmith.db",
        help="SQLite database file, or postgresql://USER@HOST/DB for several hubs on one"
        " PostgreSQL (default: %(default)s)",
    )
    parser.add_argument(
        "--init-db",
        action="store_true",
        help="create the database in an existing empty --db file (refused otherwise; a missing"
        " file is always created)",
    )
    parser.add_argument(
        "--grpc-listen", default="127.0.0.1:50051", help="HOST:PORT for gRPC (default: %(default)s)"
    )
    parser.add_argument(
        "--http-listen", default="127.0.0.1:8080", help="HOST:PORT for REST (default: %(default)s)"
    )
    parser.add_argument(
        "--stale-after",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds of silence before a cluster is stale (default: %(default)s)",
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds between agent heartbeats; less than --stale-after (default: %(default)s)",
    )
    parser.add_argument(
        "--preemption",
        action="store_true",
        help="let a waiting higher-priority workload preempt lower-priority managed"
        " deployments on its cluster (docs/admission.md; default: off)",
    )
    parser.add_argument(
        "--audit-retention",
        default="90d",
        help="how long audit records are kept, e.g. 90d, 720h (default: %(default)s)",
    )
    parser.add_argument(
        "--sqlite-synchronous",
        choices=["NORMAL", "FULL"],
        default="NORMAL",
        help="FULL also survives power loss, at one fsync per commit (default: %(default)s)",
    )
    parser.add_argument("--tls-cert", help="PEM certificate chain for both listeners")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--client-ca",
        help="PEM CA: require client certificates on the gRPC listener (mutual TLS)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext on a non-loopback address (refused otherwise)",
    )
    parser.add_argument(
        "--max-connection-age",
        default="30m",
        help="close streams older than this so agents rebalance over hubs, e.g. 30m, 3600s"
        " (default: %(default)s)",
    )
    parser.add_argument(
        "--max-connection-age-grace",
        default="5m",
        help="grace period after --max-connection-age (default: %(default)s)",
    )
    parser.add_argument(
        "--ready-file", help="write the bound addresses as JSON here once listening (for tools)"
    )
    parser.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)"
    )
    parser.add_argument(
        "--log-format",
        choices=logformat.FORMATS,
        default="text",
        help="text lines, or JSON objects with the trace and span ids (default: %(default)s)",
    )
    parser.add_argument(
        "--otlp-endpoint",
        default=os.environ.get(tracing.ENV_ENDPOINT, ""),
        help="send traces to this OpenTelemetry collector (OTLP/gRPC), e.g. http://otel:4317;"
        f" default ${tracing.ENV_ENDPOINT}, else tracing is off",
    )
    return parser.parse_args(argv)


class UsageError(Exception):
    """A flag (or the environment) is wrong: said before anything starts, exit status 2."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(f"{flag}: {problem}")


def check_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> None:
    """Refuse bad flags before the hub touches its database or a port (UsageError)."""
    if args.log_level.upper() not in LOG_LEVELS:
        raise UsageError("--log-level", f"expected one of {', '.join(LOG_LEVELS)}")
    if args.otlp_endpoint and not args.otlp_endpoint.startswith(("http://", "https://")):
        raise UsageError(
            "--otlp-endpoint",
            f"expected http://HOST:PORT or https://HOST:PORT, got {args.otlp_endpoint!r}",
        )
    for flag, address in (("--grpc-listen", args.grpc_listen), ("--http-listen", args.http_listen)):
        try:
            port = split_address(address)[1]
        except ValueError as e:
            raise UsageError(flag, str(e)) from None
        if port > 65535:
            raise UsageError(flag, f"port {port} is not 0..65535 (0: any free port)")
    for flag, value in (
        ("--stale-after", args.stale_after),
        ("--heartbeat-interval", args.heartbeat_interval),
    ):
        if not value > 0:
            raise UsageError(flag, f"expected a number of seconds above 0, got {value:g}")
    if args.heartbeat_interval >= args.stale_after:
        raise UsageError(
            "--heartbeat-interval",
            f"{args.heartbeat_interval:g}s must be shorter than --stale-after"
            f" ({args.stale_after:g}s), or quiet clusters go stale between heartbeats",
        )
    for flag in ("--max-connection-age", "--max-connection-age-grace", "--audit-retention"):
        _duration(getattr(args, flag[2:].replace("-", "_")), flag)
    _check_tls(args)
    token = environ.get(ENV_ADMIN_TOKEN, "").strip()
    if store_port.is_postgres(args.db):
        if not token:
            raise UsageError(
                "--db",
                f"a PostgreSQL store is shared by every hub: set ${ENV_ADMIN_TOKEN} (no token"
                " file is generated beside a database URL)",
            )
    else:
        parent = pathlib.Path(store_port.sqlite_path(args.db)).resolve().parent
        if not parent.is_dir():
            raise UsageError("--db", f"directory {parent} does not exist")
    if token:
        try:
            check_token(token)
        except ValueError as e:
            raise UsageError(f"${ENV_ADMIN_TOKEN}", str(e)) from None


def _check_tls(args: argparse.Namespace) -> None:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert", "--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        raise UsageError("--client-ca", "needs --tls-cert and --tls-key")
    for flag, path in (
        ("--tls-cert", args.tls_cert),
        ("--tls-key", args.tls_key),
        ("--client-ca", args.client_ca),
    ):
        if path and not os.access(path, os.R_OK):
            raise UsageError(flag, f"cannot read {path}")


def settings_of(args: argparse.Namespace) -> Settings:
    """The service settings the command line asks for (checked by check_args)."""
    return Settings(
        stale_after_s=args.stale_after,
        heartbeat_interval_s=args.heartbeat_interval,
        audit_retention_s=_duration(args.audit_retention, "--audit-retention"),
        preemption=args.preemption,
    )


def main(argv: Sequence[str] | None = None) -> None:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["backup"]:
        # `wingsmith hub backup PATH`: an online copy of the database beside a serving hub.
        from hub import backup

        raise SystemExit(backup.main(words[1:]))
    args = parse_args(words)
    try:
        check_args(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    logformat.configure(args.log_level, args.log_format)
    if args.otlp_endpoint:
        tracing.configure(args.otlp_endpoint)
    config = HubConfig(
        db_path=args.db,
        grpc_listen=args.grpc_listen,
        http_listen=args.http_listen,
        synchronous=args.sqlite_synchronous,
        init_db=args.init_db,
        settings=settings_of(args),
        tls=TlsConfig(args.tls_cert, args.tls_key, args.client_ca) if args.tls_cert else None,
        insecure=args.insecure,
        max_connection_age_s=_duration(args.max_connection_age, "--max-connection-age"),
        max_connection_age_grace_s=_duration(
            args.max_connection_age_grace, "--max-connection-age-grace"
        ),
    )
    try:
        asyncio.run(_serve(config, args.ready_file))
    except (ValueError, WingsmithError) as e:
        raise SystemExit(f"error: {e}") from e


def _duration(text: str, flag: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    for suffix in ("ms", "s", "m", "h", "d"):
        if text.endswith(suffix):
            number = text[: -len(suffix)]
            break
    else:
        number, suffix = text, "s"
    try:
        value = float(number) * units[suffix]
    except ValueError:
        raise UsageError(flag, "expected a duration such as 30m or 90s") from None
    if value < 0 or (value == 0 and flag in ("--max-connection-age", "--audit-retention")):
        raise UsageError(flag, "expected a duration above 0, such as 30m or 90s")
    return value


MEMORY_TRIM_S = 60.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None on another C library (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def tune_gc() -> None:
    """Fewer cyclic-GC passes for a long-running server that allocates many short-lived
    objects (every observation record becomes a few): what was built at start-up (modules,
    caches) is frozen out of the collector's scans, and a young collection runs every 50,000
    allocations instead of 700. The hub makes few reference cycles; memory is still reclaimed
    by reference counting as before. In-process at 2,000 clusters ingest wrote 40% more
    records per second."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


async def _serve(config: HubConfig, ready_file: str | None) -> None:
    server = HubServer(config)
    await server.start()
    tune_gc()
    if ready_file:
        grpc_host = split_address(config.grpc_listen)[0]
        http_host = split_address(config.http_listen)[0]
        pathlib.Path(ready_file).write_text(
            json.dumps(
                {
                    "grpc": f"{grpc_host}:{server.grpc_port}",
                    "http": f"{http_host}:{server.http_port}",
                }
            )
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await server.stop()


def _redacted(url: str) -> str:
    """A database URL fit for a log line: the password left out."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)
