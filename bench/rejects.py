"""`python -m bench.rejects`: does a stream of rejects slow the hub's other work? (issue 13)

An agent's `Reject` is a write (the deployment's rejection is stored). Written on the event
loop, 100 rejects a second raised /healthz p50 from 2 ms to 46 ms: every stream and every
HTTP request waits behind each transaction. The hub now writes them (and the rest of a
stream's bookkeeping) in its store-writer thread.

The run: a real hub process (`python -m hub`), one deployment, one raw agent stream, and
another cluster's stream reporting its nodes every 50 ms (the store's writer is busy, as in a
live fleet: a reject written on the loop waits for the writer, and the loop with it). /healthz
is timed sequentially (every 10 ms) without rejects ("idle"), then while the stream sends
rejects at a steady rate. Printed: p50 and p99 of each phase and the loaded/idle ratio (1.0:
the rejects cost the loop nothing). `--baseline-source DIR` also runs the same against the hub
of another checkout (for example `git worktree add /tmp/old <commit>`), in the same run, and
prints the ratio of the two loaded p50s.

    python -m bench.rejects [--rate 100] [--seconds 5] [--baseline-source DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import aiohttp
import grpc

from wingsmith.v1 import sync_pb2, sync_pb2_grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Phase:
    name: str
    p50_ms: float
    p99_ms: float
    requests: int


@dataclass(frozen=True)
class Run:
    label: str
    idle: Phase
    loaded: Phase
    rejects_sent: int

    @property
    def ratio(self) -> float:
        return self.loaded.p50_ms / self.idle.p50_ms if self.idle.p50_ms else 0.0


class _Hub:
    def __init__(self, workdir: pathlib.Path, source: pathlib.Path) -> None:
        self.token = "bench-" + secrets.token_hex(16)
        self.ready = workdir / "ready.json"
        self.log = (workdir / "hub.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hub",
                "--db",
                str(workdir / "hub.db"),
                "--grpc-listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
                "--ready-file",
                str(self.ready),
                "--log-level",
                "WARNING",
            ],
            cwd=source,  # `-m hub` imports the hub of that checkout
            env={**os.environ, "WINGSMITH_ADMIN_TOKEN": self.token},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not (self.ready.exists() and self.ready.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the hub did not start (see {workdir / 'hub.log'})")
            time.sleep(0.05)
        bound = json.loads(self.ready.read_text())
        self.grpc, self.http = bound["grpc"], "http://" + bound["http"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


async def _healthz(session: aiohttp.ClientSession, url: str, seconds: float) -> list[float]:
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        async with session.get(url + "/healthz") as response:
            await response.read()
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)
    return latencies


def _phase(name: str, latencies: Sequence[float]) -> Phase:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return Phase(name, statistics.median(ordered) * 1000, p99 * 1000, len(ordered))


async def _measure(
    label: str, source: pathlib.Path, *, rate: float, seconds: float, nodes: int
) -> Run:
    with tempfile.TemporaryDirectory(prefix="wingsmith-bench-rejects-") as tmp:
        hub = _Hub(pathlib.Path(tmp), source)
        try:
            return await _run(label, hub, rate=rate, seconds=seconds, nodes=nodes)
        finally:
            hub.stop()


async def _run(label: str, hub: _Hub, *, rate: float, seconds: float, nodes: int) -> Run:
    headers = {"authorization": f"Bearer {hub.token}"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def post(path: str, body: object) -> dict[str, object]:
            async with session.post(hub.http + path, json=body) as response:
                payload: dict[str, object] = await response.json()
                if response.status >= 300:
                    raise RuntimeError(f"POST {path}: {response.status} {payload}")
                return payload

        await post("/v1/projects", {"name": "bench", "quotas": {"H100-80GB": 8}})
        token = str((await post("/v1/clusters", {"cluster_id": "east"}))["token"])
        await post(
            "/v1/workloads",
            {
                "name": "llama",
                "project": "bench",
                "replicas": 1,
                "device_class": "H100-80GB",
                "placement": {"clusters": ["east"]},
                "serving": {"engine": "vllm", "engine_version": "0.11.0", "model": "m"},
            },
        )
        west = str((await post("/v1/clusters", {"cluster_id": "west"}))["token"])
        async with grpc.aio.insecure_channel(hub.grpc) as channel:
            # Background: another cluster reports its nodes steadily, so the store's writer
            # is busy as in a live fleet (a reject written on the loop waits for it).
            reporter = asyncio.create_task(_report_nodes(channel, west, nodes=nodes))
            await asyncio.sleep(1.0)
            idle = _phase("idle", await _healthz(session, hub.http, seconds))
            outgoing: asyncio.Queue[sync_pb2.AgentMessage | None] = asyncio.Queue()

            async def requests() -> AsyncIterator[sync_pb2.AgentMessage]:
                while (message := await outgoing.get()) is not None:
                    yield message

            stub = sync_pb2_grpc.ClusterSyncStub(channel)
            call = stub.Sync(requests(), metadata=(("authorization", f"Bearer {token}"),))
            hello = sync_pb2.Hello(cluster_id="east", agent_version="bench")
            outgoing.put_nowait(sync_pb2.AgentMessage(hello=hello))
            revision, deployment_id = 0, ""
            async for message in call:
                if message.HasField("desired"):
                    revision = message.desired.revision
                    deployment_id = message.desired.upserts[0].deployment_id
                    break
            sent = 0

            async def send_rejects() -> None:
                nonlocal sent
                interval, next_at = 1.0 / rate, time.monotonic()
                while True:
                    sent += 1
                    reject = sync_pb2.Reject(
                        revision=revision,
                        deployment_id=deployment_id,
                        generation=1,
                        error=f"bench reject {sent}",
                    )
                    outgoing.put_nowait(sync_pb2.AgentMessage(reject=reject))
                    next_at += interval
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))

            sender = asyncio.create_task(send_rejects())
            await asyncio.sleep(0.5)  # the stream settles into its rate
            loaded = _phase("loaded", await _healthz(session, hub.http, seconds))
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            outgoing.put_nowait(None)
            call.cancel()
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reporter
    return Run(label, idle, loaded, sent)


async def _report_nodes(channel: grpc.aio.Channel, token: str, *, nodes: int) -> None:
    """Cluster west's agent: every 50 ms a batch re-reporting `nodes` nodes of 8 GPUs, one of
    them changed (so each batch is a real write)."""
    outgoing: asyncio.Queue[sync_pb2.AgentMessage] = asyncio.Queue()

    async def requests() -> AsyncIterator[sync_pb2.AgentMessage]:
        while True:
            yield await outgoing.get()

    stub = sync_pb2_grpc.ClusterSyncStub(channel)
    call = stub.Sync(requests(), metadata=(("authorization", f"Bearer {token}"),))
    outgoing.put_nowait(
        sync_pb2.AgentMessage(hello=sync_pb2.Hello(cluster_id="west", agent_version="bench"))
    )
    await call.read()  # the welcome
    seq = 0
    while True:
        seq += 1
        batch = sync_pb2.ObservationBatch(seq=seq)
        for n in range(nodes):
            node = batch.nodes.add(node_id=f"node-{n}", observe_unix_nanos=time.time_ns())
            for g in range(8):
                node.devices.add(
                    uuid=f"GPU-{n:08x}-0000-4000-8000-{g:012x}",
                    name="H100",
                    memory_bytes=80 << 30,
                    device_class="H100-80GB",
                    healthy=(g + seq) % 8 != 0,
                    verified=True,
                )
        outgoing.put_nowait(sync_pb2.AgentMessage(observations=batch))
        await asyncio.sleep(0.05)


def _print(run: Run, rate: float) -> None:
    print(f"{run.label}: /healthz while idle and under {rate:.0f} rejects/s")
    for phase in (run.idle, run.loaded):
        print(
            f"  {phase.name:<7} p50 {phase.p50_ms:7.2f} ms   p99 {phase.p99_ms:7.2f} ms"
            f"   ({phase.requests} requests)"
        )
    print(f"  loaded/idle p50: {run.ratio:.2f}x   ({run.rejects_sent} rejects sent)")


async def main_async(args: argparse.Namespace) -> int:
    runs = []
    if args.baseline_source:
        baseline = pathlib.Path(args.baseline_source).resolve()
        runs.append(
            await _measure(
                f"baseline hub ({baseline})",
                baseline,
                rate=args.rate,
                seconds=args.seconds,
                nodes=args.nodes,
            )
        )
    runs.append(
        await _measure("this hub", ROOT, rate=args.rate, seconds=args.seconds, nodes=args.nodes)
    )
    for run in runs:
        _print(run, args.rate)
    if len(runs) == 2:
        old, new = runs
        print(
            f"loaded p50, baseline/this: {old.loaded.p50_ms:.2f} / {new.loaded.p50_ms:.2f} ms"
            f" = {old.loaded.p50_ms / new.loaded.p50_ms:.1f}x"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rejects", description=__doc__)
    parser.add_argument("--rate", type=float, default=100.0, help="rejects per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase")
    parser.add_argument(
        "--nodes", type=int, default=200, help="nodes of the background reporter's batches"
    )
    parser.add_argument("--baseline-source", metavar="DIR", help="another checkout's hub")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
