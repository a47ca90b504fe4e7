"""The dashboard's chart history (hub/ui/history.py): bounded, retained, aligned per class."""

from __future__ import annotations

import asyncio
from typing import Any

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


def test_samples_are_bounded_retained_and_aligned() -> None:
    now = [1000.0]
    fleet = Fleet()
    history = History(fleet.list, interval_s=10, retention_s=30, clock=lambda: now[0])

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
    now[0] += 25  # older samples fall out of the retention on read
    chart = asyncio.run(history.chart("project", "search"))
    assert chart is not None
    quota = {(s["class"], s["field"]): s["values"] for s in chart["series"]}
    assert quota[("H100-80GB", "quota")][-1] == 16
    assert asyncio.run(history.chart("cluster", "nowhere")) is None
