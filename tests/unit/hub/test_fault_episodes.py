"""A fault is told once when it starts, summarized while it lasts, and told when it clears."""

from __future__ import annotations

import logging

import pytest

from hub import errors
from hub.sync.episodes import FaultEpisode


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_fault_each_second_for_three_minutes_is_told_four_times(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    episode = FaultEpisode(logging.getLogger("t"), "liveness flush", clock=clock)
    full = errors.StoreCannotWrite("the store cannot write: the disk is full")
    with caplog.at_level(logging.WARNING, logger="t"):
        for _ in range(180):
            episode.failed(full)
            clock.now += 1
        episode.succeeded()
        episode.succeeded()  # nothing more to tell
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 + 2 + 1, lines  # start, two summaries (at 60 s and 120 s), end
    assert lines[0].startswith("liveness flush failed: the store cannot write: the disk is full")
    assert lines[1].startswith("liveness flush still failing: 61 attempts failed over 60 s")
    assert lines[-1].startswith("liveness flush works again after 180 failed attempts over 180 s")
    assert not any(r.exc_info for r in caplog.records), "a storage fault has no traceback"


def test_a_defect_keeps_its_traceback_once(caplog: pytest.LogCaptureFixture) -> None:
    episode = FaultEpisode(logging.getLogger("t"), "staleness check", clock=Clock())
    with caplog.at_level(logging.WARNING, logger="t"):
        for _ in range(5):
            episode.failed(KeyError("x"))
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is not None
