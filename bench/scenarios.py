"""One fleet size, measured end to end: the hub's figures, then the building-block baselines.

Phases, in order, on one hub process and one pool of worker processes (docs/benchmark.md):

1. setup: register every cluster (REST), create project `fleet`, one workload `w<i>` pinned to
   each cluster (8 replicas x TP 4 = 32 of its 64 GPUs) and `fleetwide` (one replica, TP 1, on
   every cluster). They wait on capacity until the agents report their devices.
2. connect: start every agent at once. *Connect* is the time until the last agent finished its
   first sync (welcomed, first DesiredState applied); *settle* until the hub's store holds a
   ready replica of every deployment.
3. idle: hub RSS and CPU with every agent connected and only heartbeats flowing.
4. fan-out to one: change one workload's serving config (PATCH engine_args: a new generation),
   time from issuing the call until its agent applied it; one change at a time, random clusters.
5. fan-out to all: each change of `fleetwide`'s serving config touches every cluster. Per
   agent: issue -> applied. p50 and p99 over every agent and round, and the last agent.
6. ingest: every agent replays two real states of its cluster (Worker.cmd_ingest_prepare),
   newer each time, in waves with a few in flight, so the hub always has work queued.
   Records persisted / s = records sent / time until the hub's store held every wave.
7. admission: one workload per cluster in project `burst` whose quota admits none; then raise
   the quota to admit half, then all. Decisions / s = wingsmith_admission_decisions_total
   delta / the time of those control calls.
8. reconnect: SIGTERM the hub, start it again on the same database and ports; time until every
   agent was welcomed on a new stream, and the desired-state bytes the new hub sent
   (wingsmith_desired_bytes_sent_total: nothing changed, so it must be 0).
9. baselines (hub stopped, same worker processes and channel layout): bare grpc.aio streams,
   bare SQLite batched upsert, the pure admission decision (bench/baselines.py).

Waits for the fleet to settle read the hub's database read-only (StoreReader) rather than
scrape /metrics, which costs the hub O(deployments) per scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import pathlib
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from bench import baselines
from bench.figures import figures
from bench.hubproc import (
    Control,
    HubGroup,
    Metrics,
    Profiler,
    StoreReader,
    chunks,
    cpu_share,
    sample,
)
from bench.report import SizeResult, percentile
from bench.workers import WorkerPool

DEVICE_CLASS = "H100-80GB"
MIB = 1024 * 1024
OBSERVATIONS_IN = "wingsmith_stream_messages_total"


@dataclass(frozen=True)
class Plan:
    """How one size is run."""

    agents: int
    workers: int = 2
    agents_per_channel: int = 100
    nodes: int = 8
    gpus: int = 8
    ready_after_s: float = 1.0
    # Per-cluster workload: replicas x TP.
    replicas: int = 8
    tensor_parallel: int = 4
    single_samples: int = 100
    fleet_rounds: int = 3
    # Ingest: records to replay in all (the number of waves is derived from it).
    ingest_records: int = 300_000
    # The agents' own timers. They cost the load generator CPU and the hub nothing (the
    # observer sends only what changed; heartbeats follow the hub's interval), so they are
    # long here: thousands of agents share two cores.
    resync_s: float = 300.0
    node_poll_s: float = 60.0
    idle_window_s: float = 5.0
    # The fleet is quiet once the hub wrote no observation for this long.
    quiet_s: float = 1.0
    # Ingest replay: agents per wave, and waves sent before the oldest must be written.
    wave_agents: int = 256
    waves_in_flight: int = 3
    # Phases to leave out (setup and connect always run).
    skip: frozenset[str] = frozenset()
    seed: int = 7
    # The store: None is a SQLite file in the work folder (one hub); a PostgreSQL URL may be
    # shared by `hubs` hub processes (`python -m bench --store postgres --hubs N`).
    store_url: str | None = None
    hubs: int = 1

    @property
    def spec(self) -> str:
        return (
            f"nodes={self.nodes},gpus={self.gpus},class={DEVICE_CLASS},"
            f"ready_after={self.ready_after_s:g}s"
        )

    @property
    def timeout_s(self) -> float:
        """How long any one wait may take before the phase is declared failed."""
        return 60.0 + self.agents * 0.03


def cluster_id(index: int) -> str:
    return f"c{index:05d}"


def serving(tp: int, *args: str) -> dict[str, Any]:
    return {
        "engine": "vllm",
        "engine_version": "0.11.0",
        "model": "meta-llama/Llama-3.3-70B-Instruct",
        "tensor_parallel": tp,
        "engine_args": list(args),
    }


def workload(
    name: str, *, project: str, replicas: int, tp: int, clusters: list[str] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "project": project,
        "replicas": replicas,
        "device_class": DEVICE_CLASS,
        "serving": serving(tp),
    }
    if clusters:
        body["placement"] = {"clusters": clusters}
    return body


@dataclass
class Fleet:
    """The hub, the workers and what the phases measured (into `details`)."""

    plan: Plan
    hub: HubGroup
    api: Control
    pool: WorkerPool
    details: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    worker_of: dict[str, int] = field(default_factory=dict)
    per_worker: list[list[str]] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    # --profile: py-spy flamegraphs of the hub, one per phase.
    profile_dir: pathlib.Path | None = None
    profile_format: str = "flamegraph"
    profiler: Profiler | None = None

    @property
    def clusters(self) -> list[str]:
        return [cluster_id(i) for i in range(self.plan.agents)]

    def note(self, phase: str, **values: Any) -> None:
        self.details.setdefault(phase, {}).update(values)

    async def phase(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run a phase; record its wall time and the hub's and workers' CPU during it."""
        self.phases.append(name)
        starts = self.hub.starts
        hub_before = self.hub.sample()
        workers_before = self._worker_cpu()
        if name != "reconnect":
            self.start_profile(name)
        started = time.monotonic()
        try:
            await body()
        finally:
            self.stop_profile()
        wall = time.monotonic() - started
        hub_after = self.hub.sample()
        # Over the whole phase, waits included (the phases' own figures cover their
        # measurement windows only): `phase_` keys.
        values: dict[str, Any] = {
            "wall_s": wall,
            "phase_workers_cpu_share": (self._worker_cpu() - workers_before) / wall if wall else 0,
            "phase_hub_rss_mib": hub_after.rss / MIB,
            "phase_machine_load_1m": os.getloadavg()[0],
        }
        if self.hub.starts == starts:  # the same hub process throughout
            values["phase_hub_cpu_s"] = hub_after.cpu_s - hub_before.cpu_s
            values["phase_hub_cpu_share"] = cpu_share(hub_before, hub_after)
        self.note(name, **values)

    def start_profile(self, name: str) -> None:
        if self.profile_dir is not None:
            suffix = {"flamegraph": "svg", "raw": "txt", "speedscope": "json"}[self.profile_format]
            self.profiler = Profiler(
                self.hub.pid,
                self.profile_dir / f"hub-{self.plan.agents}-{name}.{suffix}",
                fmt=self.profile_format,
            )

    def stop_profile(self) -> None:
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None

    def _worker_cpu(self) -> float:
        total = 0.0
        for pid in self.pool.pids:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
        return total

    # -- 1. setup -----------------------------------------------------------------------------

    async def setup(self) -> None:
        n = self.plan.agents
        api = self.api
        await api.call(
            "POST",
            "/v1/projects",
            {"name": "fleet", "quotas": {DEVICE_CLASS: min(1_000_000, n * 100)}},
        )
        await api.call("POST", "/v1/projects", {"name": "burst", "quotas": {DEVICE_CLASS: 0}})
        started = time.monotonic()
        created = await asyncio.gather(
            *(
                api.call("POST", "/v1/clusters", {"cluster_id": c, "labels": {"bench": "fleet"}})
                for c in self.clusters
            )
        )
        register_s = time.monotonic() - started
        self.tokens = {c: str(r["token"]) for c, r in zip(self.clusters, created, strict=True)}
        started = time.monotonic()
        await asyncio.gather(
            *(
                api.call(
                    "POST",
                    "/v1/workloads",
                    workload(
                        f"w{i:05d}",
                        project="fleet",
                        replicas=self.plan.replicas,
                        tp=self.plan.tensor_parallel,
                        clusters=[c],
                    ),
                )
                for i, c in enumerate(self.clusters)
            )
        )
        workloads_s = time.monotonic() - started
        # One replica on every cluster. Created before any cluster reported capacity, placement
        # spreads it evenly: one each (docs/placement.md, overflow).
        _, fleetwide_s, _ = await api.timed(
            "POST",
            "/v1/workloads",
            workload("fleetwide", project="fleet", replicas=n, tp=1, clusters=None),
        )
        self.per_worker = chunks(self.clusters, self.pool.count)
        for index, group in enumerate(self.per_worker):
            for c in group:
                self.worker_of[c] = index
        targets = self.hub.grpc_targets
        await self.pool.call_all(
            "build_agents",
            per_worker=[
                # Worker i's agents stream to hub i % N.
                {
                    "clusters": [(c, self.tokens[c]) for c in group],
                    "target": targets[i % len(targets)],
                }
                for i, group in enumerate(self.per_worker)
            ],
            spec=self.plan.spec,
            agents_per_channel=self.plan.agents_per_channel,
            resync_s=self.plan.resync_s,
            node_poll_s=self.plan.node_poll_s,
        )
        self.note(
            "setup",
            register_s=register_s,
            registrations_per_s=n / register_s,
            workloads_s=workloads_s,
            workloads_per_s=n / workloads_s,
            fleetwide_create_s=fleetwide_s,
            hub_rss_before_agents_mib=self.hub.sample().rss / MIB,
        )

    # -- 2. connect ---------------------------------------------------------------------------

    async def connect(self) -> None:
        n = self.plan.agents
        starts = await self.pool.call_all("start_agents")
        started = min(starts)
        deadline = time.monotonic() + self.plan.timeout_s
        while True:
            states = await self.pool.call_all("synced")
            synced = sum(s["synced"] for s in states)
            if synced >= n:
                break
            crashed = sum(s["crashed"] for s in states)
            if time.monotonic() > deadline or synced + crashed >= n:
                crash = next((s["crash"] for s in states if s["crash"]), "")
                raise TimeoutError(
                    f"only {synced} of {n} agents finished their first sync"
                    + (f"; {crashed} agents crashed, e.g. {crash}" if crashed else "")
                )
            await asyncio.sleep(0.1)
        first_sync = [t - started for s in states for t in s["first_sync"].values()]
        welcome = [t - started for s in states for t in s["first_welcome"].values()]
        self.note(
            "connect",
            all_synced_s=max(first_sync),
            p50_synced_s=percentile(first_sync, 50),
            all_welcomed_s=max(welcome),
        )
        store = StoreReader(self.hub.db_url)
        try:
            deadline = time.monotonic() + self.plan.timeout_s
            while store.running_deployments() < 2 * n:
                if time.monotonic() > deadline:
                    raise TimeoutError("not every deployment runs")
                await asyncio.sleep(0.1)
        finally:
            store.close()
        self.note("connect", settled_s=time.monotonic() - started)

    # -- 3. idle ------------------------------------------------------------------------------

    async def idle(self) -> None:
        await self._quiet()
        before = self.hub.sample()
        workers_before = self._worker_cpu()
        await asyncio.sleep(self.plan.idle_window_s)
        after = self.hub.sample()
        base = self.details["setup"]["hub_rss_before_agents_mib"]
        scrapes = []
        for _ in range(3):
            begun = time.monotonic()
            await self.api.metrics_text()
            scrapes.append((time.monotonic() - begun) * 1000)
        workers_rss = 0
        for pid in self.pool.pids:
            with contextlib.suppress(psutil.Error):
                workers_rss += psutil.Process(pid).memory_info().rss
        self.note(
            "idle",
            metrics_scrape_ms=min(scrapes),
            workers_cpu_share=(self._worker_cpu() - workers_before) / self.plan.idle_window_s,
            workers_rss_mib=workers_rss / MIB,
            hub_cpu_share=cpu_share(before, after),
            hub_rss_mib=after.rss / MIB,
            hub_rss_per_agent_kib=(after.rss / MIB - base) * 1024 / self.plan.agents,
        )

    # -- 4. fan-out to one cluster ------------------------------------------------------------

    async def fanout_one(self) -> None:
        rng = random.Random(self.plan.seed)
        picks = rng.sample(range(self.plan.agents), min(self.plan.single_samples, self.plan.agents))
        applied, arrived, calls = [], [], []
        for k, index in enumerate(picks):
            c = cluster_id(index)
            issued, duration, _ = await self.api.timed(
                "PATCH",
                f"/v1/workloads/w{index:05d}",
                {"serving": {"engine_args": [f"--bench-change={k}"]}},
            )
            seen = await self.pool.call(
                self.worker_of[c],
                "wait_applied",
                workload=f"w{index:05d}",
                generation=2,
                clusters=[c],
                timeout_s=self.plan.timeout_s,
            )
            if c not in seen["times"]:
                raise TimeoutError(f"cluster {c} never applied its change")
            got, done = seen["times"][c]
            arrived.append((got - issued) * 1000)
            applied.append((done - issued) * 1000)
            calls.append(duration * 1000)
        self.note(
            "fanout_one",
            samples=len(applied),
            applied_ms=applied,
            p50_ms=percentile(applied, 50),
            p99_ms=percentile(applied, 99),
            arrived_p50_ms=percentile(arrived, 50),
            arrived_p99_ms=percentile(arrived, 99),
            call_p50_ms=percentile(calls, 50),
        )

    # -- 5. fan-out to every cluster ----------------------------------------------------------

    async def fanout_all(self) -> None:
        everyone: list[float] = []
        arrived_all: list[float] = []
        rounds = []
        for r in range(self.plan.fleet_rounds):
            await self._quiet()
            before = await self.api.metrics()
            hub_before, workers_before = self.hub.sample(), self._worker_cpu()
            issued, duration, _ = await self.api.timed(
                "PATCH",
                "/v1/workloads/fleetwide",
                {"serving": {"engine_args": [f"--bench-round={r}"]}},
            )
            latencies = await self._wait_everyone("fleetwide", r + 2, issued, arrived_all)
            # CPU spent from the call until the last agent applied (the wait's polling of the
            # workers included): what the change cost the hub, and the load generator.
            hub_cpu_s = self.hub.sample().cpu_s - hub_before.cpu_s
            workers_cpu_s = self._worker_cpu() - workers_before
            after = await self.api.metrics()
            everyone += latencies
            rounds.append(
                {
                    "call_ms": duration * 1000,
                    "p50_ms": percentile(latencies, 50),
                    "p99_ms": percentile(latencies, 99),
                    "last_ms": max(latencies),
                    # The hub's share: from its commit until gRPC took each stream's delta
                    # (wingsmith_desired_delivery_seconds; bucket-interpolated).
                    "hub_p50_ms": after.quantile(DELIVERY, 0.5, since=before) * 1000,
                    "hub_p99_ms": after.quantile(DELIVERY, 0.99, since=before) * 1000,
                    "hub_cpu_s": hub_cpu_s,
                    "workers_cpu_s": workers_cpu_s,
                }
            )
        self.note(
            "fanout_all",
            rounds=rounds,
            p50_ms=percentile(everyone, 50),
            p99_ms=percentile(everyone, 99),
            last_ms=max(r["last_ms"] for r in rounds) if rounds else math.nan,
            arrived_p99_ms=percentile(arrived_all, 99),
            hub_p99_ms=max((r["hub_p99_ms"] for r in rounds), default=math.nan),
            hub_cpu_s=statistics.mean(r["hub_cpu_s"] for r in rounds) if rounds else math.nan,
            workers_cpu_s=(
                statistics.mean(r["workers_cpu_s"] for r in rounds) if rounds else math.nan
            ),
        )

    async def _wait_everyone(
        self, name: str, generation: int, issued: float, arrived: list[float] | None = None
    ) -> list[float]:
        seen = await self.pool.call_all(
            "wait_applied",
            workload=name,
            generation=generation,
            clusters=None,
            timeout_s=self.plan.timeout_s,
        )
        missing = sum(len(s["missing"]) for s in seen)
        if missing:
            raise TimeoutError(f"{missing} agents never applied {name} generation {generation}")
        if arrived is not None:
            arrived += [(a - issued) * 1000 for s in seen for a, _ in s["times"].values()]
        return [(done - issued) * 1000 for s in seen for _, done in s["times"].values()]

    async def _quiet(self, extra_s: float = 0.5) -> None:
        """Let rollouts finish (pods become ready), the agents report it and the hub write it,
        and every agent acknowledge its current desired revision: until, for `quiet_s`, the
        hub wrote no observation and no cluster was behind. Read from the database: a
        /metrics scrape costs the hub O(deployments) (phases are derived on read)."""
        await asyncio.sleep(self.plan.ready_after_s + min(extra_s, self.plan.quiet_s))
        store = StoreReader(self.hub.db_url)
        try:
            deadline = time.monotonic() + self.plan.timeout_s
            last, since = store.last_observed(), time.monotonic()
            while time.monotonic() - since < self.plan.quiet_s:
                if time.monotonic() > deadline:
                    raise TimeoutError("the fleet did not settle")
                await asyncio.sleep(0.2)
                current = store.last_observed()
                if current != last or store.behind():
                    last, since = current, time.monotonic()
        finally:
            store.close()

    # -- 6. observation ingest ----------------------------------------------------------------

    async def ingest(self) -> None:
        prepared = await self.pool.call_all("ingest_prepare")
        reported: dict[str, list[str]] = {}
        for p in prepared:
            reported.update(p["reported"])
        per_batch = sum(p["records"] for p in prepared) / max(
            1, sum(p["templates"] for p in prepared)
        )
        order = [c for c in self.clusters if reported.get(c)]
        wave_size = min(len(order), self.plan.wave_agents)
        waves = max(8, math.ceil(self.plan.ingest_records / per_batch / wave_size))
        # The replaced pods become ready and the agents report that themselves first.
        await self._quiet(extra_s=1.0)
        before = await self.api.metrics()
        in_before = before.get(OBSERVATIONS_IN, direction="in", type="observations")
        hub_before = self.hub.sample()
        workers_before = self._worker_cpu()
        store = StoreReader(self.hub.db_url)
        sent = records = size = 0
        outstanding: list[tuple[int, list[str]]] = []
        started = time.monotonic()
        last_stamp = time.time_ns()
        try:
            for w in range(waves):
                picked = [order[(w * wave_size + k) % len(order)] for k in range(wave_size)]
                stamp = last_stamp = max(time.time_ns(), last_stamp + 1)
                results = await self.pool.call_all(
                    "ingest_send",
                    per_worker=[
                        {"clusters": [c for c in picked if self.worker_of[c] == i]}
                        for i in range(self.pool.count)
                    ],
                    stamp_ns=stamp,
                )
                sent += sum(x["messages"] for x in results)
                records += sum(x["records"] for x in results)
                size += sum(x["bytes"] for x in results)
                ids = [d for c in picked for d in reported[c]]
                outstanding.append((stamp, ids))
                while len(outstanding) >= self.plan.waves_in_flight or (
                    w == waves - 1 and outstanding
                ):
                    await self._wave_written(store, *outstanding[0])
                    outstanding.pop(0)
            elapsed = time.monotonic() - started
        finally:
            store.close()
        hub_after = self.hub.sample()
        workers_cpu = self._worker_cpu() - workers_before
        after = await self.api.metrics()
        await self.pool.call_all("ingest_truth")
        self.note(
            "ingest",
            waves=waves,
            wave_agents=wave_size,
            batches=sent,
            records=records,
            bytes=size,
            seconds=elapsed,
            records_per_s=records / elapsed,
            batches_per_s=sent / elapsed,
            records_per_batch=records / max(1, sent),
            bytes_per_batch=size / max(1, sent),
            hub_batches_read=after.get(OBSERVATIONS_IN, direction="in", type="observations")
            - in_before,
            hub_cpu_share=cpu_share(hub_before, hub_after),
            hub_cpu_us_per_record=(hub_after.cpu_s - hub_before.cpu_s) / max(1, records) * 1e6,
            workers_cpu_share=workers_cpu / elapsed,
        )

    async def _wave_written(self, store: StoreReader, stamp: int, ids: list[str]) -> None:
        """Wait until the hub holds every deployment report of a wave (or a newer one)."""
        deadline = time.monotonic() + self.plan.timeout_s
        while store.reported_since(ids, stamp) < len(ids):
            if time.monotonic() > deadline:
                raise TimeoutError("the hub did not write a wave of observations in time")
            await asyncio.sleep(0.005)

    # -- 7. admission -------------------------------------------------------------------------

    async def admission(self) -> None:
        n = self.plan.agents
        await self._quiet()
        started = time.monotonic()
        await asyncio.gather(
            *(
                self.api.call(
                    "POST",
                    "/v1/workloads",
                    workload(f"b{i:05d}", project="burst", replicas=1, tp=4, clusters=[c]),
                )
                for i, c in enumerate(self.clusters)
            )
        )
        create_s = time.monotonic() - started
        passes = []
        for quota in ((n // 2) * 4, n * 4):
            await self._quiet()
            before = await self.api.metrics()
            _, duration, _ = await self.api.timed(
                "PATCH", "/v1/projects/burst", {"quotas": {DEVICE_CLASS: quota}}
            )
            after = await self.api.metrics()
            passes.append(
                {
                    "quota": quota,
                    "call_s": duration,
                    # Every pending deployment a pass decided on, admitted or left waiting
                    # (decisions_total counts only those whose outcome changed).
                    "decisions": _delta(after, before, "wingsmith_admission_evaluations_total"),
                    "changed": _delta(after, before, "wingsmith_admission_decisions_total"),
                    "admitted": _delta(
                        after, before, "wingsmith_admission_decisions_total", result="admitted"
                    ),
                }
            )
        decisions = sum(p["decisions"] for p in passes)
        seconds = sum(p["call_s"] for p in passes)
        self.note(
            "admission",
            pending=n,
            create_s=create_s,
            creates_per_s=n / create_s,
            passes=passes,
            decisions=decisions,
            decisions_per_s=decisions / seconds if seconds else 0.0,
        )

    # -- 8. reconnect after a hub restart -----------------------------------------------------

    async def reconnect(self) -> None:
        await self._quiet()
        stats_before = await self.pool.call_all("client_stats")
        sessions = [{c: s["sessions"] for c, s in w.items()} for w in stats_before]
        stop_s = self.hub.stop()
        restarted = time.monotonic()
        start_s = self.hub.start()
        ready = time.monotonic()
        self.start_profile("reconnect")
        resumed = await self.pool.call_all(
            "wait_resumed",
            per_worker=[{"sessions_before": s} for s in sessions],
            timeout_s=self.plan.timeout_s,
        )
        missing = sum(len(r["missing"]) for r in resumed)
        if missing:
            crashed = sum(r["crashed"] for r in resumed)
            crash = next((r["crash"] for r in resumed if r["crash"]), "")
            raise TimeoutError(
                f"{missing} agents did not resume after the restart"
                + (f"; {crashed} agents crashed, e.g. {crash}" if crashed else "")
            )
        welcomed = [t for r in resumed for t in r["welcomed"].values()]
        await asyncio.sleep(1.0)
        metrics = await self.api.metrics()
        stats_after = await self.pool.call_all("client_stats")
        received = sum(
            after[c]["desired_messages"] - before[c]["desired_messages"]
            for before, after in zip(stats_before, stats_after, strict=True)
            for c in after
        )
        self.note(
            "reconnect",
            hub_stop_s=stop_s,
            hub_start_s=start_s,
            resumed_s=max(welcomed) - restarted,
            resumed_after_ready_s=max(welcomed) - ready,
            p50_resumed_s=percentile([t - restarted for t in welcomed], 50),
            desired_bytes_resent=metrics.get("wingsmith_desired_bytes_sent_total"),
            desired_specs_resent=metrics.get("wingsmith_desired_deployments_sent_total"),
            desired_messages_received=received,
        )

    # -- 9. baselines -------------------------------------------------------------------------

    async def measure_baselines(self, workdir: pathlib.Path) -> None:
        await self._bare_streams(workdir)
        ingest = self.details.get("ingest", {})
        per_batch = float(ingest.get("records_per_batch", 50.0))
        rows_per_tx = max(1, int(per_batch * min(512, self.plan.agents)))
        rows = max(rows_per_tx * 4, min(int(ingest.get("records", 200_000)), 400_000))
        self.note(
            "baseline_sqlite",
            **baselines.sqlite_upsert_rate(
                workdir / "bare.db", rows=rows, rows_per_tx=rows_per_tx, working_set=rows // 2
            ),
        )
        self.note("baseline_admission", **baselines.admission_decide_rate(self.plan.agents))

    async def _bare_streams(self, workdir: pathlib.Path) -> None:
        n = self.plan.agents
        if not self.per_worker:
            self.per_worker = chunks(self.clusters, self.pool.count)
        bare = baselines.BareServerProcess(workdir / "bare-server.log")
        try:
            process = psutil.Process(bare.pid)
            rss_empty = sample(process).rss
            firsts, start = [], 0
            for group in self.per_worker:
                firsts.append({"first_index": start, "count": len(group)})
                start += len(group)
            opened = await self.pool.call_all(
                "bare_open",
                per_worker=firsts,
                target=bare.target,
                agents_per_channel=self.plan.agents_per_channel,
            )
            started = min(o["started"] for o in opened)
            connect_s = max(o["last_welcome"] for o in opened) - started
            retries = sum(o["retries"] for o in opened)
            await asyncio.sleep(min(1.0, self.plan.idle_window_s))
            idle_before = sample(process)
            await asyncio.sleep(min(3.0, self.plan.idle_window_s))
            idle_after = sample(process)
            one = await self._bare_one(bare, firsts)
            everyone = await self._bare_all(bare, firsts)
            blast = await self._bare_blast(bare)
            self.note(
                "baseline_stream",
                connect_s=connect_s,
                open_retries=retries,
                rss_mib=idle_after.rss / MIB,
                rss_per_stream_kib=(idle_after.rss - rss_empty) / 1024 / n,
                idle_cpu_share=cpu_share(idle_before, idle_after),
                **one,
                **everyone,
                **blast,
            )
        finally:
            with contextlib.suppress(Exception):
                await self.pool.call_all("bare_close")
            await bare.aclose()

    async def _bare_one(
        self, bare: baselines.BareServerProcess, firsts: list[dict[str, int]]
    ) -> dict[str, float]:
        rng = random.Random(self.plan.seed)
        picks = rng.sample(range(self.plan.agents), min(self.plan.single_samples, self.plan.agents))
        latencies = []
        for k, index in enumerate(picks):
            worker = next(
                w
                for w, f in enumerate(firsts)
                if f["first_index"] <= index < f["first_index"] + f["count"]
            )
            issued = time.monotonic()
            await bare.push(str(index), f"one-{k}")
            times = await self.pool.call(
                worker, "bare_wait", tag=f"one-{k}", count=1, timeout_s=self.plan.timeout_s
            )
            latencies.append((times[0] - issued) * 1000)
        return {"one_p50_ms": percentile(latencies, 50), "one_p99_ms": percentile(latencies, 99)}

    async def _bare_all(
        self, bare: baselines.BareServerProcess, firsts: list[dict[str, int]]
    ) -> dict[str, float]:
        everyone, lasts = [], []
        for r in range(self.plan.fleet_rounds):
            await asyncio.sleep(0.5)
            issued = time.monotonic()
            await bare.push("*", f"all-{r}")
            seen = await self.pool.call_all(
                "bare_wait",
                per_worker=[{"count": f["count"]} for f in firsts],
                tag=f"all-{r}",
                timeout_s=self.plan.timeout_s,
            )
            latencies = [(t - issued) * 1000 for times in seen for t in times]
            everyone += latencies
            lasts.append(max(latencies))
        return {
            "all_p50_ms": percentile(everyone, 50),
            "all_p99_ms": percentile(everyone, 99),
            "all_last_ms": max(lasts),
        }

    async def _bare_blast(self, bare: baselines.BareServerProcess) -> dict[str, float]:
        ingest = self.details.get("ingest", {})
        size = int(ingest.get("bytes_per_batch", 4000))
        messages = int(ingest.get("rounds", 10))
        expected = messages * self.plan.agents
        received_before, _ = await bare.count()
        started = time.monotonic()
        await self.pool.call_all("bare_blast", messages=messages, size=size)
        deadline = time.monotonic() + self.plan.timeout_s
        while True:
            received, _ = await bare.count()
            if received - received_before >= expected or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        elapsed = time.monotonic() - started
        return {
            "blast_messages": expected,
            "blast_bytes_per_message": size,
            "messages_per_s": (received - received_before) / elapsed,
        }


DELIVERY = "wingsmith_desired_delivery_seconds"


def _delta(after: Metrics, before: Metrics, name: str, **labels: str) -> float:
    return after.get(name, **labels) - before.get(name, **labels)


# -- one size, start to end ---------------------------------------------------------------


async def run_size(
    plan: Plan,
    workdir: pathlib.Path,
    *,
    log: Callable[[str], None],
    profile_dir: pathlib.Path | None = None,
    profile_format: str = "flamegraph",
) -> SizeResult:
    """Every phase at one size; whatever fails, the hub and the workers are stopped."""
    result = SizeResult(agents=plan.agents)
    workdir.mkdir(parents=True, exist_ok=True)
    hub = HubGroup(workdir, count=plan.hubs, db_url=plan.store_url)
    pool = WorkerPool(plan.workers)
    started = time.monotonic()
    result.details["machine"] = machine_state()
    try:
        log(f"[{plan.agents} agents] starting {plan.hubs} hub(s), {plan.workers} worker processes")
        hub.start()
        await pool.start()
        async with Control(hub) as api:
            fleet = Fleet(
                plan=plan,
                hub=hub,
                api=api,
                pool=pool,
                details=result.details,
                profile_dir=profile_dir,
                profile_format=profile_format,
            )
            steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                ("setup", fleet.setup),
                ("connect", fleet.connect),
                ("idle", fleet.idle),
                ("fanout_one", fleet.fanout_one),
                ("fanout_all", fleet.fanout_all),
                ("ingest", fleet.ingest),
                ("admission", fleet.admission),
                ("reconnect", fleet.reconnect),
            ]
            try:
                for name, step in steps:
                    if name in plan.skip:
                        continue
                    log(f"[{plan.agents} agents] {name}")
                    await fleet.phase(name, step)
            except Exception as e:  # keep what was measured; the baselines still run
                result.error = f"{fleet.phases[-1] if fleet.phases else 'start'}: {e!r}"
                log(f"[{plan.agents} agents] FAILED in {result.error}\n{hub.tail()}")
            await pool.call_all("stop_agents")
            hub.stop()
            if "baselines" not in plan.skip:
                log(f"[{plan.agents} agents] baselines")
                await fleet.measure_baselines(workdir)
    except Exception as e:
        result.error = result.error or repr(e)
        log(f"[{plan.agents} agents] FAILED: {e!r}")
    finally:
        await pool.close()
        hub.kill()
    result.details["machine_after"] = machine_state()
    result.details["wall_s"] = time.monotonic() - started
    result.figures = figures(plan.agents, result.details)
    return result


def machine_state() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
        "cpu_busy_pct": psutil.cpu_percent(interval=0.5),
        "memory_available_mib": psutil.virtual_memory().available / MIB,
    }
