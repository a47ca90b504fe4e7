"""The hub under test, as its own process: `python -m hub` on a database in a scratch folder
(a SQLite file there, or a PostgreSQL database URL), alone or as a group of hubs on one database.

Running the hub alone in its process means its RSS and CPU (psutil on its pid) are the hub's
only, and a restart is a real process restart on the same database and the same ports: stop
with SIGTERM (the hub's own clean shutdown), start again with the ports it had bound.

Also here: the control API client the benchmark drives the hub with (REST, as a user would,
authenticated with the admin token), and a /metrics reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import math
import os
import pathlib
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import psutil
from prometheus_client.parser import text_string_to_metric_families

from hub.store.port import is_postgres

READY_TIMEOUT_S = 60.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ProcSample:
    """A process's resident memory and CPU seconds (user + system) at one moment."""

    at: float
    rss: int
    cpu_s: float


def sample(process: psutil.Process) -> ProcSample:
    with process.oneshot():
        times = process.cpu_times()
        return ProcSample(time.monotonic(), process.memory_info().rss, times.user + times.system)


def cpu_share(before: ProcSample, after: ProcSample) -> float:
    """CPU used between two samples, as a fraction of one core."""
    wall = after.at - before.at
    return (after.cpu_s - before.cpu_s) / wall if wall > 0 else 0.0


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the benchmark dies, however it dies."""
    if sys.platform == "linux":
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class HubProcess:
    """Start, stop and restart `python -m hub`; the ports stay the same across restarts.

    `db_url`: a PostgreSQL URL the hub shares with others; by default a SQLite file in
    `workdir`. Hubs on one database must share `admin_token` (none may generate its own).
    """

    def __init__(
        self,
        workdir: pathlib.Path,
        *,
        log_level: str = "WARNING",
        db_url: str | None = None,
        name: str = "hub",
        admin_token: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.db_url = db_url or str(workdir / f"{name}.db")
        self.ready_file = workdir / f"{name}.ready.json"
        self.log_path = workdir / f"{name}.log"
        self.admin_token = admin_token or "bench-" + secrets.token_hex(16)
        self.log_level = log_level
        self.grpc_port = 0
        self.http_port = 0
        self.starts = 0
        self._popen: subprocess.Popen[bytes] | None = None
        self.process: psutil.Process | None = None

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def pid(self) -> int:
        assert self._popen is not None
        return self._popen.pid

    def start(self) -> float:
        """Launch and wait until it listens; returns the seconds that took."""
        started = time.monotonic()
        self.ready_file.unlink(missing_ok=True)
        env = dict(os.environ, WINGSMITH_ADMIN_TOKEN=self.admin_token)
        command = [
            sys.executable,
            "-m",
            "hub",
            "--db",
            self.db_url,
            "--grpc-listen",
            f"127.0.0.1:{self.grpc_port}",
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
            "--ready-file",
            str(self.ready_file),
            "--log-level",
            self.log_level,
        ]
        log = self.log_path.open("ab")
        try:
            self._popen = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        self.process = psutil.Process(self._popen.pid)
        deadline = started + READY_TIMEOUT_S
        while not self.ready_file.exists():
            if self._popen.poll() is not None:
                raise RuntimeError(f"the hub exited with {self._popen.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the hub was not ready within {READY_TIMEOUT_S:.0f}s")
            time.sleep(0.02)
        # The ready file is written in one call; retry the read if we caught it half-written.
        for _ in range(50):
            with contextlib.suppress(ValueError):
                ready = json.loads(self.ready_file.read_text())
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("unreadable ready file")
        self.grpc_port = int(ready["grpc"].rpartition(":")[2])
        self.http_port = int(ready["http"].rpartition(":")[2])
        self.starts += 1
        return time.monotonic() - started

    def stop(self, timeout_s: float = 30.0) -> float:
        """SIGTERM (clean shutdown), SIGKILL after `timeout_s`; returns the seconds it took."""
        started = time.monotonic()
        popen, self._popen, self.process = self._popen, None, None
        if popen is None or popen.poll() is not None:
            return 0.0
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        return time.monotonic() - started

    def kill(self) -> None:
        """Cleanup path: no grace."""
        popen, self._popen, self.process = self._popen, None, None
        if popen is not None and popen.poll() is None:
            popen.kill()
            popen.wait()

    def sample(self) -> ProcSample:
        assert self.process is not None, "the hub is not running"
        return sample(self.process)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class HubGroup:
    """N hub processes on one database, driven as one hub: started and stopped together, their
    RSS and CPU summed. Control calls and the profiler use the first hub; the agents of
    worker i stream to hub i % N (`grpc_targets`), so a change committed on the first hub
    reaches most agents through another one (the cross-hub fan-out)."""

    def __init__(
        self,
        workdir: pathlib.Path,
        *,
        count: int = 1,
        db_url: str | None = None,
        log_level: str = "WARNING",
    ) -> None:
        if count > 1 and (db_url is None or not is_postgres(db_url)):
            raise ValueError("several hubs need a shared PostgreSQL database URL")
        token = "bench-" + secrets.token_hex(16)
        self.hubs = [
            HubProcess(
                workdir,
                log_level=log_level,
                db_url=db_url,
                name="hub" if i == 0 else f"hub{i}",
                admin_token=token,
            )
            for i in range(count)
        ]
        self.admin_token = token
        self.db_url = self.hubs[0].db_url

    @property
    def starts(self) -> int:
        return sum(h.starts for h in self.hubs)

    @property
    def grpc_target(self) -> str:
        return self.hubs[0].grpc_target

    @property
    def grpc_targets(self) -> list[str]:
        return [h.grpc_target for h in self.hubs]

    @property
    def http_base(self) -> str:
        return self.hubs[0].http_base

    @property
    def http_bases(self) -> list[str]:
        return [h.http_base for h in self.hubs]

    @property
    def pid(self) -> int:
        return self.hubs[0].pid

    def start(self) -> float:
        """One after another (the first runs the migrations); the seconds it took in all."""
        return sum(h.start() for h in self.hubs)

    def stop(self, timeout_s: float = 30.0) -> float:
        return sum(h.stop(timeout_s) for h in self.hubs)

    def kill(self) -> None:
        for h in self.hubs:
            h.kill()

    def sample(self) -> ProcSample:
        parts = [h.sample() for h in self.hubs]
        return ProcSample(
            max(p.at for p in parts), sum(p.rss for p in parts), sum(p.cpu_s for p in parts)
        )

    def tail(self, lines: int = 20) -> str:
        return "\n".join(f"-- {h.log_path.name}\n{h.tail(lines)}" for h in self.hubs)


class StoreReader:
    """Read-only queries on the hub's database, from the benchmark's own process.

    The fallback where the hub has no metric for what the benchmark must know (SQLite in WAL
    mode, or PostgreSQL: a reader never blocks the hub's writer). Scraping /metrics is not
    free: the hub computes every deployment's phase per scrape, so tight polling loops read
    the database instead.
    """

    def __init__(self, url: str) -> None:
        self._postgres = is_postgres(url)
        self._conn: Any
        if self._postgres:
            import psycopg

            self._conn = psycopg.connect(url, autocommit=True)
        else:
            self._conn = sqlite3.connect(f"file:{url}?mode=ro", uri=True, timeout=10)

    def close(self) -> None:
        self._conn.close()

    def _one(self, sql: str, params: Sequence[object] = ()) -> Any:
        if self._postgres:
            sql = sql.replace("?", "%s")
        return self._conn.execute(sql, list(params)).fetchone()

    def running_deployments(self) -> int:
        """Deployments with at least one ready replica (what the hub calls running)."""
        row = self._one("SELECT COUNT(DISTINCT deployment_id) FROM replicas WHERE ready = 1")
        return int(row[0])

    def last_observed(self) -> int:
        """The newest observation time the hub wrote (reports and nodes), 0 if none."""
        row = self._one(
            "SELECT MAX(t) FROM (SELECT MAX(observe_ns) AS t FROM deployment_reports"
            " UNION ALL SELECT MAX(observe_ns) FROM nodes) AS observed"
        )
        return int(row[0] or 0)

    def behind(self) -> int:
        """Clusters whose agent has not acknowledged their current desired revision (acks
        reach the database within the hub's liveness flush, about a second)."""
        row = self._one("SELECT COUNT(*) FROM clusters WHERE applied_revision < desired_revision")
        return int(row[0])

    def reported_since(self, deployment_ids: Sequence[str], observe_ns: int) -> int:
        """How many of these deployments hold a report at least as new as `observe_ns`."""
        total = 0
        for start in range(0, len(deployment_ids), 900):
            chunk = list(deployment_ids[start : start + 900])
            marks = ",".join("?" * len(chunk))
            row = self._one(
                "SELECT COUNT(*) FROM deployment_reports WHERE observe_ns >= ?"
                f" AND deployment_id IN ({marks})",
                [observe_ns, *chunk],
            )
            total += int(row[0])
        return total


class Profiler:
    """`py-spy record` attached to the hub for one phase (`--profile DIR`).

    Writes a flamegraph SVG (or py-spy's raw collapsed stacks, or speedscope JSON), with
    native and idle frames off: what the hub's Python spends its CPU on.
    """

    def __init__(self, pid: int, path: pathlib.Path, *, fmt: str = "flamegraph") -> None:
        # Beside the interpreter first: a virtual environment's bin/ is often not on PATH.
        exe = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
        if exe is None:
            raise RuntimeError("--profile needs py-spy: pip install py-spy")
        self.path = path
        self._popen = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--rate",
                "250",
                "--format",
                fmt,
                "--output",
                str(path),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        time.sleep(0.3)  # attached before the phase starts

    def stop(self) -> None:
        if self._popen.poll() is None:
            self._popen.send_signal(signal.SIGINT)
            try:
                self._popen.wait(30)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()


class ApiError(RuntimeError):
    pass


class Control:
    """The hub's REST control API, as a user drives it (aiohttp, bearer admin token)."""

    def __init__(self, hub: HubProcess | HubGroup, *, concurrency: int = 16) -> None:
        self._hub = hub
        self._session: aiohttp.ClientSession | None = None
        self._limit = asyncio.Semaphore(concurrency)

    async def __aenter__(self) -> Control:
        self._session = aiohttp.ClientSession(
            headers={"authorization": f"Bearer {self._hub.admin_token}"},
            timeout=aiohttp.ClientTimeout(total=600),
            connector=aiohttp.TCPConnector(limit=64),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        assert self._session is not None
        async with (
            self._limit,
            self._session.request(method, self._hub.http_base + path, json=body) as response,
        ):
            payload = await response.read()
            if response.status >= 300:
                raise ApiError(f"{method} {path}: {response.status} {payload[:500]!r}")
            return json.loads(payload or b"{}")

    async def timed(self, method: str, path: str, body: Any = None) -> tuple[float, float, Any]:
        """(monotonic start, seconds, response) of one call."""
        started = time.monotonic()
        result = await self.call(method, path, body)
        return started, time.monotonic() - started, result

    async def metrics_text(self) -> str:
        assert self._session is not None
        async with self._session.get(self._hub.http_base + "/metrics") as response:
            return await response.text()

    async def metrics(self) -> Metrics:
        """Every hub's /metrics, summed (a group's counters and histograms count the fleet's
        work wherever its streams landed)."""
        assert self._session is not None
        bases = self._hub.http_bases if isinstance(self._hub, HubGroup) else [self._hub.http_base]
        total: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for base in bases:
            async with self._session.get(base + "/metrics") as response:
                for key, value in Metrics.parse(await response.text()).samples.items():
                    total[key] = total.get(key, 0.0) + value
        return Metrics(total)

    async def wait_metrics(
        self,
        condition: Callable[[Metrics], bool],
        *,
        timeout_s: float,
        interval_s: float = 0.25,
        what: str,
    ) -> Metrics:
        """Poll /metrics until `condition` holds (each scrape costs the hub a little CPU)."""
        deadline = time.monotonic() + timeout_s
        while True:
            current = await self.metrics()
            if condition(current):
                return current
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
            await asyncio.sleep(interval_s)


@dataclass(frozen=True)
class Metrics:
    """One /metrics scrape: (sample name, sorted labels) -> value."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
        return cls(samples)

    def quantile(self, name: str, q: float, *, since: Metrics) -> float:
        """The q-quantile of histogram `name` over what it observed between two scrapes,
        interpolated linearly inside its bucket (Prometheus' histogram_quantile)."""
        buckets = sorted(
            (float(dict(labels)["le"]), value - since.samples.get((sample, labels), 0.0))
            for (sample, labels), value in self.samples.items()
            if sample == f"{name}_bucket"
        )
        if not buckets or buckets[-1][1] <= 0:
            return math.nan
        rank = q * buckets[-1][1]
        lower_bound, lower_count = 0.0, 0.0
        for bound, count in buckets:
            if count >= rank:
                if math.isinf(bound):
                    return lower_bound
                share = (rank - lower_count) / (count - lower_count) if count > lower_count else 1
                return lower_bound + (bound - lower_bound) * share
            lower_bound, lower_count = bound, count
        return math.nan

    def get(self, name: str, **labels: str) -> float:
        """Sum over the samples of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(
            value
            for (sample_name, sample_labels), value in self.samples.items()
            if sample_name == name and wanted <= set(sample_labels)
        )


def chunks(items: Sequence[str], count: int) -> list[list[str]]:
    """Split into `count` nearly equal contiguous parts (some may be empty)."""
    size, extra = divmod(len(items), count)
    result, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        result.append(list(items[start:end]))
        start = end
    return result
