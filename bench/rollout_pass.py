"""`python -m bench.rollout_pass`: the cost of the periodic rollout-wave pass (issue 12).

Every second the hub asks each rollout in waves whether it has work (a deadline passed, room
for a wave). That reads the rollout's deployments: four columns each
(`deployments.rollout_rows`), where reading whole deployments (`deployments.of_workload`,
the baseline, measured in the same run) costs far more. A SQLite store with one workload
over N clusters (1,000 by default) rolling out in waves; best of 5 per read.

    python -m bench.rollout_pass
    python -m bench.rollout_pass --clusters 5000
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from hub.model import Placement, RolloutPolicy, Serving
from hub.service import clusters, projects, rollouts, workloads
from hub.service.context import ServiceContext, snapshot
from hub.store import deployments
from hub.store.port import open_store


def best_ms(read: Callable[[], Any], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rollout_pass")
    parser.add_argument("--clusters", type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ServiceContext(db=open_store(str(pathlib.Path(tmp) / "hub.db")))
        projects.create(ctx, name="search", quotas={})
        for i in range(args.clusters):
            clusters.create(ctx, cluster_id=f"c{i:05d}", labels={"tier": "gold"})
        workloads.create(
            ctx,
            workloads.WorkloadSpec(
                name="chat",
                project="search",
                replicas=args.clusters,
                device_class="H100-80GB",
                serving=Serving(engine="vllm", engine_version="0.11.0", model="m"),
                placement=Placement(cluster_selector={"tier": "gold"}),
                rollout_policy=RolloutPolicy(max_clusters_in_flight=1),
            ),
        )
        change = Serving(engine="vllm", engine_version="0.11.1", model="m")
        workloads.update(ctx, "chat", workloads.WorkloadChange(serving=change))
        workload_id = workloads.spec(ctx, "chat").workload_id
        with snapshot(ctx) as conn:
            whole = best_ms(lambda: deployments.of_workload(conn, workload_id))
            narrow = best_ms(lambda: deployments.rollout_rows(conn, workload_id))
        start = time.perf_counter()
        rollouts.sweep(ctx)
        pass_ms = (time.perf_counter() - start) * 1000
    print(f"one rollout in waves over {args.clusters} clusters (SQLite, best of 5)")
    print(f"  whole deployments (baseline)  {whole:8.2f} ms")
    print(f"  four columns (the pass)       {narrow:8.2f} ms")
    print(f"  baseline/pass: {whole / narrow:.1f}x")
    print(f"  one periodic pass that hands out a wave: {pass_ms:.1f} ms")


if __name__ == "__main__":
    main()
