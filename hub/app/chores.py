"""The hub's periodic chores, each a task `hub.app.server.HubServer` starts and cancels: the
hub's heartbeat, tombstone and audit pruning, refusal summaries, rollout wave and failover
passes, and giving freed memory back to the system. Each waits, calls one service function
off the loop, and survives a store that is down for a while."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hub.errors import WingsmithError
from hub.service import access as access_service
from hub.service import failover as failover_service
from hub.service import rollouts as rollouts_service
from hub.service import sync as sync_service
from hub.service.context import ServiceContext
from hub.sync.episodes import FaultEpisode
from hub.sync.fanout import Fanout

log = logging.getLogger("wingsmith.hub")

MEMORY_TRIM_S = 60.0


async def prune_tombstones(ctx: ServiceContext, writer: ThreadPoolExecutor) -> None:
    while True:
        with contextlib.suppress(Exception):
            # A write: off the loop, in the writer thread (docs/stream.md).
            await asyncio.get_running_loop().run_in_executor(
                writer, sync_service.prune_tombstones, ctx
            )
        await asyncio.sleep(3600)


async def heartbeat(ctx: ServiceContext, fanout: Fanout) -> None:
    fault = FaultEpisode(log, "hub heartbeat")
    while True:
        await asyncio.sleep(ctx.settings.hub_heartbeat_s)
        try:
            alive = await asyncio.to_thread(sync_service.hub_heartbeat, ctx)
        except Exception as e:  # the database may be down for a while; beat again later
            fault.failed(e)
            continue
        fault.succeeded()
        if not alive:
            log.warning("this hub had been declared dead: closing its streams")
            for cluster_id in fanout.cluster_ids():
                for listener in fanout.listeners(cluster_id):
                    listener.supersede()


async def trim_memory() -> None:
    """Give the C allocator's freed memory back to the system every minute (glibc only).
    Request bodies up to 1 MiB, and what parsing them builds, are allocated and freed on
    the event loop; glibc keeps the freed pages of its heap for reuse, so RSS after a
    burst of large requests stayed tens of MiB above what is live (docs/operations.md
    "Memory after a fuzz"). malloc_trim returns them; it takes milliseconds."""
    trim = _malloc_trim()
    if trim is None:
        return
    while True:
        await asyncio.sleep(MEMORY_TRIM_S)
        await asyncio.to_thread(trim, 0)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None on another C library (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


async def refusal_summaries(ctx: ServiceContext, budget: access_service.RefusalBudget) -> None:
    """Each minute, the refusals not recorded one by one become summary records
    (docs/security.md "Refusals, bounded")."""
    while True:
        await asyncio.sleep(access_service.REFUSAL_WINDOW_S / 2)
        await asyncio.to_thread(access_service.flush_refusals, ctx, budget)


async def prune_audit(ctx: ServiceContext) -> None:
    """Audit records older than the retention go, at start and hourly after."""
    while True:
        try:
            pruned = await asyncio.to_thread(
                access_service.prune_audit,
                ctx,
                retention_s=ctx.settings.audit_retention_s,
            )
            if pruned:
                log.info("pruned %d audit records past the retention", pruned)
        except WingsmithError as e:
            log.warning("audit pruning failed: %s", e)
        await asyncio.sleep(3600)


async def rollout_waves(ctx: ServiceContext) -> None:
    """Rollouts in waves whose deadline passed pause; ones with room for a wave go on
    (observations ending a deployment's rollout decide at once; this catches time)."""
    fault = FaultEpisode(log, "rollout wave pass")
    while True:
        await asyncio.sleep(ctx.settings.rollout_sweep_s)
        try:
            await asyncio.to_thread(rollouts_service.sweep, ctx)
        except WingsmithError as e:  # the store may be down for a while: next pass
            fault.failed(e)
        else:
            fault.succeeded()


async def failovers(ctx: ServiceContext, interval_s: float) -> None:
    """Failover, failback and drain steps (hub/service/failover.py), about once a second:
    a read, and a write only when a workload's plan changes something."""
    fault = FaultEpisode(log, "failover step")
    while True:
        await asyncio.sleep(interval_s)
        try:
            await asyncio.to_thread(failover_service.tick, ctx)
        except Exception as e:  # a defect's first occurrence keeps its traceback
            fault.failed(e)
        else:
            fault.succeeded()
