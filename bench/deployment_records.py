"""The cost of a deployment record's form in the store: write, list and fan-out read of many
deployments, on SQLite and PostgreSQL, each beside the bare statement with no mapping.

    python -m bench.deployment_records [--deployments 20000] [--store sqlite,postgres]

What is measured, per deployment record: microseconds of this process's CPU (the hub's side:
the mapping, the driver and, on SQLite, the database engine; PostgreSQL's server runs in
processes of its own). CPU time rather than wall time because on a shared machine the wall
time of a run swings by 2x with the neighbours' load; the CPU time barely does.
- save: hub.store.deployments.save of every record in transactions of 500 (the write path of
  placement and admission: each save also bumps its cluster's revision);
- list: hub.store.deployments.list_page over every record in pages of 500 (the control API's
  list path: rows read and mapped to `hub.model.Deployment`);
- delta: hub.store.deployments.changed_since_each from revision 0 for every cluster (the
  desired-state fan-out's read);
- bare: the list's SELECT fetched with no mapping to the model (what the database and the
  driver cost; list minus bare is the record mapping's share).

It uses only the store's functions (no schema of its own), so the same file measures an older
tree: `PYTHONPATH=<old checkout> python bench/deployment_records.py` (docs/benchmark.md gives the
figures before and after a Deployment's non-queried fields moved into one JSON column).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import tempfile
import time
from collections.abc import Callable

from hub import filters, serving
from hub.model import Deployment, Placement, Serving, Workload
from hub.store import clusters, deployments, workloads
from hub.store.port import Store, open_store
from tools.pgserver import PgServer

CLUSTERS = 100
PAGE = 500
BATCH = 500


def _template() -> Deployment:
    config = serving.normalize(
        Serving(engine="vllm", engine_version="0.11.0", model="meta-llama/Llama-3.1-8B")
    )
    return Deployment(
        deployment_id="",
        workload_id="",
        workload_name="",
        project="search",
        cluster_id="",
        desired_replicas=2,
        admitted_replicas=2,
        admission_reason="",
        admission_message="",
        generation=3,
        authority="managed",
        enabled=True,
        engine_args=("--max-model-len", "8192"),
        imported_args=(),
        serving=config,
        serving_digest=serving.digest(config),
        device_class="H100-80GB",
        devices_per_replica=1,
        revision=0,
        create_time=1_700_000_000.5,
        update_time=1_700_000_100.25,
        pending_since=1_700_000_000.5,
    )


def _records(count: int) -> tuple[list[Workload], list[Deployment]]:
    """`count` deployments: workloads placed on every one of CLUSTERS clusters."""
    template = _template()
    loads = [
        Workload(
            workload_id=f"wl_{w:016x}",
            name=f"chat{w}",
            project="search",
            replicas=2 * CLUSTERS,
            device_class="H100-80GB",
            serving=template.serving,
            placement=Placement(clusters=()),
            create_time=1.0,
            update_time=1.0,
        )
        for w in range((count + CLUSTERS - 1) // CLUSTERS)
    ]
    records = [
        dataclasses.replace(
            template,
            deployment_id=f"dep_{i:016x}",
            workload_id=loads[i // CLUSTERS].workload_id,
            workload_name=loads[i // CLUSTERS].name,
            cluster_id=f"c{i % CLUSTERS:03d}",
            # Each its own times, as placed one by one: no two stored records alike.
            create_time=template.create_time + i,
            update_time=template.update_time + i,
        )
        for i in range(count)
    ]
    return loads, records


def _timed(action: Callable[[], object]) -> float:
    began = time.process_time()
    action()
    return time.process_time() - began


def measure(db: Store, count: int) -> dict[str, float]:
    """Microseconds per record of each path (save, list, delta, bare)."""
    loads, records = _records(count)
    with db.write() as conn:
        conn.execute(
            "INSERT INTO projects (name, create_time, update_time) VALUES ('search', 1, 1)"
        )
        for c in range(CLUSTERS):
            clusters.insert(conn, cluster_id=f"c{c:03d}", labels={}, token_hash=f"h{c}", now=1.0)
        for load in loads:
            workloads.insert(conn, load)

    def save() -> None:
        for start in range(0, count, BATCH):
            with db.write() as conn:
                for record in records[start : start + BATCH]:
                    deployments.save(conn, record)

    def listed() -> None:
        after, seen = "", 0
        with db.read() as conn:
            while page := deployments.list_page(
                conn, where=filters.DeploymentFilter(), after=after, limit=PAGE
            ):
                after, seen = page[-1].deployment_id, seen + len(page)
        assert seen == count, (seen, count)

    def delta() -> None:
        with db.read() as conn:
            found = deployments.changed_since_each(
                conn, [(f"c{c:03d}", 0) for c in range(CLUSTERS)]
            )
        assert sum(len(v) for v in found.values()) == count

    def bare() -> None:
        after, seen = "", 0
        with db.read() as conn:
            while rows := conn.execute(
                "SELECT d.*, w.name AS workload_name, w.placement AS workload_placement"
                " FROM deployments d JOIN workloads w ON w.workload_id = d.workload_id"
                " WHERE d.deployment_id > ? ORDER BY d.deployment_id LIMIT ?",
                (after, PAGE),
            ).fetchall():
                after, seen = rows[-1]["deployment_id"], seen + len(rows)
        assert seen == count

    figures = {"save": _timed(save)}
    listed()  # warm the caches (parsed serving texts) as a running hub has them
    for name, action in (("list", listed), ("delta", delta), ("bare", bare)):
        figures[name] = min(_timed(action) for _ in range(5))
    return {name: seconds / count * 1e6 for name, seconds in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deployments", type=int, default=20_000)
    parser.add_argument("--store", default="sqlite,postgres")
    args = parser.parse_args()
    print(
        f"{args.deployments} deployment records on {CLUSTERS} clusters;"
        " CPU us per record of this process"
    )
    print(f"{'store':<11} {'save':>8} {'list':>8} {'delta':>8} {'bare':>8} {'list/bare':>10}")
    with tempfile.TemporaryDirectory() as scratch:
        for backend in args.store.split(","):
            if backend == "sqlite":
                db = open_store(str(pathlib.Path(scratch) / "bench.db"))
                figures = measure(db, args.deployments)
                db.close()
            else:
                with PgServer.start() as server:
                    db = open_store(server.create_database("deployment_records"))
                    figures = measure(db, args.deployments)
                    db.close()
            print(
                f"{backend:<11} {figures['save']:>8.1f} {figures['list']:>8.1f}"
                f" {figures['delta']:>8.1f} {figures['bare']:>8.1f}"
                f" {figures['list'] / figures['bare']:>10.2f}"
            )


if __name__ == "__main__":
    main()
