"""`wingsmith agent` and `python -m agent`: parse the command line and run an agent.

The top of the agent's layers: it picks the cluster backend (today the simulated cluster;
Kubernetes arrives with the real-cluster adapter) and hands over to agent.app.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence

import grpc

from agent.app import AgentConfig
from agent.devices import diagnose
from agent.simulation import build_simulated_agent

ENV_TOKEN = "WINGSMITH_AGENT_TOKEN"
ENV_READ_ONLY = "HANGAR_OPERATOR_READ_ONLY"


def read_only_from_env(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ENV_READ_ONLY, "").strip().lower() in ("1", "true", "yes")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wingsmith agent", description="Run the hangar agent.")
    parser.add_argument("--hub", default="127.0.0.1:50051", help="hub gRPC address HOST:PORT")
    parser.add_argument("--cluster-id", required=True)
    parser.add_argument("--token", default=None, help=f"cluster token (else ${ENV_TOKEN})")
    parser.add_argument(
        "--simulate",
        metavar="SPEC",
        help='run on a simulated cluster, e.g. "nodes=2,gpus=8,class=H100-80GB,ready_after=2s"',
    )
    parser.add_argument("--sim-seed", metavar="PATH", help="YAML of DGDs already running")
    parser.add_argument("--namespace", default="wingsmith", help="namespace for our DGDs")
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=None,
        help=f"apply nothing (also ${ENV_READ_ONLY}=true)",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["devices"]:
        # The node diagnostic (agent/devices/diagnose.py) parses its own options.
        raise SystemExit(diagnose.main(words[1:]))
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    token = args.token or os.environ.get(ENV_TOKEN, "")
    if not token:
        raise SystemExit(f"a cluster token is required: --token or ${ENV_TOKEN}")
    config = AgentConfig(
        hub=args.hub,
        cluster_id=args.cluster_id,
        token=token,
        namespace=args.namespace,
        read_only=args.read_only if args.read_only is not None else read_only_from_env(),
    )
    if not args.simulate:
        raise SystemExit(
            "only the simulated cluster is available in this build: pass --simulate SPEC"
        )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_simulated(config, spec=args.simulate, seed_path=args.sim_seed))


async def run_simulated(config: AgentConfig, *, spec: str, seed_path: str | None = None) -> None:
    async with grpc.aio.insecure_channel(config.hub) as channel:
        agent = build_simulated_agent(config, spec=spec, seed_path=seed_path, channel=channel)
        await agent.run()
