"""The dashboard's chart history (hub/ui/history.py) kept in a real store (both backends):
bounded, retained, aligned per class, one point per bucket however many hubs sample it, and
read back by a new History (a restarted hub) from the same store."""

from __future__ import annotations

import asyncio
from typing import Any

from hub.service.context import ServiceContext
from hub.service.history import ChartHistory
from hub.store.port import open_store
from hub.ui.history import History


class Fleet:
    """What ListClusters and ListProjects answer, changed by the test between samples."""

    def __init__(self) -> None:
        self.allocated = 0
        self.classes = ["H100-80GB"]

    async def list(self, kind: str) -> list[dict[str, Any]]:
        if kind == "clusters":
            devices = {
                c: {"allocated": self.allocated, "reserved": 1, "free": 2, "unusable": 0}
                for c in self.classes
            }
            return [{"cluster_id": "east", "devices": devices}]
        usage = {"H100-80GB": {"used": self.allocated, "reserved": 0}}
        return [{"name": "search", "quotas": {"H100-80GB": 16}, "usage": usage}]


def keeper(store_url: str) -> ChartHistory:
    return ChartHistory(ServiceContext(db=open_store(store_url)))


def rows(store_url: str) -> int:
    with open_store(store_url).read() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM dashboard_history").fetchone()[0])


def test_samples_are_bounded_retained_and_aligned(store_url: str) -> None:
    now = [1000.0]
    fleet = Fleet()
    history = History(
        fleet.list, keeper(store_url), interval_s=10, retention_s=30, clock=lambda: now[0]
    )

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
    fleet = Fleet()

    def hub() -> History:
        return History(
            fleet.list, keeper(store_url), interval_s=10, retention_s=300, clock=lambda: now[0]
        )

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
