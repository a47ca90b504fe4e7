"""`wingsmith demo`: the whole system on a laptop, on the embedded defaults.

One process runs a real hub (SQLite under ./wingsmith-demo/) and three real agents on
simulated clusters of different sizes, talking over real gRPC streams on 127.0.0.1. It
registers the clusters, creates two projects and three workloads through the control API's
own service calls, and shows a live view until:
- llama-70b runs (its replicas spread over east and west),
- mixtral-8x22b waits on insufficient_quota (its project has 4 H100s, one replica needs 8:
  not even part of it fits, so it waits whole),
- qwen-72b waits on insufficient_capacity (it needs 8 A100s, the lab cluster has 4).
Then three stories play out:
- a rollout: llama-70b moves to engine 0.11.1; live_digests shows both digests while old
  and new run side by side, then one;
- an adoption: the lab cluster already runs legacy-mistral, a DGD nobody declared. It shows
  under /v1/discovered, is promoted to a workload of project research (authority observed),
  reviewed, its imported args accepted as engine_args, and taken under management with no pod
  restarted;
- a failover: west's agent stops; once west is stale past llama-70b's failover toleration, its
  replica there stands in on east (nothing is deleted on west); the agent comes back, and
  after the stabilization window the stand-in goes (failback).
Then it shows the settled view again (the three outcomes still hold, legacy-mistral runs
beside them), prints how to poke it with curl, grpcurl and the CLI (commands that work in a
new shell: `shell_tools`), and keeps running (printing the lines of the view that change, so
the commands stay on screen) until Ctrl-C, which stops agents and hub cleanly. With --once it
stops at the settled view instead, and says so: no commands for a hub that is going away.

This module may import both the hub and the agent: it is wiring, like hub/app/.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc

from cli.demo import fleet, hints, stories, view
from hub.app import HubConfig, HubServer
from hub.service.context import Settings


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wingsmith demo", description="Run a hub and three simulated clusters."
    )
    parser.add_argument("--dir", default="wingsmith-demo", help="where the demo keeps its data")
    parser.add_argument("--grpc-listen", default="127.0.0.1:50051")
    parser.add_argument("--http-listen", default="127.0.0.1:8080")
    parser.add_argument("--ready-after", default="2s", help="simulated pod start-up time")
    parser.add_argument(
        "--once", action="store_true", help="exit 0 once the three outcomes are reached"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="with --once: give up after")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        code = asyncio.run(run(args))
    except KeyboardInterrupt:
        code = 0
    raise SystemExit(code)


async def run(args: argparse.Namespace) -> int:
    data = Path(args.dir)
    shutil.rmtree(data, ignore_errors=True)  # every demo starts from a clean slate
    data.mkdir(parents=True)
    hub = HubServer(
        HubConfig(
            db_path=str(data / "hub.db"),
            grpc_listen=args.grpc_listen,
            http_listen=args.http_listen,
            # A short grace period: the failover story waits it out once.
            settings=Settings(heartbeat_interval_s=2.0, stale_after_s=8.0),
        )
    )
    try:
        await hub.start()
    except (OSError, RuntimeError) as e:
        print(f"error: cannot listen ({e}); pick free ports with --grpc-listen/--http-listen")
        return 1
    assert hub.ctx is not None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    channels: list[grpc.aio.Channel] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        agents = fleet.start_agents(hub, args.ready_after, channels)
        tasks = [asyncio.create_task(agent.run()) for agent in agents]
        # As an operator would: clusters report their devices before users place workloads.
        await fleet.until_reported(hub.ctx, stop)
        fleet.declare(hub.ctx)
        deadline = loop.time() + args.timeout
        if (
            await view.watch(
                hub.ctx, stop, until=view.settled, deadline=deadline if args.once else None
            )
            is None
        ):
            return 0 if stop.is_set() else _timed_out()
        lab = next(a for a in agents if a.config.cluster_id == "lab")
        for story in (stories.rollout_story, stories.adoption_story):
            if not await story(hub.ctx, stop, lab=lab, deadline=deadline if args.once else None):
                return 0 if stop.is_set() else _timed_out()

        def restart(cluster_id: str) -> None:
            """Stop the cluster's agent and start a new one (with the same token): the
            cluster goes quiet, then reports again."""
            index = next(i for i, a in enumerate(agents) if a.config.cluster_id == cluster_id)
            tasks[index].cancel()
            tasks.append(tasks[index])  # awaited on the way out with the others
            agents[index] = fleet.new_agent(hub, agents[index].config, args.ready_after, channels)

        def resume(cluster_id: str) -> None:
            index = next(i for i, a in enumerate(agents) if a.config.cluster_id == cluster_id)
            tasks[index] = asyncio.create_task(agents[index].run())

        if not await stories.failover_story(
            hub.ctx,
            stop,
            stop_agent=restart,
            start_agent=resume,
            deadline=deadline if args.once else None,
        ):
            return 0 if stop.is_set() else _timed_out()
        # The view the demo keeps running with: the three outcomes still hold after the
        # stories, with legacy-mistral running beside them.
        print("\n== settled ==", flush=True)
        shown = await view.watch(
            hub.ctx,
            stop,
            until=view.settled_after_stories,
            deadline=deadline if args.once else None,
        )
        if shown is None:
            return 0 if stop.is_set() else _timed_out()
        if args.once:
            # The hub and agents stop as soon as this returns: nothing here is left to poke.
            print(hints.ONCE_DONE, flush=True)
            return 0
        print(hints.how_to_poke(hub), flush=True)
        # From here, only the lines that change: a whole table on every change would scroll
        # the commands above out of view while someone is copying them.
        await view.watch(
            hub.ctx, stop, until=lambda _: False, deadline=None, shown=shown, changes_only=True
        )
        return 0
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
        await hub.stop()
        print("\nstopped: hub and agents shut down cleanly.")


def _timed_out() -> int:
    print("error: the demo did not settle in time", file=sys.stderr)
    return 1
