"""`python -m bench.readload`: control-API reads under many concurrent clients (issue 13).

One hub process (`python -m hub`, bench/hubproc.py) holding 1,000 deployments over 100
clusters (`--deployments N`: N / 100 workloads of one replica on each cluster), on a SQLite
file or (`--store postgres`) a throwaway PostgreSQL server (tools/pgserver.py); N clients (16
and 64 by default) send back-to-back requests for a few seconds each:

- list: `GET /v1/deployments?page_size=100` (one page of 100, each over another cluster),
- get:  `GET /v1/deployments/{ref}` (a random deployment),
- bare: the same list page's bytes from a bare aiohttp handler in its own process: what this
  machine and this client can do at all, measured in the same run.

Prints p50, p99 and requests/s per read and client count, each p99 over the bare
handler's, and the hub's CPU per request (all its threads: what one interpreter must find
for each answer; p99 at N back-to-back clients is about N times it). The clients share the
machine with the hub: compare figures of one run, not runs of different machines.

    python -m bench.readload                   16 and 64 clients, 5 s each
    python -m bench.readload --clients 8 --seconds 2
    python -m bench.readload --deployments 10000 --store postgres --clients 64
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pathlib
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
from aiohttp import web

from bench.hubproc import HubProcess, sample

CLUSTERS = 100
DEPLOYMENTS = 1000
PAGE = 100


@dataclass(frozen=True)
class Result:
    read: str
    clients: int
    p50_ms: float
    p99_ms: float
    per_s: float
    errors: int
    # The hub's CPU (user + system, all threads) per request answered; 0 for the bare handler.
    cpu_ms: float = 0.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.readload", description=__doc__)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=5.0, help="per read and client count")
    parser.add_argument(
        "--deployments",
        type=int,
        default=DEPLOYMENTS,
        help=f"deployments stored, a multiple of {CLUSTERS} (one workload per {CLUSTERS})",
    )
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--bare", nargs=2, metavar=("BODY", "READY"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def _seed(base: str, token: str, workloads: int) -> list[str]:
    headers = {"authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base, headers=headers) as http:
        clusters = [f"c{i:03d}" for i in range(CLUSTERS)]
        for cluster_id in clusters:
            await _post(http, "/v1/clusters", {"cluster_id": cluster_id})
        await _post(http, "/v1/projects", {"name": "load", "quotas": {"H100-80GB": 1_000_000}})
        for i in range(workloads):
            await _post(
                http,
                "/v1/workloads",
                {
                    "name": f"w{i}",
                    "project": "load",
                    "replicas": CLUSTERS,
                    "device_class": "H100-80GB",
                    "serving": {
                        "engine": "vllm",
                        "engine_version": "0.11.0",
                        "model": "meta-llama/Llama-3.3-70B-Instruct",
                        "tensor_parallel": 1,
                    },
                    "placement": {"clusters": clusters},
                },
            )
        refs = []
        token_ = ""
        while True:
            async with http.get(
                "/v1/deployments", params={"page_size": "1000", "page_token": token_}
            ) as response:
                page = await response.json()
            refs += [d["deployment_id"] for d in page["deployments"]]
            token_ = page["next_page_token"]
            if not token_:
                return refs


async def _post(http: aiohttp.ClientSession, path: str, body: object) -> None:
    async with http.post(path, json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"POST {path}: {response.status} {await response.text()}")


async def _load(
    base: str, token: str, paths: Sequence[str], *, clients: int, seconds: float
) -> tuple[list[float], int]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    headers = {"authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base, headers=headers, connector=connector) as http:

        async def client(seed: int) -> None:
            nonlocal errors
            rng = random.Random(seed)
            while time.monotonic() < deadline:
                started = time.perf_counter()
                async with http.get(rng.choice(paths)) as response:
                    await response.read()
                    if response.status != 200:
                        errors += 1
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(client(i) for i in range(clients)))
    return latencies, errors


def _result(read: str, clients: int, latencies: list[float], errors: int, s: float) -> Result:
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000 if ordered else 0.0

    return Result(read, clients, pct(0.50), pct(0.99), len(ordered) / s, errors)


class _Bare:
    """A bare aiohttp handler answering fixed bytes, in its own process."""

    def __init__(self, workdir: pathlib.Path, body: bytes) -> None:
        body_file, self._ready = workdir / "bare.body", workdir / "bare.ready"
        body_file.write_bytes(body)
        self._popen = subprocess.Popen(
            [sys.executable, "-m", "bench.readload", "--bare", str(body_file), str(self._ready)]
        )
        deadline = time.monotonic() + 30
        while not self._ready.exists() or not self._ready.read_text():
            if time.monotonic() > deadline or self._popen.poll() is not None:
                raise RuntimeError("the bare server did not start")
            time.sleep(0.02)
        self.port = int(self._ready.read_text())

    def stop(self) -> None:
        self._popen.terminate()
        self._popen.wait(10)


def _serve_bare(body_path: str, ready_path: str) -> None:
    body = pathlib.Path(body_path).read_bytes()

    async def handler(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        sockets: Any = getattr(site._server, "sockets", None)
        pathlib.Path(ready_path).write_text(str(sockets[0].getsockname()[1]))
        await asyncio.Event().wait()

    asyncio.run(main())


def run(
    clients: Sequence[int], seconds: float, *, deployments: int = DEPLOYMENTS, store: str = "sqlite"
) -> list[Result]:
    with contextlib.ExitStack() as stack:
        db_url = None
        if store == "postgres":
            from tools.pgserver import PgServer

            db_url = stack.enter_context(PgServer.start()).create_database("readload")
        return _run(clients, seconds, workloads=max(1, deployments // CLUSTERS), db_url=db_url)


def _run(
    clients: Sequence[int], seconds: float, *, workloads: int, db_url: str | None
) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="wingsmith-readload-") as scratch:
        workdir = pathlib.Path(scratch)
        hub = HubProcess(workdir, db_url=db_url)
        hub.start()
        bare: _Bare | None = None
        try:
            refs = asyncio.run(_seed(hub.http_base, hub.admin_token, workloads))
            print(f"seeded {len(refs)} deployments over {CLUSTERS} clusters", file=sys.stderr)
            list_path = f"/v1/deployments?page_size={PAGE}"
            page = asyncio.run(_fetch(hub.http_base, hub.admin_token, list_path))
            bare = _Bare(workdir, page)
            reads = {
                "bare": (f"http://127.0.0.1:{bare.port}", [list_path]),
                "list": (hub.http_base, [list_path]),
                "get": (hub.http_base, [f"/v1/deployments/{ref}" for ref in refs]),
            }
            assert hub.process is not None
            for count in clients:
                for read, (base, paths) in reads.items():
                    before = sample(hub.process)
                    latencies, errors = asyncio.run(
                        _load(base, hub.admin_token, paths, clients=count, seconds=seconds)
                    )
                    used_s = sample(hub.process).cpu_s - before.cpu_s
                    result = _result(read, count, latencies, errors, seconds)
                    if read != "bare" and latencies:
                        result = replace(result, cpu_ms=used_s / len(latencies) * 1000)
                    results.append(result)
                    print(f"{read} x{count}: done", file=sys.stderr)
        finally:
            if bare is not None:
                bare.stop()
            hub.stop()
    return results


async def _fetch(base: str, token: str, path: str) -> bytes:
    headers = {"authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base, headers=headers) as http, http.get(path) as response:
        return await response.read()


def table(results: Sequence[Result]) -> str:
    bare = {r.clients: r.p99_ms for r in results if r.read == "bare"}
    lines = [
        f"{'read':<6} {'clients':>7} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} "
        f"{'p99 / bare':>10} {'hub CPU ms/req':>14} {'errors':>6}"
    ]
    for r in results:
        ratio = r.p99_ms / bare[r.clients] if bare.get(r.clients) else 0.0
        lines.append(
            f"{r.read:<6} {r.clients:>7} {r.p50_ms:>8.1f} {r.p99_ms:>8.1f} {r.per_s:>8.0f} "
            f"{ratio:>9.1f}x {r.cpu_ms:>14.2f} {r.errors:>6}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.bare:
        _serve_bare(*args.bare)
        return
    print(table(run(args.clients, args.seconds, deployments=args.deployments, store=args.store)))


if __name__ == "__main__":
    main()
