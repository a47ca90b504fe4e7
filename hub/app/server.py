"""Wiring: the only module that knows every part of the hub.

`HubServer` opens the store, builds the service context, the sync pieces (fanout, ingest,
liveness, the desired-state pump), starts both listeners (`hub.app.listeners`) and the
periodic chores (`hub.app.chores`), hears what other hubs commit, and stops it all in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
from aiohttp import web

from hub import __version__
from hub.api import control, watch
from hub.api.auth import ENV_ADMIN_TOKEN, Authenticator, check_token, load_or_create_token
from hub.app import chores, listeners
from hub.metrics import HubMetrics
from hub.service import clusters as cluster_service
from hub.service import deployments as deployment_service
from hub.service import fleet as fleet_service
from hub.service import ingest as ingest_service
from hub.service import sync as sync_service
from hub.service.context import (
    DESIRED_CHANNEL,
    SUPERSEDE_CHANNEL,
    TERM_CHANNEL,
    ServiceContext,
    Settings,
)
from hub.store import port as store_port
from hub.sync.fanout import Fanout
from hub.sync.ingest import IngestQueue
from hub.sync.liveness import LivenessRecorder, ReporterWatch, StalenessWatch
from hub.sync.pump import DesiredPump
from hub.sync.ratelimit import TokenBucket
from hub.sync.session import SyncServicer
from hub.tls import TlsConfig, check_exposure

log = logging.getLogger("wingsmith.hub")


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

    async def start(self) -> None:
        config = self.config
        db = self._open_store()
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

        def write(reports: Sequence[ingest_service.Report]) -> ingest_service.IngestOutcome:
            outcome = ingest_service.ingest_reports(ctx, reports)
            self.metrics.ingested(batches=len(reports), records=outcome.records)
            for refusal in outcome.device_refusals:
                self.metrics.refused_devices(cluster_id=refusal.cluster_id, kind=refusal.kind)
            return outcome

        # One thread writes what the streams bring (observations, liveness): the loop keeps
        # serving streams meanwhile, and those writes keep their order.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-writer")
        self.ingest = IngestQueue(write=write, executor=self._writer, before_write=fanout.idle)
        pump = DesiredPump(ctx=ctx, fanout=fanout, metrics=self.metrics)
        self._watch_metrics(ctx, fanout)
        handlers = control.ControlHandlers(ctx)
        authenticator = Authenticator(self.admin_token, ctx)
        self.watch_feed = watch.WatchFeed(ctx)
        streams = control.stream_dispatcher(self.watch_feed, authenticator)
        await self._start_listeners(ctx, fanout, handlers, authenticator, streams)
        self._tasks = [
            asyncio.create_task(pump.run(), name="desired-pump"),
            asyncio.create_task(self._liveness.run(self._writer), name="liveness"),
            asyncio.create_task(staleness.run(self._writer), name="staleness"),
            asyncio.create_task(reporters.run(self._writer), name="reporters"),
            asyncio.create_task(self.ingest.run(), name="ingest"),
            asyncio.create_task(chores.prune_tombstones(ctx, self._writer), name="tombstones"),
            asyncio.create_task(chores.heartbeat(ctx, fanout), name="hub-heartbeat"),
            asyncio.create_task(chores.prune_audit(ctx), name="audit-retention"),
            asyncio.create_task(
                chores.refusal_summaries(ctx, handlers.refusals), name="refusal-summaries"
            ),
            asyncio.create_task(chores.trim_memory(), name="memory-trim"),
            asyncio.create_task(chores.rollout_waves(ctx), name="rollout-waves"),
            asyncio.create_task(chores.failovers(ctx, flush_s), name="failovers"),
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

    def _open_store(self) -> store_port.Store:
        """Refuse an exposed plaintext listener or a bad admin token, then open (or create and
        migrate) the store and read or make the admin token."""
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
        return db

    def _watch_metrics(self, ctx: ServiceContext, fanout: Fanout) -> None:
        """The gauges read when /metrics is scraped."""
        config = self.config
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

    async def _start_listeners(
        self,
        ctx: ServiceContext,
        fanout: Fanout,
        handlers: control.ControlHandlers,
        authenticator: Authenticator,
        streams: control.StreamDispatch,
    ) -> None:
        """The agents' stream service, then the gRPC and HTTP listeners serving it and the
        control API."""
        assert self.ingest is not None and self._liveness is not None
        config = self.config
        self._sync = SyncServicer(
            ctx=ctx,
            fanout=fanout,
            ingest=self.ingest,
            liveness=self._liveness,
            handshakes=TokenBucket(
                rate_per_s=config.handshakes_per_s, burst=config.handshake_burst
            ),
            metrics=self.metrics,
            require_client_identity=bool(config.tls and config.tls.client_ca_file),
            writer=self._writer,
        )
        self._grpc, self.grpc_port = await listeners.start_grpc(
            listen=config.grpc_listen,
            tls=config.tls,
            max_connection_age_s=config.max_connection_age_s,
            max_connection_age_grace_s=config.max_connection_age_grace_s,
            metrics=self.metrics,
            authenticator=authenticator,
            refused=listeners.grpc_refusals(handlers, authenticator, ctx),
            sync=self._sync,
            dispatch=control.dispatcher(handlers, authenticator, ctx, edge="grpc"),
            streams=streams,
        )
        http_host, http_port = split_address(config.http_listen)
        self._http, self.http_port = await listeners.start_http(
            host=http_host,
            port=http_port,
            tls=config.tls,
            metrics=self.metrics,
            admin_token=self.admin_token,
            ctx=ctx,
            handlers=handlers,
            authenticator=authenticator,
            dispatch=control.rest_dispatcher(handlers, authenticator, ctx),
            streams=streams,
            feed=self.watch_feed,
        )

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
        if self._sync is not None:
            self._sync.close()
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


def _redacted(url: str) -> str:
    """A database URL fit for a log line: the password left out."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)
