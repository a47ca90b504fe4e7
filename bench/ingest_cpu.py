"""The hub's CPU per ingested observation record, in-process, on the fleet benchmark's shape.

    python -m bench.ingest_cpu [--clusters 200] [--rounds 6] [--group 128] [--repeat 3]
                               [--store sqlite|postgres]

What is measured: what the hub does with an agent's observation batch after gRPC handed it
the bytes, in one process and one thread: the message parsed, validated and converted
(`hub.sync.convert.observations`, as the validation thread does), then written in groups of
`--group` reports (`hub.service.ingest.ingest_reports`, as the store-writer thread does), on
a real SQLite file. The batches are those of the fleet benchmark's ingest phase
(bench/workers.py `cmd_ingest_send`): each cluster runs one workload of 8 replicas x TP 4 on
8 nodes of 8 GPUs, and every batch reports the deployment (new pod names) and the 4 nodes
running its pods: their devices as before, their allocations new. Records are counted as the
fleet benchmark counts them (a deployment, its replicas, a node, its devices and
allocations: 53 a batch). The figures are CPU time (`time.process_time`, which the machine's
load moves least), minimum of `--repeat` runs of `--rounds` rounds over every cluster:
microseconds a record, validation and writes apart, and the bare SQLite upsert's CPU per
record (bench/store_ingest.py's, same machine, same run) for the ratio the fleet reports.
The cyclic collector is tuned as the hub tunes it (hub/app/command.py `tune_gc`).

With `--store postgres` the store is a throwaway PostgreSQL server (tools/pgserver.py): the
writes' CPU is then the hub process's and the server's together (every process of the server,
psutil), each printed, and the baseline is the bare PostgreSQL upsert's (client and server).
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence

import psutil

from bench import store_ingest
from hub.app.command import tune_gc
from hub.model import Placement, Serving
from hub.service import clusters as cluster_service
from hub.service import ingest, projects, workloads
from hub.service.clusters import token_hash
from hub.service.context import ServiceContext
from hub.store import deployments
from hub.store.port import open_store
from hub.sync import convert
from tools.pgserver import PgServer
from wingsmith.v1 import resources_pb2, sync_pb2

H100 = "H100-80GB"
NODES = 8
GPUS = 8
REPLICAS = 8
TP = 4
SKEW_NS = 5 * 10**9


def _uuid(cluster: int, node: int, gpu: int) -> str:
    return f"GPU-{cluster:08x}-{node:04x}-4b6a-9c2e-{gpu:012x}"


def _template(cluster: int, deployment_id: str, which: int) -> sync_pb2.ObservationBatch:
    """What the agent sends after every worker pod was replaced (`which`: pod generation)."""
    node_of = [r // 2 for r in range(REPLICAS)]  # two 4-GPU pods a node, on nodes 0-3
    pods = [f"w-worker-{which}{r:03d}-x7k2p" for r in range(REPLICAS)]
    replicas = [
        sync_pb2.ReplicaReport(
            name=pods[r],
            namespace="wingsmith",
            node_id=f"c{cluster:05d}-n{node_of[r]}",
            ready=True,
            serving_digest="svg_0123456789abcdef",
            engine_version="0.11.0",
            role="worker",
        )
        for r in range(REPLICAS)
    ]
    status = sync_pb2.DeploymentStatusReport(
        phase="Ready", ready_replicas=REPLICAS, desired_replicas=REPLICAS, applied_generation=1
    )
    nodes = []
    for n in sorted(set(node_of)):
        devices = _devices(cluster, n)
        allocations = [
            sync_pb2.AllocationReport(
                pod_name=pods[r],
                namespace="wingsmith",
                device_ids=[_uuid(cluster, n, g) for g in range((r % 2) * TP, (r % 2 + 1) * TP)],
                resource_name="nvidia.com/gpu",
            )
            for r in range(REPLICAS)
            if node_of[r] == n
        ]
        nodes.append(
            sync_pb2.NodeObservation(
                node_id=f"c{cluster:05d}-n{n}", devices=devices, allocations=allocations
            )
        )
    deployment = sync_pb2.DeploymentObservation(
        deployment_id=deployment_id, status=status, replicas=replicas
    )
    return sync_pb2.ObservationBatch(deployments=[deployment], nodes=nodes)


def _devices(cluster: int, n: int) -> list[resources_pb2.Device]:
    """Node n's GPUs, the same bytes in every report (as a real node's are)."""
    return [
        resources_pb2.Device(
            uuid=_uuid(cluster, n, g),
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=80 * 2**30,
            pci_bus_id=f"00000000:{g + 16:02x}:00.0",
            device_class=H100,
            healthy=True,
            verified=True,
            nvlink_domain=f"c{cluster:05d}-n{n}",
        )
        for g in range(GPUS)
    ]


def _records(batch: sync_pb2.ObservationBatch) -> int:
    """As the fleet benchmark counts them (bench/workers.py)."""
    return sum(1 + len(d.replicas) for d in batch.deployments) + sum(
        1 + len(n.devices) + len(n.allocations) for n in batch.nodes
    )


def _full_nodes(cluster: int) -> sync_pb2.ObservationBatch:
    """Every node with its devices, no pods yet: the cluster's first report."""
    return sync_pb2.ObservationBatch(
        nodes=[
            sync_pb2.NodeObservation(
                node_id=f"c{cluster:05d}-n{n}",
                devices=_devices(cluster, n),
            )
            for n in range(NODES)
        ]
    )


class Fleet:
    """N clusters with one workload each, in a store (a SQLite file or a PostgreSQL URL); their
    two report templates."""

    def __init__(self, url: str, clusters: int) -> None:
        self.ctx = ServiceContext(db=open_store(url))
        projects.create(self.ctx, name="fleet", quotas={H100: clusters * NODES * GPUS})
        self.tokens: list[str] = []
        self.templates: list[tuple[sync_pb2.ObservationBatch, sync_pb2.ObservationBatch]] = []
        self.seq = 0
        for c in range(clusters):
            cluster_id = f"c{c:05d}"
            _, token = cluster_service.create(self.ctx, cluster_id=cluster_id, labels={})
            self.tokens.append(token_hash(token))
            self._ingest([(c, _full_nodes(c))], time.time_ns())
            workloads.create(
                self.ctx,
                workloads.WorkloadSpec(
                    name=f"w{c:05d}",
                    project="fleet",
                    replicas=REPLICAS,
                    device_class=H100,
                    serving=Serving(
                        engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=TP
                    ),
                    placement=Placement(clusters=(cluster_id,)),
                ),
            )
        with self.ctx.db.read() as conn:
            ids = {
                d.cluster_id: d.deployment_id
                for d in deployments.on_clusters(conn, [f"c{c:05d}" for c in range(clusters)])
            }
        for c in range(clusters):
            dep = ids[f"c{c:05d}"]
            self.templates.append((_template(c, dep, 0), _template(c, dep, 1)))

    def round_bytes(self, which: int, stamp_ns: int) -> list[tuple[int, bytes, int]]:
        """Every cluster's batch of one round, serialized as it reaches the hub."""
        out = []
        for c, pair in enumerate(self.templates):
            batch = sync_pb2.ObservationBatch()
            batch.CopyFrom(pair[which])
            self.seq += 1
            batch.seq = self.seq
            for d in batch.deployments:
                d.observe_unix_nanos = stamp_ns
            for n in batch.nodes:
                n.observe_unix_nanos = stamp_ns
            out.append((c, batch.SerializeToString(), _records(batch)))
        return out

    def _ingest(self, items: Sequence[tuple[int, sync_pb2.ObservationBatch]], stamp: int) -> None:
        reports = []
        for c, message in items:
            self.seq += 1
            message.seq = self.seq
            for n in message.nodes:
                n.observe_unix_nanos = stamp
            check = convert.Checker(now_ns=time.time_ns(), max_skew_ns=SKEW_NS)
            batch = convert.observations(message, check)
            reports.append(ingest.Report(f"c{c:05d}", self.tokens[c], batch))
        outcome = ingest.ingest_reports(self.ctx, reports)
        assert not outcome.refused and not outcome.unwritten, outcome


def _no_server() -> float:
    return 0.0


def run(
    fleet: Fleet, *, rounds: int, group: int, server_cpu: Callable[[], float] = _no_server
) -> tuple[int, float, float, float]:
    """(records, validation CPU s, write CPU s, the database server's CPU s) of `rounds`
    rounds; `server_cpu` reads the server's CPU seconds so far (none for SQLite)."""
    records = 0
    validate_s = write_s = server_s = 0.0
    for r in range(rounds):
        wave = fleet.round_bytes(r % 2, time.time_ns())
        for offset in range(0, len(wave), group):
            began = time.process_time()
            reports = []
            for c, data, count in wave[offset : offset + group]:
                message = sync_pb2.ObservationBatch.FromString(data)
                check = convert.Checker(now_ns=time.time_ns(), max_skew_ns=SKEW_NS)
                batch = convert.observations(message, check)
                reports.append(ingest.Report(f"c{c:05d}", fleet.tokens[c], batch))
                records += count
            validated = time.process_time()
            server_before = server_cpu()
            outcome = ingest.ingest_reports(fleet.ctx, reports)
            written = time.process_time()
            server_s += server_cpu() - server_before
            assert not outcome.refused and not outcome.unwritten, outcome
            validate_s += validated - began
            write_s += written - validated
    return records, validate_s, write_s, server_s


def bare_cpu_us(path: pathlib.Path, clusters: int) -> float:
    """The bare SQLite upsert's CPU per record (bench/store_ingest.py's baseline)."""
    began = time.process_time()
    rate_wall = store_ingest.bare_sqlite_rate(path, clusters=clusters, rounds=3, batch=50)
    del rate_wall
    records = clusters * 3 * store_ingest.NODES * store_ingest.GPUS
    return (time.process_time() - began) / records * 1e6


def bare_postgres_cpu_us(url: str, clusters: int, server_cpu: Callable[[], float]) -> float:
    """The bare PostgreSQL upsert's CPU per record, client and server."""
    # The backend that created the database (just before) exits and is reaped meanwhile:
    # its CPU (copying the template, about 0.1 s) is not the upsert's.
    time.sleep(1.0)
    began, server_began = time.process_time(), server_cpu()
    store_ingest.bare_postgres_rate(url, clusters=clusters, rounds=3, batch=50)
    spent = time.process_time() - began + server_cpu() - server_began
    return spent / (clusters * 3 * store_ingest.NODES * store_ingest.GPUS) * 1e6


def server_cpu_of(server: PgServer) -> Callable[[], float]:
    """Reads the CPU seconds of every process of `server` so far, its exited backends (closed
    connections) included."""
    root = psutil.Process(server.process.pid)

    def read() -> float:
        total = 0.0
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                # A backend that exited (a closed connection) is counted in its parent's
                # children_* times once reaped.
                times = process.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        return total

    return read


@contextlib.contextmanager
def _store(kind: str, tmp: pathlib.Path) -> Iterator[tuple[str, PgServer | None]]:
    if kind == "sqlite":
        yield str(tmp / "hub.db"), None
        return
    with PgServer.start() as server:
        yield server.create_database("hub"), server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_cpu", description=__doc__)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--group", type=int, default=128, help="reports per write transaction")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="wingsmith-bench-") as tmp,
        _store(args.store, pathlib.Path(tmp)) as (url, server),
    ):
        server_cpu = server_cpu_of(server) if server is not None else _no_server
        # The bare upsert first: the server then runs nothing else (the fleet's backends
        # exiting at its end would be counted in the server's CPU).
        if server is None:
            bare = min(
                bare_cpu_us(pathlib.Path(tmp) / f"bare{i}.db", args.clusters) for i in range(2)
            )
        else:
            bare = min(
                bare_postgres_cpu_us(server.create_database(f"bare{i}"), args.clusters, server_cpu)
                for i in range(2)
            )
        began = time.monotonic()
        fleet = Fleet(url, args.clusters)
        print(f"{args.clusters} clusters set up in {time.monotonic() - began:.1f} s")
        tune_gc()  # as the hub does once started
        run(fleet, rounds=2, group=args.group)  # warm: every node's hashes known
        best: tuple[float, float, float, float] | None = None
        for _ in range(args.repeat):
            records, validate_s, write_s, server_s = run(
                fleet, rounds=args.rounds, group=args.group, server_cpu=server_cpu
            )
            figures = (
                validate_s / records * 1e6,
                write_s / records * 1e6,
                server_s / records * 1e6,
                (validate_s + write_s + server_s) / records * 1e6,
            )
            print(
                f"  {records:,} records: validate {figures[0]:.2f} us, write {figures[1]:.2f}"
                f" us, server {figures[2]:.2f} us, total {figures[3]:.2f} us a record"
            )
            best = figures if best is None or figures[3] < best[3] else best
        fleet.ctx.db.close()
        assert best is not None
        print(
            f"best: validate {best[0]:.2f} us, write {best[1]:.2f} us, server {best[2]:.2f} us,"
            f" total {best[3]:.2f} us a record; bare {args.store} upsert {bare:.2f} us a record"
            f" ({bare / best[3]:.2f}x)"
        )


if __name__ == "__main__":
    main()
