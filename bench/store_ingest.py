"""Ingest on each store, measured in one run: SQLite (one hub), PostgreSQL with one hub, and
PostgreSQL with two hubs ingesting at once, each beside its bare baseline.

    python -m bench.store_ingest [--clusters 200] [--rounds 6] [--batch 50]

What is measured: the hub's own ingest path (hub.service.ingest.ingest: validation, change
detection, the writes, held-device recount, admission), fed node observations of simulated
clusters whose devices change every round (so every record is written), in batches of
`--batch` clusters per transaction as the hub's ingest queue groups them. A "hub" here is a
process with its own store connection(s); two hubs split the clusters between them and run
concurrently on one database. Records/s is every written record (a node and its devices)
over the wall time of the whole run.

The baselines are the databases' own cost per record with none of the hub: a batched
`INSERT .. ON CONFLICT DO UPDATE` of rows shaped like the `devices` table, executemany in
transactions of the same size: on SQLite (WAL, synchronous=NORMAL) and on PostgreSQL (the
same throwaway server: fsync off, unix socket).

The PostgreSQL server is tools/pgserver.py's (the machine's own PostgreSQL; run as root it
runs as the `postgres` user).
"""

from __future__ import annotations

import argparse
import multiprocessing
import pathlib
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from hub.model import Device, NodeObservation, ObservationBatch
from hub.service import clusters as cluster_service
from hub.service import ingest
from hub.service.context import ServiceContext
from hub.store.port import open_store
from tools.pgserver import PgServer

NODES = 4
GPUS = 8
H100 = "H100-80GB"


def _batch(cluster_id: str, round_: int) -> ObservationBatch:
    now = time.time_ns() + round_
    nodes = tuple(
        NodeObservation(
            f"{cluster_id}-n{n}",
            now,
            tuple(
                Device(
                    f"GPU-{cluster_id}-{n}-{g}",
                    "H100",
                    80,
                    f"0:{g}",
                    H100,
                    healthy=(round_ + g) % 2 == 0,  # changes every round: every record written
                    health_reason="" if (round_ + g) % 2 == 0 else "xid 79",
                    verified=True,
                )
                for g in range(GPUS)
            ),
            (),
        )
        for n in range(NODES)
    )
    return ObservationBatch(seq=round_ + 1, nodes=nodes)


def _prepare(url: str, clusters: int) -> None:
    ctx = ServiceContext(db=open_store(url))
    for i in range(clusters):
        cluster_service.create(ctx, cluster_id=f"c{i:05d}", labels={})
    ctx.db.close()


def _hub(url: str, cluster_ids: Sequence[str], rounds: int, batch: int, start: Any) -> int:
    """One hub's share: ingest `rounds` rounds of its clusters; returns records written."""
    ctx = ServiceContext(db=open_store(url))
    # Built before the clock starts: making the observations is the agents' work, not the hub's.
    groups = [
        [(c, _batch(c, round_)) for c in cluster_ids[offset : offset + batch]]
        for round_ in range(rounds)
        for offset in range(0, len(cluster_ids), batch)
    ]
    start.wait()
    records = 0
    for items in groups:
        records += ingest.ingest(ctx, items).records
    ctx.db.close()
    return records


def _hub_process(args: tuple[str, list[str], int, int, Any]) -> int:
    return _hub(*args)


def ingest_rate(url: str, *, hubs: int, clusters: int, rounds: int, batch: int) -> float:
    _prepare(url, clusters)
    ids = [f"c{i:05d}" for i in range(clusters)]
    shares = [ids[i::hubs] for i in range(hubs)]
    manager = multiprocessing.Manager()
    start = manager.Barrier(hubs + 1)
    context = multiprocessing.get_context("spawn")
    with context.Pool(hubs) as pool:
        results = pool.map_async(
            _hub_process, [(url, share, rounds, batch, start) for share in shares]
        )
        start.wait()
        began = time.perf_counter()
        records = sum(results.get(timeout=600))
        elapsed = time.perf_counter() - began
    manager.shutdown()
    return records / elapsed


_DEVICE_TABLE = (
    "CREATE TABLE devices (cluster_id TEXT NOT NULL, node_id TEXT NOT NULL, uuid TEXT NOT NULL,"
    " name TEXT NOT NULL, memory_bytes BIGINT NOT NULL, pci_bus_id TEXT NOT NULL,"
    " device_class TEXT NOT NULL, healthy BIGINT NOT NULL, health_reason TEXT NOT NULL,"
    " verified BIGINT NOT NULL, nvlink_domain TEXT NOT NULL, parent_uuid TEXT NOT NULL,"
    " PRIMARY KEY (cluster_id, uuid))"
)
_DEVICE_UPSERT = (
    "INSERT INTO devices VALUES ({marks}) ON CONFLICT (cluster_id, uuid) DO UPDATE SET"
    " healthy = excluded.healthy, health_reason = excluded.health_reason"
)


def _rows(clusters: int, rounds: int) -> list[list[tuple[object, ...]]]:
    """Per round, one row per device of every cluster (the records ingest writes)."""
    return [
        [
            (f"c{c:05d}", f"n{n}", f"GPU-{c}-{n}-{g}", "H100", 80, f"0:{g}", H100,
             (r + g) % 2, "", 1, "", "")
            for c in range(clusters)
            for n in range(NODES)
            for g in range(GPUS)
        ]
        for r in range(rounds)
    ]  # fmt: skip


def bare_sqlite_rate(path: pathlib.Path, *, clusters: int, rounds: int, batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(_DEVICE_TABLE)
    upsert = _DEVICE_UPSERT.format(marks=",".join("?" * 12))
    per_tx = batch * NODES * GPUS
    rounds_rows = _rows(clusters, rounds)
    began = time.perf_counter()
    for rows in rounds_rows:
        for offset in range(0, len(rows), per_tx):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(upsert, rows[offset : offset + per_tx])
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - began
    conn.close()
    return sum(len(r) for r in rounds_rows) / elapsed


def bare_postgres_rate(url: str, *, clusters: int, rounds: int, batch: int) -> float:
    import psycopg

    upsert = _DEVICE_UPSERT.format(marks=",".join(["%s"] * 12))
    per_tx = batch * NODES * GPUS
    rounds_rows = _rows(clusters, rounds)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_DEVICE_TABLE)
        began = time.perf_counter()
        for rows in rounds_rows:
            for offset in range(0, len(rows), per_tx):
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(upsert, rows[offset : offset + per_tx])
        elapsed = time.perf_counter() - began
    return sum(len(r) for r in rounds_rows) / elapsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.store_ingest", description=__doc__)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch", type=int, default=50, help="clusters per ingest transaction")
    args = parser.parse_args(argv)
    shape = dict(clusters=args.clusters, rounds=args.rounds, batch=args.batch)
    records = args.clusters * args.rounds * NODES * (GPUS + 1)
    print(
        f"ingest: {args.clusters} clusters x {NODES} nodes x {GPUS} GPUs, {args.rounds} rounds"
        f" ({records:,} records), {args.batch} clusters per transaction"
    )
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="wingsmith-bench-") as tmp, PgServer.start() as pg:
        figures["bare SQLite upsert"] = bare_sqlite_rate(pathlib.Path(tmp) / "bare.db", **shape)
        figures["bare PostgreSQL upsert"] = bare_postgres_rate(pg.create_database("bare"), **shape)
        figures["hub ingest, SQLite, 1 hub"] = ingest_rate(
            str(pathlib.Path(tmp) / "hub.db"), hubs=1, **shape
        )
        figures["hub ingest, PostgreSQL, 1 hub"] = ingest_rate(
            pg.create_database("one"), hubs=1, **shape
        )
        figures["hub ingest, PostgreSQL, 2 hubs"] = ingest_rate(
            pg.create_database("two"), hubs=2, **shape
        )
    base = figures["hub ingest, SQLite, 1 hub"]
    width = max(len(name) for name in figures)
    for name, rate in figures.items():
        print(f"  {name:<{width}}  {rate:>10,.0f} records/s  ({rate / base:.2f}x SQLite hub)")


if __name__ == "__main__":
    main()
