"""Load-generator processes: each runs many real agents (or bare baseline streams) on one loop.

The parent (`WorkerPool`) spawns `count` processes (multiprocessing, spawn) and talks to each
over a duplex pipe: a request is (id, command, arguments), the reply (id, ok, result). Every
command is a coroutine of `Worker`, so a long wait (for agents to apply a change) never blocks
the others. A worker exits when told to stop or when its pipe closes (the parent died), so no
process outlives the benchmark.

Inside a worker:
- agents are the product's own: `BenchAgent` is `agent.app.Agent` on a `SimulatedCluster`,
  built exactly as `agent.simulation.build_simulated_agent` builds it. It only adds timestamps:
  when a DesiredState arrived, when `handle_desired` (apply + reconcile) returned, when a
  stream was welcomed. Clocks are `time.monotonic()`, which is system-wide on Linux, so the
  parent compares them with its own;
- `agents_per_channel` agents share one grpc.aio channel (one HTTP/2 connection), so a worker
  holds a few connections with many streams each, as a real fleet's hub sees many agents;
- the observation replay (`ingest_*`) drives ingest with the agents' own observations;
- the bare streams (`bare_*`) are the baseline: a raw bytes bidi stream per simulated agent,
  on the same channel layout, to a bare grpc.aio server (bench/baselines.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import os
import random
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from agent import simulation
from agent.app import Agent, AgentConfig
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.observe import NodeSource, Observations, Observer, workers_by_graph
from agent.sync import convert
from wingsmith.v1 import sync_pb2

Request = tuple[int, str, dict[str, Any]]
Reply = tuple[int, bool, Any]

BARE_STREAM = "/bench.Bare/Stream"
BARE_OPEN_ATTEMPTS = 30


def channel_options(index: int) -> list[tuple[str, Any]]:
    """Each channel its own connection: without a local subchannel pool, channels with equal
    arguments share one TCP connection inside the process."""
    return [
        ("grpc.use_local_subchannel_pool", 1),
        ("bench.channel", index),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        ("grpc.keepalive_time_ms", 30_000),
    ]


# -- the parent's side ------------------------------------------------------------------------


class WorkerPool:
    """`count` worker processes and async calls into them."""

    def __init__(self, count: int, *, nice: int = 0) -> None:
        self.count = count
        self._nice = nice
        self._context = multiprocessing.get_context("spawn")
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._conns: list[multiprocessing.connection.Connection] = []
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for index in range(self.count):
            parent, child = self._context.Pipe(duplex=True)
            proc = self._context.Process(
                target=worker_main,
                args=(child, index, self._nice),
                name=f"bench-worker-{index}",
                daemon=True,
            )
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
            self._loop.add_reader(parent.fileno(), self._on_readable, parent)
        await self.call_all("ping")

    def _on_readable(self, conn: multiprocessing.connection.Connection) -> None:
        try:
            while conn.poll():
                request_id, ok, result = conn.recv()
                future = self._pending.pop(request_id, None)
                if future is None or future.done():
                    continue
                if ok:
                    future.set_result(result)
                else:
                    future.set_exception(WorkerError(result))
        except (EOFError, OSError):
            assert self._loop is not None
            self._loop.remove_reader(conn.fileno())
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(WorkerError("a worker process exited"))
            self._pending.clear()

    async def call(self, index: int, command: str, **args: Any) -> Any:
        assert self._loop is not None, "start() first"
        request_id = next(self._ids)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = future
        self._conns[index].send((request_id, command, args))
        return await future

    async def call_all(
        self, command: str, per_worker: Sequence[dict[str, Any]] | None = None, **common: Any
    ) -> list[Any]:
        """The same command on every worker at once; `per_worker[i]` adds worker i's args."""
        calls = [
            self.call(i, command, **common, **(per_worker[i] if per_worker else {}))
            for i in range(self.count)
        ]
        return list(await asyncio.gather(*calls))

    async def close(self, timeout_s: float = 20.0) -> None:
        """Stop every worker: politely, then terminate, then kill."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.call_all("stop"), timeout_s)
        self.kill()

    def kill(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(Exception):
                if self._loop is not None:
                    self._loop.remove_reader(conn.fileno())
            with contextlib.suppress(Exception):
                conn.close()
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        self._procs.clear()
        self._conns.clear()


class WorkerError(RuntimeError):
    pass


# -- the worker's side ------------------------------------------------------------------------


def worker_main(conn: multiprocessing.connection.Connection, index: int, nice: int) -> None:
    if nice:
        with contextlib.suppress(OSError):
            os.nice(nice)
    # Thousands of agents would log every reconnect; the figures say what happened.
    logging.basicConfig(level=logging.ERROR, format=f"worker-{index} %(levelname)s %(message)s")
    logging.getLogger("wingsmith").setLevel(logging.CRITICAL)
    logging.getLogger("agent").setLevel(logging.CRITICAL)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(Worker(conn, index).serve())


@dataclass
class ApplyBoard:
    """What every agent of this worker saw and when (monotonic seconds)."""

    first_sync: dict[str, float] = field(default_factory=dict)
    # (workload name, generation) -> cluster -> (arrived, applied)
    changes: dict[tuple[str, int], dict[str, tuple[float, float]]] = field(default_factory=dict)
    welcomes: dict[str, list[float]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def desired(
        self, cluster_id: str, message: sync_pb2.DesiredState, arrived: float, applied: float
    ) -> None:
        self.first_sync.setdefault(cluster_id, applied)
        for spec in message.upserts:
            seen = self.changes.setdefault((spec.workload_name, spec.generation), {})
            seen.setdefault(cluster_id, (arrived, applied))
        self.changed.set()

    def welcomed(self, cluster_id: str) -> None:
        self.welcomes.setdefault(cluster_id, []).append(time.monotonic())
        self.changed.set()


class BenchAgent(Agent):
    """The product's agent, plus timestamps of desired state and welcomes."""

    def __init__(self, config: AgentConfig, *, board: ApplyBoard, **kwargs: Any) -> None:
        self.board = board
        super().__init__(config, **kwargs)

    async def handle_desired(self, message: sync_pb2.DesiredState) -> list[sync_pb2.Reject]:
        arrived = time.monotonic()
        rejects = await super().handle_desired(message)
        self.board.desired(self.config.cluster_id, message, arrived, time.monotonic())
        return rejects

    def _on_connected(self, welcome: sync_pb2.Welcome) -> None:
        super()._on_connected(welcome)
        self.board.welcomed(self.config.cluster_id)


@dataclass
class SimAgent:
    agent: BenchAgent
    cluster: SimulatedCluster
    nodes: Callable[[], list[NodeSource]]
    # Observation replay: two real states of this cluster, as the agent would send them.
    templates: tuple[sync_pb2.ObservationBatch, ...] = ()
    template_records: tuple[int, ...] = ()
    sends: int = 0


@dataclass
class BareStream:
    index: int
    call: Any
    reader: asyncio.Task[None] | None = None


class Worker:
    def __init__(self, conn: multiprocessing.connection.Connection, index: int) -> None:
        self._conn = conn
        self.index = index
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.board = ApplyBoard()
        self.channels: list[grpc.aio.Channel] = []
        self.agents: list[SimAgent] = []
        self.by_cluster: dict[str, SimAgent] = {}
        self.agent_tasks: list[asyncio.Task[None]] = []
        self.bare_channels: list[grpc.aio.Channel] = []
        self.bare: list[BareStream] = []
        self.bare_seen: dict[str, list[float]] = {}
        self.bare_changed = asyncio.Event()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_reader(self._conn.fileno(), self._on_readable)
        try:
            await self._stop.wait()
        finally:
            loop.remove_reader(self._conn.fileno())
            await self._shutdown()

    def _on_readable(self) -> None:
        try:
            while self._conn.poll():
                request: Request = self._conn.recv()
                task = asyncio.create_task(self._handle(*request))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (EOFError, OSError):
            self._stop.set()  # the parent is gone

    async def _handle(self, request_id: int, command: str, args: dict[str, Any]) -> None:
        handler: Callable[..., Coroutine[Any, Any, Any]] = getattr(self, f"cmd_{command}")
        try:
            reply: Reply = (request_id, True, await handler(**args))
        except Exception:
            reply = (request_id, False, traceback.format_exc(limit=8))
        with contextlib.suppress(OSError, EOFError):
            self._conn.send(reply)

    async def _shutdown(self) -> None:
        await self._stop_agents()
        await self.cmd_bare_close()

    # -- commands: lifecycle ------------------------------------------------------------------

    async def cmd_ping(self) -> int:
        return os.getpid()

    async def cmd_stop(self) -> None:
        asyncio.get_running_loop().call_soon(self._stop.set)

    # -- commands: agents ---------------------------------------------------------------------

    async def cmd_build_agents(
        self,
        *,
        target: str,
        clusters: list[tuple[str, str]],
        spec: str,
        agents_per_channel: int,
        resync_s: float,
        node_poll_s: float,
    ) -> int:
        """Build (not start) one agent per (cluster id, token)."""
        for offset in range(0, len(clusters), agents_per_channel):
            channel = grpc.aio.insecure_channel(
                target, options=channel_options(self.index * 100_000 + offset)
            )
            self.channels.append(channel)
            for cluster_id, token in clusters[offset : offset + agents_per_channel]:
                config = AgentConfig(
                    hub=target,
                    cluster_id=cluster_id,
                    token=token,
                    resync_s=resync_s,
                    node_poll_s=node_poll_s,
                )
                # As agent.simulation.build_simulated_agent, with the timestamping subclass.
                cluster = simulation.simulated_cluster(config, spec=spec)
                nodes = simulation.node_sources(cluster)
                agent = BenchAgent(
                    config,
                    board=self.board,
                    cluster=cluster,
                    nodes=nodes,
                    channel=channel,
                    sim=cluster,
                )
                sim = SimAgent(agent=agent, cluster=cluster, nodes=nodes)
                self.agents.append(sim)
                self.by_cluster[cluster_id] = sim
        return len(self.agents)

    async def cmd_start_agents(self) -> float:
        started = time.monotonic()
        self.agent_tasks = [asyncio.create_task(a.agent.run()) for a in self.agents]
        return started

    def _crashed(self) -> list[str]:
        """Agents whose run() ended with an exception (an agent should never stop)."""
        return [
            repr(t.exception())
            for t in self.agent_tasks
            if t.done() and not t.cancelled() and t.exception() is not None
        ]

    async def cmd_synced(self) -> dict[str, Any]:
        """How many agents finished their first sync, and when (monotonic); which crashed."""
        crashed = self._crashed()
        return {
            "crashed": len(crashed),
            "crash": crashed[0][:300] if crashed else "",
            "synced": len(self.board.first_sync),
            "connected": sum(1 for a in self.agents if a.agent.client.connected.is_set()),
            "first_sync": dict(self.board.first_sync),
            "first_welcome": {c: times[0] for c, times in self.board.welcomes.items()},
        }

    async def cmd_wait_applied(
        self, *, workload: str, generation: int, clusters: list[str] | None, timeout_s: float
    ) -> dict[str, Any]:
        """Wait until the given clusters (None: all of this worker's) applied `generation` of
        `workload`; returns cluster -> (arrived, applied), and the ones still missing."""
        everyone = {a.agent.config.cluster_id for a in self.agents}
        wanted = set(clusters) if clusters is not None else everyone
        key = (workload, generation)
        deadline = time.monotonic() + timeout_s
        while True:
            seen = self.board.changes.get(key, {})
            missing = wanted - seen.keys()
            if not missing or time.monotonic() > deadline:
                break
            self.board.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.board.changed.wait(), 0.05)
        return {
            "times": {c: seen[c] for c in wanted if c in seen},
            "missing": sorted(missing),
        }

    async def cmd_client_stats(self) -> dict[str, dict[str, int]]:
        return {
            a.agent.config.cluster_id: {
                "sessions": a.agent.client.stats.sessions,
                "desired_messages": a.agent.client.stats.desired_messages,
                "desired_specs": a.agent.client.stats.desired_specs,
                "snapshots": a.agent.client.stats.snapshots,
                "connected": int(a.agent.client.connected.is_set()),
            }
            for a in self.agents
        }

    async def cmd_wait_resumed(
        self, *, sessions_before: dict[str, int], timeout_s: float
    ) -> dict[str, Any]:
        """Wait until every agent was welcomed on a new session; cluster -> welcome time."""
        deadline = time.monotonic() + timeout_s
        while True:
            waiting = [
                a
                for a in self.agents
                if a.agent.client.stats.sessions
                <= sessions_before.get(a.agent.config.cluster_id, 0)
            ]
            if not waiting or time.monotonic() > deadline:
                break
            self.board.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.board.changed.wait(), 0.1)
        crashed = self._crashed()
        return {
            "crashed": len(crashed),
            "crash": crashed[0][:300] if crashed else "",
            "welcomed": {
                c: times[-1]
                for c, times in self.board.welcomes.items()
                if len(times) > sessions_before.get(c, 0)
            },
            "missing": [a.agent.config.cluster_id for a in waiting],
        }

    async def _stop_agents(self) -> None:
        for task in self.agent_tasks:
            task.cancel()
        await asyncio.gather(*self.agent_tasks, return_exceptions=True)
        self.agent_tasks = []
        for channel in self.channels:
            with contextlib.suppress(Exception):
                await channel.close()
        self.channels = []

    async def cmd_stop_agents(self) -> None:
        await self._stop_agents()
        self.agents = []
        self.by_cluster = {}

    # -- commands: observation replay ---------------------------------------------------------

    async def cmd_ingest_prepare(self) -> dict[str, Any]:
        """Capture two real states of every cluster: A, as it runs now, and B, right after
        every worker pod was deleted and replaced (new pod names, so new replicas and new
        allocations on every node that runs one). Each template holds what the agent's
        observer sends for that transition: the deployments and nodes that differ.

        Returns the records per template (as the hub counts what it writes), their size, and
        the deployment ids each cluster's templates report (to see when the hub wrote them).
        """
        records = size = 0
        reported: dict[str, list[str]] = {}
        for sim in self.agents:
            desired = sim.agent.desired.deployments
            state_a = Observer(cluster=sim.cluster, nodes=sim.nodes).collect(desired)
            graphs = workers_by_graph(sim.cluster.list_pods())
            for pod in [p for group in graphs.values() for p in group]:
                sim.cluster.delete_pod(pod.namespace, pod.name)
            sim.agent.cluster_changed()
            state_b = Observer(cluster=sim.cluster, nodes=sim.nodes).collect(desired)
            templates, counts = [], []
            for this, other in ((state_a, state_b), (state_b, state_a)):
                deployments = [d for d in this.deployments if d not in other.deployments]
                nodes = [n for n in this.nodes if n not in other.nodes]
                batch = convert.observation_batch(
                    Observations(tuple(deployments), tuple(nodes)), seq=0, now_ns=0
                )
                templates.append(batch)
                # As the hub counts what it wrote (hub/service/ingest.py).
                counts.append(
                    sum(1 + len(d.replicas) for d in batch.deployments)
                    + sum(1 + len(n.devices) + len(n.allocations) for n in batch.nodes)
                )
                size += batch.ByteSize()
            sim.templates, sim.template_records = tuple(templates), tuple(counts)
            sim.sends = 0
            records += sum(counts)
            reported[sim.agent.config.cluster_id] = sorted(
                {d.deployment_id for t in templates for d in t.deployments}
            )
        return {
            "templates": 2 * len(self.agents),
            "records": records,
            "bytes": size,
            "reported": reported,
        }

    async def cmd_ingest_send(self, *, clusters: list[str], stamp_ns: int) -> dict[str, int]:
        """One batch from each of these clusters' agents, over its own stream: its templates
        in turn (A, B, A, ...), every record stamped `stamp_ns` (newer than anything sent)."""
        sent = records = size = refused = 0
        for cluster_id in clusters:
            sim = self.by_cluster[cluster_id]
            which = sim.sends % 2
            sim.sends += 1
            message = sync_pb2.AgentMessage()
            batch = message.observations
            batch.CopyFrom(sim.templates[which])
            for d in batch.deployments:
                d.observe_unix_nanos = stamp_ns
            for n in batch.nodes:
                n.observe_unix_nanos = stamp_ns
            batch.seq = sim.agent.client.next_seq()
            if sim.agent.client.send(message):
                sent += 1
                records += sim.template_records[which]
                size += batch.ByteSize()
            else:
                refused += 1
        return {"messages": sent, "records": records, "bytes": size, "refused": refused}

    async def cmd_ingest_truth(self) -> int:
        """Send every cluster's true, full state, so the hub ends the replay holding it."""
        sent = 0
        for sim in self.agents:
            observations = Observer(cluster=sim.cluster, nodes=sim.nodes).collect(
                sim.agent.desired.deployments
            )
            batch = convert.observation_batch(
                observations, seq=sim.agent.client.next_seq(), now_ns=time.time_ns()
            )
            sent += int(sim.agent.client.send(sync_pb2.AgentMessage(observations=batch)))
            sim.templates, sim.template_records = (), ()
        return sent

    # -- commands: bare baseline streams ------------------------------------------------------

    async def cmd_bare_open(
        self, *, target: str, first_index: int, count: int, agents_per_channel: int
    ) -> dict[str, float]:
        """Open `count` bare streams: hello, wait for the welcome. Returns when the last one
        was welcomed (monotonic), and how many opens had to be retried."""
        started = time.monotonic()
        welcomed: list[float] = []
        retries = 0

        async def open_one(channel: grpc.aio.Channel, index: int) -> None:
            nonlocal retries
            for attempt in range(BARE_OPEN_ATTEMPTS):
                call = channel.stream_stream(BARE_STREAM)()
                try:
                    await call.write(f"hello:{index}".encode())
                    await call.read()
                    break
                # grpc core cancels new calls beyond its pending-request limits (1,000 soft,
                # 3,000 hard) while the server is busy; a write to a call that ended that way
                # raises InvalidStateError. Like an agent, try again after a short backoff.
                except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    call.cancel()
                    if attempt == BARE_OPEN_ATTEMPTS - 1:
                        raise
                    retries += 1
                    await asyncio.sleep(random.uniform(0, min(1.0, 0.05 * 2**attempt)))
            welcomed.append(time.monotonic())
            stream = BareStream(index=index, call=call)
            stream.reader = asyncio.create_task(self._bare_read(stream))
            self.bare.append(stream)

        opens = []
        for offset in range(0, count, agents_per_channel):
            channel = grpc.aio.insecure_channel(
                target, options=channel_options(self.index * 100_000 + offset)
            )
            self.bare_channels.append(channel)
            for i in range(offset, min(count, offset + agents_per_channel)):
                opens.append(open_one(channel, first_index + i))
        await asyncio.gather(*opens)
        return {
            "started": started,
            "last_welcome": max(welcomed, default=started),
            "retries": retries,
        }

    async def _bare_read(self, stream: BareStream) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            while True:
                message = await stream.call.read()
                if message is grpc.aio.EOF:
                    return
                arrived = time.monotonic()
                tag = bytes(message).decode(errors="replace")
                self.bare_seen.setdefault(tag, []).append(arrived)
                self.bare_changed.set()

    async def cmd_bare_wait(self, *, tag: str, count: int, timeout_s: float) -> list[float]:
        """Arrival times of the pushes tagged `tag`, once `count` streams got one."""
        deadline = time.monotonic() + timeout_s
        while len(self.bare_seen.get(tag, ())) < count and time.monotonic() < deadline:
            self.bare_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.bare_changed.wait(), 0.05)
        return self.bare_seen.pop(tag, [])

    async def cmd_bare_blast(self, *, messages: int, size: int) -> dict[str, float]:
        """Every stream writes `messages` payloads of `size` bytes as fast as it can."""
        payload = b"o" * size
        started = time.monotonic()

        async def blast(stream: BareStream) -> None:
            for _ in range(messages):
                await stream.call.write(payload)

        await asyncio.gather(*(blast(s) for s in self.bare))
        return {"started": started, "written": time.monotonic()}

    async def cmd_bare_close(self) -> None:
        for stream in self.bare:
            stream.call.cancel()
            if stream.reader is not None:
                stream.reader.cancel()
        await asyncio.gather(
            *(s.reader for s in self.bare if s.reader is not None), return_exceptions=True
        )
        self.bare = []
        for channel in self.bare_channels:
            with contextlib.suppress(Exception):
                await channel.close()
        self.bare_channels = []
