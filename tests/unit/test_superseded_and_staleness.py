"""The superseded agent's slow backoff, and the hub's staleness watch (both pure enough to
drive by hand)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from agent.sync.client import superseded_backoff
from hub.sync.liveness import ReporterWatch, StalenessWatch


def test_a_superseded_agent_waits_seconds_then_minutes() -> None:
    backoff = superseded_backoff()
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays[0] >= 2.5, "never straight back"
    assert all(b >= a / 2 for a, b in itertools.pairwise(delays))
    assert 60.0 <= delays[-1] <= 120.0


class Changes:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, ids: Sequence[str]) -> None:
        self.calls.append(list(ids))


def test_the_watch_reports_clusters_going_stale_and_coming_back_once_each() -> None:
    stale: set[str] = {"lab"}
    changes = Changes()
    watch = StalenessWatch(stale_now=lambda: set(stale), changed=changes)
    assert watch.tick() == ["lab"], "stale since before a restart: re-evaluated at once"
    assert watch.tick() == []
    stale.add("east")
    assert watch.tick() == ["east"]
    stale.discard("lab")
    assert watch.tick() == ["lab"]
    assert watch.tick() == []
    assert changes.calls == [["lab"], ["east"], ["lab"]]


def test_a_failed_report_is_retried_on_the_next_tick() -> None:
    calls: list[list[str]] = []

    def flaky(ids: Sequence[str]) -> None:
        calls.append(list(ids))
        if len(calls) == 1:
            raise RuntimeError("database is locked")

    watch = StalenessWatch(stale_now=lambda: {"east"}, changed=flaky)
    with pytest.raises(RuntimeError):
        watch.tick()
    assert watch.tick() == ["east"]
    assert calls == [["east"], ["east"]]


def test_a_node_is_dropped_only_after_a_whole_grace_period_without_a_reporter() -> None:
    now = [100.0]
    unreported: set[tuple[str, str]] = {("east", "n1")}
    dropped: list[list[tuple[str, str]]] = []
    watch = ReporterWatch(
        unreported=lambda: set(unreported),
        drop=lambda nodes: dropped.append(list(nodes)),
        clock=lambda: now[0],
        grace_s=30.0,
    )
    assert watch.tick() == []  # first seen without a reporter: the grace period starts
    now[0] += 20
    unreported.add(("east", "n2"))
    assert watch.tick() == []
    now[0] += 10
    assert watch.tick() == [("east", "n1")]  # n2 has 20 s to go
    unreported.discard(("east", "n2"))  # its agent came back: it starts afresh next time
    now[0] += 25
    assert watch.tick() == []
    unreported.add(("east", "n2"))
    now[0] += 25
    assert watch.tick() == []
    assert dropped == [[("east", "n1")]]
