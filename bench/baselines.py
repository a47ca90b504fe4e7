"""The building-block limits each hub figure is printed beside.

- A bare grpc.aio bidirectional stream server (`BareServer`, its own process like the hub,
  same server options): a stream is opened with a hello and answered with a welcome, like the
  hub's handshake, with no authentication, database or protocol behind it. `Push` (unary) puts
  a tagged message on one stream or on every stream, as a desired-state change would; `Count`
  says how many messages the server has read. Clients are `bare_*` commands of the same worker
  processes, on the same channel layout as the agents (bench/workers.py).
- A bare SQLite batched upsert: rows shaped like the hub's `replicas` table (same columns,
  primary key, unique key and index), `INSERT .. ON CONFLICT DO UPDATE` with executemany in
  transactions of a given size, WAL, synchronous=NORMAL: the database cost per record without
  the hub's validation, conversion and bookkeeping.
- The pure admission decision: `hub.admission.decide` over the same number of pending demands,
  no store: what deciding costs without reading and writing the decisions.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pathlib
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from hub import admission

BARE_SERVICE = "bench.Bare"


# -- the bare gRPC stream server --------------------------------------------------------------


class BareServer:
    def __init__(self) -> None:
        self.streams: dict[int, asyncio.Queue[bytes]] = {}
        self.received = 0

    async def stream(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        hello = await anext(requests)
        index = int(bytes(hello).partition(b":")[2] or b"-1")
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.streams[index] = queue
        reader = asyncio.create_task(self._read(requests))
        try:
            yield b"welcome"
            while True:
                waiter = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if waiter not in done:
                    waiter.cancel()
                    return
                yield waiter.result()
        finally:
            reader.cancel()
            if self.streams.get(index) is queue:
                del self.streams[index]

    async def _read(self, requests: AsyncIterator[bytes]) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            async for _ in requests:
                self.received += 1

    async def push(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        target, _, tag = bytes(request).partition(b":")
        if target == b"*":
            for queue in self.streams.values():
                queue.put_nowait(tag)
        else:
            one = self.streams.get(int(target))
            if one is not None:
                one.put_nowait(tag)
        return b""

    async def count(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return f"{self.received} {len(self.streams)}".encode()


def bare_server_main(conn: multiprocessing.connection.Connection, log_path: str) -> None:
    # gRPC prints a traceback per stream cancelled at shutdown: keep them out of the report.
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    asyncio.run(_serve_bare(conn))


async def _serve_bare(conn: multiprocessing.connection.Connection) -> None:
    bare = BareServer()
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
        ]
    )
    handlers = {
        "Stream": grpc.stream_stream_rpc_method_handler(bare.stream),
        "Push": grpc.unary_unary_rpc_method_handler(bare.push),
        "Count": grpc.unary_unary_rpc_method_handler(bare.count),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(BARE_SERVICE, handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_reader(conn.fileno(), stop.set)  # the parent closed the pipe or said stop
    conn.send(port)
    await stop.wait()
    await server.stop(0.2)


class BareServerProcess:
    """The bare server in its own process, and a control channel to it."""

    def __init__(self, log_path: pathlib.Path) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe(duplex=True)
        self._proc = context.Process(
            target=bare_server_main,
            args=(child, str(log_path)),
            name="bench-bare-server",
            daemon=True,
        )
        self._proc.start()
        child.close()
        if not self._conn.poll(60):
            self.close()
            raise RuntimeError("the bare server did not start")
        self.port: int = self._conn.recv()
        self._channel = grpc.aio.insecure_channel(self.target)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self._proc.pid is not None
        return self._proc.pid

    async def push(self, target: str, tag: str) -> None:
        call = self._channel.unary_unary(f"/{BARE_SERVICE}/Push")
        await call(f"{target}:{tag}".encode())

    async def count(self) -> tuple[int, int]:
        call = self._channel.unary_unary(f"/{BARE_SERVICE}/Count")
        received, streams = bytes(await call(b"")).split()
        return int(received), int(streams)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._channel.close()
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.send("stop")
        with contextlib.suppress(Exception):
            self._conn.close()
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=5)


# -- the bare SQLite batched upsert -----------------------------------------------------------

_TABLE = """
CREATE TABLE replicas (
    replica_id     TEXT PRIMARY KEY,
    deployment_id  TEXT NOT NULL,
    cluster_id     TEXT NOT NULL,
    namespace      TEXT NOT NULL,
    name           TEXT NOT NULL,
    node_id        TEXT NOT NULL,
    ready          INTEGER NOT NULL,
    serving_digest TEXT NOT NULL,
    engine_version TEXT NOT NULL,
    role           TEXT NOT NULL,
    observe_ns     INTEGER NOT NULL,
    UNIQUE (cluster_id, namespace, name)
) STRICT
"""

_UPSERT = (
    "INSERT INTO replicas (replica_id, deployment_id, cluster_id, namespace, name, node_id,"
    " ready, serving_digest, engine_version, role, observe_ns)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (replica_id) DO UPDATE SET"
    " node_id = excluded.node_id, ready = excluded.ready,"
    " serving_digest = excluded.serving_digest, observe_ns = excluded.observe_ns"
)


def sqlite_upsert_rate(
    path: pathlib.Path, *, rows: int, rows_per_tx: int, working_set: int
) -> dict[str, float]:
    """Upsert `rows` rows (keys cycling over `working_set`, so after the first pass they are
    updates) in transactions of `rows_per_tx`; rows per second over the whole run."""
    for suffix in ("", "-wal", "-shm"):
        pathlib.Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_TABLE)
        conn.execute("CREATE INDEX replicas_by_deployment ON replicas (deployment_id)")
        digest = "svg_" + "ab" * 32

        def row(n: int, stamp: int) -> tuple[object, ...]:
            key = n % working_set
            return (
                f"rep_{key:016x}",
                f"dep_{key // 8:016x}",
                f"c{key // 64:05d}",
                "wingsmith",
                f"w{key // 64:05d}-vllmworker-abcde-{key % 64}",
                f"c{key // 64:05d}-node-{key % 8}",
                stamp % 2,
                digest,
                "0.11.0",
                "worker",
                stamp,
            )

        started = time.perf_counter()
        for offset in range(0, rows, rows_per_tx):
            batch = [row(n, offset + n) for n in range(offset, min(rows, offset + rows_per_tx))]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_UPSERT, batch)
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    for suffix in ("", "-wal", "-shm"):
        pathlib.Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {
        "rows": rows,
        "rows_per_tx": rows_per_tx,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed if elapsed > 0 else 0.0,
    }


# -- the pure admission decision --------------------------------------------------------------


def admission_decide_rate(demands: int, *, admit_fraction: float = 0.5) -> dict[str, float]:
    """`hub.admission.decide` over `demands` pending deployments of one project (4 devices
    each, one per cluster) whose quota admits `admit_fraction` of them."""
    pending = [
        admission.Demand(
            deployment_id=f"dep_{n:016x}",
            project="burst",
            cluster_id=f"c{n:05d}",
            device_class="H100-80GB",
            devices_per_replica=4,
            desired_replicas=1,
            admitted_replicas=0,
            enabled=True,
            pending_since=float(n),
        )
        for n in range(demands)
    ]
    view = admission.AdmissionView(
        quota_limits={("burst", "H100-80GB"): int(demands * admit_fraction) * 4},
        quota_charged={},
        cluster_free={(f"c{n:05d}", "H100-80GB"): 24 for n in range(demands)},
    )
    rounds, elapsed = 0, 0.0
    while elapsed < 0.5 or rounds < 3:
        started = time.perf_counter()
        admission.decide(pending, view)
        elapsed += time.perf_counter() - started
        rounds += 1
    return {"demands": demands, "decisions_per_s": demands * rounds / elapsed}
