"""The dashboard's chart history (hub/ui/history.py) kept in a real store (both backends):
bounded, retained, aligned per class, one point per bucket however many hubs sample it, and
read back by a new History (a restarted hub) from the same store. A sample reads the figures
the charts draw from the store's aggregates (hub/service/history.py `figures`): the same
numbers ListClusters and ListProjects answer, read and kept in a worker thread, never on the
event loop, and none taken at start."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from typing import Any

from hub.api import convert, jsonmap
from hub.model import AllocationObservation, Device, NodeObservation, ObservationBatch
from hub.service import clusters, history, ingest, projects, sync, workloads
from hub.service.context import ServiceContext
from hub.service.history import ChartHistory, Value
from hub.store.port import open_store
from hub.ui.history import History
from tests.harness import wait_until
from tests.unit.hub.test_reasons_true_now import H100, spec
from wingsmith.v1 import control_pb2 as pb


class Fleet(ChartHistory):
    """The store's keeper with figures the test changes between samples."""

    def __init__(self, store_url: str) -> None:
        super().__init__(ServiceContext(db=open_store(store_url)))
        self.allocated = 0
        self.classes = ["H100-80GB"]

    def figures(self) -> list[Value]:
        values: list[Value] = []
        for c in self.classes:
            counts = {"allocated": self.allocated, "reserved": 1, "free": 2, "unusable": 0}
            values += [("cluster", "east", c, f, n) for f, n in counts.items()]
        usage = {"used": self.allocated, "reserved": 0, "quota": 16}
        return values + [("project", "search", "H100-80GB", f, n) for f, n in usage.items()]


def rows(store_url: str) -> int:
    with open_store(store_url).read() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM dashboard_history").fetchone()[0])


def test_samples_are_bounded_retained_and_aligned(store_url: str) -> None:
    now = [1000.0]
    fleet = Fleet(store_url)
    history = History(fleet, interval_s=10, retention_s=30, clock=lambda: now[0])

    async def run() -> dict[str, Any] | None:
        for step in range(10):
            fleet.allocated = step
            if step == 8:
                fleet.classes.append("A100-40GB")  # a class appears: zeros before it
            await history.sample()
            now[0] += 10
        now[0] -= 10
        return await history.chart("cluster", "east")

    chart = asyncio.run(run())
    assert chart is not None
    # Ring of retention / interval + 1 = 4 samples; all within the last 30 s.
    assert chart["times"] == [1060.0, 1070.0, 1080.0, 1090.0]
    by = {(s["class"], s["field"]): s["values"] for s in chart["series"]}
    assert by[("H100-80GB", "allocated")] == [6, 7, 8, 9]
    assert by[("A100-40GB", "allocated")] == [0, 0, 8, 9]
    assert all(len(v) == 4 for v in by.values())
    # Bounded in the store too: what is older than the retention was deleted at each sample
    # (the buckets 1060..1090, 4 cluster fields of 2 classes at the last two, 3 project ones).
    assert rows(store_url) == 4 * (4 + 3) + 2 * 4
    now[0] += 25  # older samples fall out of the retention on read
    chart = asyncio.run(history.chart("project", "search"))
    assert chart is not None
    quota = {(s["class"], s["field"]): s["values"] for s in chart["series"]}
    assert quota[("H100-80GB", "quota")][-1] == 16
    assert asyncio.run(history.chart("cluster", "nowhere")) is None


def test_a_restarted_hub_and_a_second_hub_share_the_points_one_per_bucket(
    store_url: str,
) -> None:
    now = [1000.0]
    fleet = Fleet(store_url)

    def hub() -> History:
        return History(fleet, interval_s=10, retention_s=300, clock=lambda: now[0])

    first, second = hub(), hub()

    async def sample_both() -> None:
        for step in range(3):
            fleet.allocated = step
            await first.sample()
            now[0] += 4  # the second hub samples a little later, in the same 10 s bucket
            await second.sample()
            now[0] += 6

    asyncio.run(sample_both())
    restarted = hub()  # a new process on the same store: nothing sampled by it yet
    chart = asyncio.run(restarted.chart("cluster", "east"))
    assert chart is not None
    # The earlier points, once per bucket (two hubs sampled each), then the restarted hub's
    # own first sample (a chart asked after 2 s samples first).
    assert chart["times"] == [1000.0, 1010.0, 1020.0, 1030.0]
    by = {(s["class"], s["field"]): s["values"] for s in chart["series"]}
    assert by[("H100-80GB", "allocated")] == [0, 1, 2, 2]


# -- what a sample reads, and where -----------------------------------------------------------


def listed(ctx: ServiceContext) -> list[Value]:
    """The figures as the sampler took them before (issue 23): ListClusters and ListProjects
    as the API answers them (views, the API's converter, its JSON), each cluster's devices and
    each project's quotas and usage per class."""
    cluster_views, _ = clusters.list_page(ctx, page_size=500, page_token="")
    project_views, _ = projects.list_page(ctx, page_size=500, page_token="")
    listed_clusters = jsonmap.to_json(
        pb.ListClustersResponse(clusters=[convert.cluster(v) for v in cluster_views])
    )["clusters"]
    listed_projects = jsonmap.to_json(
        pb.ListProjectsResponse(projects=[convert.project(v) for v in project_views])
    )["projects"]
    values: list[Value] = []
    for c in listed_clusters:
        for name, d in (c.get("devices") or {}).items():
            values += [
                ("cluster", c["cluster_id"], name, f, int(d.get(f) or 0))
                for f in history.CLUSTER_FIELDS
            ]
    for p in listed_projects:
        quotas, usage = p.get("quotas") or {}, p.get("usage") or {}
        for name in set(quotas) | set(usage):
            used = usage.get(name) or {}
            values += [
                ("project", p["name"], name, "used", int(used.get("used") or 0)),
                ("project", p["name"], name, "reserved", int(used.get("reserved") or 0)),
                ("project", p["name"], name, "quota", int(quotas.get(name) or 0)),
            ]
    return values


RES = "nvidia.com/gpu"


def gpus(cluster_id: str, n: int) -> list[Device]:
    return [
        Device(f"{cluster_id}-{i}", "H100", 80, f"0:{i}", H100, True, "", True) for i in range(n)
    ]


def report(
    ctx: ServiceContext, cluster_id: str, devices: list[Device], *pods: AllocationObservation
) -> None:
    """What an agent's node report does: its devices and their pods in, the cluster seen."""
    node = NodeObservation("n1", time.time_ns(), tuple(devices), pods)
    sync.record_liveness(ctx, last_seen={cluster_id: ctx.clock()}, applied={})
    assert not ingest.ingest(
        ctx, [(cluster_id, ObservationBatch(seq=1, nodes=(node,)))]
    ).device_refusals


def test_a_sample_has_the_figures_list_clusters_and_list_projects_answer(
    store_url: str,
) -> None:
    ctx = ServiceContext(db=open_store(store_url))
    projects.create(ctx, name="search", quotas={H100: 64, "A100-40GB": 8})
    projects.create(ctx, name="idle", quotas={})  # no class: nothing to chart
    projects.create(ctx, name="ads", quotas={H100: 4})
    clusters.create(ctx, cluster_id="east", labels={})
    report(ctx, "east", gpus("east", 8))
    clusters.create(ctx, cluster_id="never", labels={})  # never heard from: no device count
    clusters.create(ctx, cluster_id="west", labels={})
    # West: two devices held by a pod of its own, one unhealthy.
    west = gpus("west", 8)
    west[7] = dataclasses.replace(west[7], healthy=False, health_reason="Xid 79")
    report(ctx, "west", west, AllocationObservation("other", "default", ("west-0", "west-1"), RES))
    workloads.create(ctx, spec("chat", replicas=1, cluster="east"))  # 4 devices in reserve
    workloads.create(ctx, spec("big", replicas=4, cluster="west"))  # waits past the room
    workloads.create(ctx, spec("far", replicas=1, cluster="never"))  # demand, no devices

    sampled = history.figures(ctx)
    assert sorted(sampled) == sorted(listed(ctx))
    by = {(kind, name, cls, f): n for kind, name, cls, f, n in sampled}
    assert by[("cluster", "west", H100, "allocated")] == 2
    assert by[("cluster", "west", H100, "unusable")] == 1
    assert by[("cluster", "east", H100, "reserved")] == 4
    assert by[("project", "search", "A100-40GB", "quota")] == 8
    assert not [k for k in by if k[1] in ("never", "idle")]


class Recorded(ChartHistory):
    """The store's keeper, noting the thread each sample's read ran in."""

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)
        self.threads: list[tuple[int, bool]] = []

    def figures(self) -> list[Value]:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        self.threads.append((threading.get_ident(), on_loop))
        return super().figures()


def test_a_sample_is_read_and_kept_off_the_event_loop(store_url: str) -> None:
    ctx = ServiceContext(db=open_store(store_url))
    projects.create(ctx, name="search", quotas={H100: 8})
    keeper = Recorded(ctx)
    history_ = History(keeper, interval_s=3600)

    async def run() -> tuple[int, dict[str, Any] | None, bytes | None]:
        await history_.sample()
        chart = await history_.chart("project", "search")
        return threading.get_ident(), chart, await history_.chart_json("project", "search")

    loop_thread, chart, body = asyncio.run(run())
    assert chart is not None and chart["series"], "sampled and kept"
    assert body is not None and json.loads(body) == chart, "the JSON a page fetches"
    assert keeper.threads and all(
        ident != loop_thread and not on_loop for ident, on_loop in keeper.threads
    ), keeper.threads


def test_no_sample_at_start_the_first_one_interval_later(store_url: str) -> None:
    ctx = ServiceContext(db=open_store(store_url))
    keeper = Recorded(ctx)

    async def started(interval_s: float) -> int:
        history_ = History(keeper, interval_s=interval_s)
        async with history_.running():
            for _ in range(20):  # the sampler's task has run its first steps
                await asyncio.sleep(0)
            return len(keeper.threads)

    assert asyncio.run(started(3600)) == 0, "a sample at start"

    async def later() -> int:
        history_ = History(keeper, interval_s=0.05)
        async with history_.running():
            await asyncio.to_thread(wait_until, lambda: keeper.threads, what="a sample")
        return len(keeper.threads)

    assert asyncio.run(later()) >= 1
