"""hub/api/coalesce.py: identical reads share one read, and never one that began before them.

Each read here is a coroutine the test releases by hand, recording when it began, so the
tests see which request was answered by which read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hub.api.coalesce import Coalescer


class Reads:
    """Reads that wait for the test to release them; each answers its own number."""

    def __init__(self) -> None:
        self.begun: list[asyncio.Event] = []
        self.release: list[asyncio.Event] = []
        self.errors: dict[int, Exception] = {}

    def read(self) -> Any:
        async def run() -> int:
            number = len(self.begun)
            begun, release = asyncio.Event(), asyncio.Event()
            self.begun.append(begun)
            self.release.append(release)
            begun.set()
            await release.wait()
            if number in self.errors:
                raise self.errors[number]
            return number

        return run

    async def wait_begun(self, count: int) -> None:
        while len(self.begun) < count:
            await asyncio.sleep(0)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_request_never_shares_a_read_that_began_before_it_arrived() -> None:
    async def scenario() -> None:
        coalescer: Coalescer[int] = Coalescer()
        reads = Reads()
        first = asyncio.create_task(coalescer.read("k", reads.read()))
        await reads.wait_begun(1)
        # Arrives while read 0 is in flight: it must wait for a read that begins later.
        second = asyncio.create_task(coalescer.read("k", reads.read()))
        await _settle()
        assert len(reads.begun) == 1, "no second read while the first is in flight"
        reads.release[0].set()
        assert await first == 0
        await reads.wait_begun(2)
        reads.release[1].set()
        assert await second == 1, "answered by the read that began after it arrived"

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_requests_arriving_during_a_read_share_the_next_one() -> None:
    async def scenario() -> None:
        coalescer: Coalescer[int] = Coalescer()
        reads = Reads()
        first = asyncio.create_task(coalescer.read("k", reads.read()))
        await reads.wait_begun(1)
        waiting = [asyncio.create_task(coalescer.read("k", reads.read())) for _ in range(5)]
        await _settle()
        reads.release[0].set()
        await reads.wait_begun(2)
        # Read 1 has begun: one arriving now waits for read 2.
        late = asyncio.create_task(coalescer.read("k", reads.read()))
        await _settle()
        reads.release[1].set()
        assert await first == 0
        assert [await w for w in waiting] == [1] * 5
        await reads.wait_begun(3)
        reads.release[2].set()
        assert await late == 2
        assert len(reads.begun) == 3
        assert coalescer.joined == 4  # five shared read 1: one began it, four joined

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_different_keys_do_not_wait_for_each_other() -> None:
    async def scenario() -> None:
        coalescer: Coalescer[int] = Coalescer()
        reads = Reads()
        first = asyncio.create_task(coalescer.read("a", reads.read()))
        await reads.wait_begun(1)
        other = asyncio.create_task(coalescer.read("b", reads.read()))
        await reads.wait_begun(2)  # began at once, read "a" still in flight
        reads.release[1].set()
        assert await other == 1
        reads.release[0].set()
        assert await first == 0

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_failed_read_fails_every_request_sharing_it_and_the_next_read_begins_afresh() -> None:
    async def scenario() -> None:
        coalescer: Coalescer[int] = Coalescer()
        reads = Reads()
        reads.errors[1] = RuntimeError("store unavailable")
        first = asyncio.create_task(coalescer.read("k", reads.read()))
        await reads.wait_begun(1)
        waiting = [asyncio.create_task(coalescer.read("k", reads.read())) for _ in range(3)]
        await _settle()
        reads.release[0].set()
        await reads.wait_begun(2)
        reads.release[1].set()
        assert await first == 0
        for w in waiting:
            with pytest.raises(RuntimeError, match="store unavailable"):
                await w
        after = asyncio.create_task(coalescer.read("k", reads.read()))
        await reads.wait_begun(3)
        reads.release[2].set()
        assert await after == 2

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_request_that_goes_away_does_not_end_the_read_others_wait_for() -> None:
    async def scenario() -> None:
        coalescer: Coalescer[int] = Coalescer()
        reads = Reads()
        first = asyncio.create_task(coalescer.read("k", reads.read()))
        await reads.wait_begun(1)
        gone = asyncio.create_task(coalescer.read("k", reads.read()))
        staying = asyncio.create_task(coalescer.read("k", reads.read()))
        await _settle()
        gone.cancel()  # its client closed the connection
        reads.release[0].set()
        await reads.wait_begun(2)
        reads.release[1].set()
        assert await first == 0
        assert await staying == 1
        assert gone.cancelled()

    asyncio.run(asyncio.wait_for(scenario(), 30))
