"""`python -m bench`: how far one hub goes on this machine (docs/benchmark.md).

    python -m bench                  quick: 200 agents, about a minute
    python -m bench --full           2,000 and 10,000 agents (long: see docs/benchmark.md)
    python -m bench --agents 20      one size of your choice (the CI smoke run)
    python -m bench --json out.json  also write the figures as JSON
    python -m bench --compare bench/recorded/quick-200.json
                                     run the recorded file's sizes and print every figure
                                     that moved by more than 20% (exit 3 if one got worse)
    python -m bench --compare OLD.json --against NEW.json
                                     compare two figures files without running anything
    python -m bench --store postgres --hubs 2
                                     SQLite with one hub, PostgreSQL with one and with 2 hubs,
                                     in one run (quick: 50 agents), beside the bare upserts

Prints progress on stderr, then the table and the JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from bench import compare, report, store_ingest
from bench.report import SizeResult
from bench.scenarios import Plan, run_size

QUICK = (200,)
# `--store postgres` runs every size three times (and the machine also runs the database).
QUICK_STORES = (50,)
SKIPPABLE = ("idle", "fanout_one", "fanout_all", "ingest", "admission", "reconnect", "baselines")
FULL = (2_000, 10_000)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Fleet benchmark: one hub, many simulated agents."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="200 agents (the default)")
    mode.add_argument("--full", action="store_true", help="2,000 and 10,000 agents")
    mode.add_argument("--agents", type=int, nargs="+", metavar="N", help="run these sizes instead")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--compare",
        metavar="FILE",
        help="compare this run with recorded figures (bench/recorded/*.json): print every"
        " figure that moved by more than --threshold, by its ratio to the bare baseline where"
        " it has one; exit 3 if one got worse. Without --agents/--full: the file's sizes",
    )
    parser.add_argument(
        "--against",
        metavar="FILE",
        help="with --compare: compare with this figures file instead of running",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=compare.DEFAULT_THRESHOLD,
        help="with --compare: the relative move worth printing (default 0.2: 20%%)",
    )
    parser.add_argument(
        "--store",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="postgres: run each size on SQLite with one hub, then on a throwaway PostgreSQL"
        " with one hub and with --hubs hubs, and print them side by side",
    )
    parser.add_argument(
        "--hubs",
        type=int,
        default=None,
        help="hubs on PostgreSQL beside the one-hub run (with --store postgres; default 2)",
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="load-generator processes (default: by size)"
    )
    parser.add_argument(
        "--agents-per-channel",
        type=int,
        default=100,
        help="agents sharing one grpc.aio channel (one HTTP/2 connection)",
    )
    parser.add_argument(
        "--samples", type=int, default=0, help="single-workload fan-out samples (default: by size)"
    )
    parser.add_argument(
        "--rounds", type=int, default=0, help="fleet-wide fan-out rounds (default: by size)"
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="keep the hub's database and log in DIR (default: a temp dir)"
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record the hub with py-spy, one profile per phase, into DIR",
    )
    parser.add_argument(
        "--profile-format",
        choices=["flamegraph", "raw", "speedscope"],
        default="flamegraph",
        help="py-spy output format (raw: collapsed stacks)",
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=SKIPPABLE,
        metavar="PHASE",
        help=f"leave phases out: {', '.join(SKIPPABLE)}",
    )
    parser.add_argument("--wave-agents", type=int, default=256, help=argparse.SUPPRESS)
    parser.add_argument("--waves-in-flight", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.against and not args.compare:
        parser.error("--against needs --compare FILE (the recorded figures to compare with)")
    if not 0 < args.threshold < 10:
        parser.error(f"--threshold is a fraction such as 0.2 (20%), got {args.threshold}")
    if args.hubs is not None and args.store != "postgres":
        parser.error("--hubs needs --store postgres (several hubs share one PostgreSQL database)")
    args.hubs = 2 if args.hubs is None else args.hubs
    if args.hubs < 1:
        parser.error(f"--hubs must be at least 1, got {args.hubs}")
    return args


def plan_for(agents: int, args: argparse.Namespace) -> Plan:
    """Defaults by size: small runs take fewer samples so the smoke run stays short."""
    plan = Plan(
        agents=agents,
        workers=args.workers or (2 if agents <= 5_000 else 4),
        agents_per_channel=args.agents_per_channel,
        single_samples=args.samples or min(100, max(10, agents // 2)),
        fleet_rounds=args.rounds or (2 if agents < 100 or agents > 2_000 else 3),
        ingest_records=300_000 if agents >= 100 else 60_000,
        idle_window_s=5.0 if agents >= 100 else 1.0,
        wave_agents=args.wave_agents,
        waves_in_flight=args.waves_in_flight,
        skip=frozenset(args.skip),
    )
    if agents < 100:
        plan = replace(plan, ready_after_s=0.2, quiet_s=0.3)
    return plan


async def main_async(args: argparse.Namespace) -> int:
    recorded = compare.load(args.compare) if args.compare else None
    if recorded is not None and args.against:
        return print_comparison(args, recorded, compare.load(args.against))
    quick = QUICK_STORES if args.store == "postgres" else QUICK
    sizes = tuple(args.agents) if args.agents else (FULL if args.full else quick)
    if recorded is not None and not (args.agents or args.full):
        sizes = tuple(compare.sizes_of(recorded))
    log = (lambda _: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    root = pathlib.Path(args.keep) if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="bench-"))
    results: list[SizeResult] = []
    comparisons: list[str] = []
    bare_rates: dict[int, dict[str, float]] = {}
    started = time.monotonic()
    # The machine's load when the run began and ended (1-minute averages): a figure measured
    # beside other work reads differently from one measured on a quiet machine.
    load_before = os.getloadavg()[0]
    profile = pathlib.Path(args.profile) if args.profile else None
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
    try:
        for agents in sizes:
            plan = plan_for(agents, args)
            if args.store == "postgres":
                runs, bare = await compare_stores(plan, args.hubs, root / f"agents-{agents}", log)
                results += runs
                bare_rates[agents] = bare
                comparisons.append(report.store_table(runs, bare))
                continue
            results.append(
                await run_size(
                    plan,
                    root / f"agents-{agents}",
                    log=log,
                    profile_dir=profile,
                    profile_format=args.profile_format,
                )
            )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    meta = {
        "command": " ".join(["python -m bench", *sys.argv[1:]]),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "wall_s": time.monotonic() - started,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    data = report.as_json(results, meta)
    if bare_rates:
        data["bare_store_upserts"] = {str(n): rates for n, rates in bare_rates.items()}
    text = report.dumps(data)
    print(report.table(results))
    for comparison in comparisons:
        print(comparison)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")
    if any(r.error for r in results):
        return 1
    return print_comparison(args, recorded, data) if recorded is not None else 0


def print_comparison(
    args: argparse.Namespace, recorded: dict[str, Any], current: dict[str, Any]
) -> int:
    """Print what moved against the recorded figures; 3 when a figure got worse."""
    moves = compare.compare(recorded, current, threshold=args.threshold)
    print(compare.render(moves, recorded, current, threshold=args.threshold, source=args.compare))
    return 3 if any(m.worse for m in moves) else 0


async def compare_stores(
    plan: Plan, hubs: int, workdir: pathlib.Path, log: Callable[[str], None]
) -> tuple[list[SizeResult], dict[str, float]]:
    """One size on SQLite with one hub, then on one throwaway PostgreSQL server with one hub
    and with `hubs` hubs (a fresh database each), then the bare batched upserts of both
    databases (bench/store_ingest.py: rows of the `devices` table, 50 clusters a transaction).
    The bare-stream and admission baselines run once, in the SQLite run: they do not depend
    on the store."""
    from tools.pgserver import PgServer

    results = []
    with PgServer.start() as pg:
        setups = [("SQLite, 1 hub", None, 1), ("PostgreSQL, 1 hub", "one", 1)]
        if hubs > 1:
            setups.append((f"PostgreSQL, {hubs} hubs", "many", hubs))
        for setup, database, count in setups:
            log(f"[{plan.agents} agents] == {setup} ==")
            store_url = pg.create_database(f"{database}{plan.agents}") if database else None
            skip = plan.skip | ({"baselines"} if database else set())
            run = replace(plan, store_url=store_url, hubs=count, skip=frozenset(skip))
            slug = setup.lower().replace(", ", "-").replace(" ", "-")
            result = await run_size(run, workdir / slug, log=log)
            result.setup = setup
            results.append(result)
        log(f"[{plan.agents} agents] bare SQLite and PostgreSQL batched upserts")
        shape = dict(clusters=max(50, plan.agents), rounds=4, batch=50)
        bare = {
            "bare SQLite batched upsert": store_ingest.bare_sqlite_rate(
                workdir / "bare-upsert.db", **shape
            ),
            "bare PostgreSQL batched upsert": store_ingest.bare_postgres_rate(
                pg.create_database(f"bare{plan.agents}"), **shape
            ),
        }
    return results, bare


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(main_async(args))
    except KeyboardInterrupt:
        print("interrupted: hub and workers stopped", file=sys.stderr)
        return 130
    except compare.CompareError as e:
        print(f"python -m bench: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
