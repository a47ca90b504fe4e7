"""`python -m bench.history_sample`: the cost of one sample of the dashboard's chart history
(hub/ui/history.py), in-process, before and after issue 23.

- before: what the sampler did until issue 23: ListClusters and ListProjects, pages of 500,
  as the API answers them (a view per cluster with its nodes and devices, the API's converter,
  its JSON encoding: on the hub's event loop), the values taken from the JSON, then kept in
  the store (hub/service/history.py `ChartHistory.put`, in a worker thread).
- after: `ChartHistory.sample`: the same values from the store's aggregates
  (hub/service/history.py `figures`), then kept; all of it in a worker thread.

The store (SQLite in a temporary folder, or `--store-url`) holds N clusters of 8 nodes of 8
GPUs each (64 devices), one device of each node held by a pod, and a project per 10 clusters
with a workload of 10 replicas of 4 GPUs placed over them. Both paths are checked to give the same
values. Prints, per fleet size, the median and best wall and CPU milliseconds of the read
alone and of a whole sample (the read and the store's upsert of its values).

    python -m bench.history_sample                  200 and 2,000 clusters, 7 samples each
    python -m bench.history_sample --clusters 200 --samples 3
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from hub.api import convert, jsonmap
from hub.model import (
    AllocationObservation,
    Device,
    NodeObservation,
    ObservationBatch,
    Placement,
    Serving,
)
from hub.service import clusters, history, ingest, projects, sync, workloads
from hub.service.context import ServiceContext
from hub.service.history import ChartHistory, Value
from hub.store.port import open_store
from wingsmith.v1 import control_pb2 as cpb

H100 = "H100-80GB"
NODES = 8
GPUS = 8
PER_PROJECT = 10


def seed(ctx: ServiceContext, count: int) -> None:
    """`count` clusters with their devices and pods, a project and workload per 10 of them."""
    ids = [f"c{i:05d}" for i in range(count)]
    for cluster_id in ids:
        clusters.create(ctx, cluster_id=cluster_id, labels={"zone": cluster_id[-1]})
    for start in range(0, count, 50):
        batch = []
        for cluster_id in ids[start : start + 50]:
            nodes = []
            for n in range(NODES):
                devices = tuple(
                    Device(f"{cluster_id}-{n}-{g}", "H100", 80, f"{n}:{g}", H100, True, "", True)
                    for g in range(GPUS)
                )
                pods = (AllocationObservation(f"p{n}", "other", (devices[0].uuid,), "gpu"),)
                nodes.append(NodeObservation(f"n{n}", time.time_ns(), devices, pods))
            batch.append((cluster_id, ObservationBatch(seq=1, nodes=tuple(nodes))))
        sync.record_liveness(ctx, last_seen={c: ctx.clock() for c, _ in batch}, applied={})
        ingest.ingest(ctx, batch)
    for p in range(0, count, PER_PROJECT):
        name = f"proj{p // PER_PROJECT:04d}"
        projects.create(ctx, name=name, quotas={H100: 64})
        workloads.create(
            ctx,
            workloads.WorkloadSpec(
                name=f"w{p // PER_PROJECT:04d}",
                project=name,
                replicas=PER_PROJECT,
                device_class=H100,
                serving=Serving(engine="vllm", engine_version="0.11.0", model="m"),
                placement=Placement(clusters=tuple(ids[p : p + PER_PROJECT])),
            ),
        )


def listed(ctx: ServiceContext) -> list[Value]:
    """The values as the sampler took them before: every page of ListClusters and ListProjects
    as the API's JSON (what `Dashboard.call` answered), then read like hub/ui/history.py did."""
    found: dict[str, list[dict[str, Any]]] = {"clusters": [], "projects": []}
    for kind, page_of, response in (
        ("clusters", clusters.list_page, cpb.ListClustersResponse),
        ("projects", projects.list_page, cpb.ListProjectsResponse),
    ):
        to_pb: Callable[[Any], Any] = convert.cluster if kind == "clusters" else convert.project
        token = ""
        while True:
            page, token = page_of(ctx, page_size=500, page_token=token)
            answer = response(**{kind: [to_pb(v) for v in page]}, next_page_token=token)
            found[kind] += jsonmap.to_json(answer)[kind]
            if not token:
                break
    values: list[Value] = []
    for c in found["clusters"]:
        for name, d in (c.get("devices") or {}).items():
            values += [
                ("cluster", c["cluster_id"], name, f, int(d.get(f) or 0))
                for f in history.CLUSTER_FIELDS
            ]
    for p in found["projects"]:
        quotas, usage = p.get("quotas") or {}, p.get("usage") or {}
        for name in set(quotas) | set(usage):
            used = usage.get(name) or {}
            values += [
                ("project", p["name"], name, "used", int(used.get("used") or 0)),
                ("project", p["name"], name, "reserved", int(used.get("reserved") or 0)),
                ("project", p["name"], name, "quota", int(quotas.get(name) or 0)),
            ]
    return values


def timed(sample: Callable[[], object], samples: int) -> tuple[float, float, float]:
    """(median wall ms, best wall ms, median CPU ms) over `samples` runs."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(samples):
        wall, cpu = time.perf_counter(), time.process_time()
        sample()
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def run(count: int, samples: int, store_url: str | None) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="history-sample-") as tmp:
        url = store_url or str(pathlib.Path(tmp) / "hub.db")
        ctx = ServiceContext(db=open_store(url))
        started = time.perf_counter()
        seed(ctx, count)
        seeded = time.perf_counter() - started
        keeper = ChartHistory(ctx)
        assert sorted(listed(ctx)) == sorted(history.figures(ctx)), "the same values"
        bucket = [int(time.time())]

        def before() -> None:
            bucket[0] += 15
            keeper.put(bucket[0], listed(ctx), oldest=bucket[0] - 3600)

        def after() -> None:
            bucket[0] += 15
            keeper.sample(bucket[0], oldest=bucket[0] - 3600)

        lines = []
        values = len(history.figures(ctx))
        for name, sample in (
            ("before: the read", lambda: listed(ctx)),
            ("after: the read", lambda: history.figures(ctx)),
            ("before: read and kept", before),
            ("after: read and kept", after),
        ):
            wall, best, cpu = timed(sample, samples)
            lines.append(
                f"| {count:,} | {name} | {wall:.1f} | {best:.1f} | {cpu:.1f} | {values:,} |"
            )
        print(f"{count:,} clusters seeded in {seeded:.1f} s", flush=True)
        return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.history_sample", description=__doc__)
    parser.add_argument("--clusters", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--store-url", help="a store to seed (default: a new SQLite file)")
    args = parser.parse_args(argv)
    lines = [
        "| clusters | sample | wall ms, median | wall ms, best | CPU ms, median | values |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for count in args.clusters:
        lines += run(count, args.samples, args.store_url)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
