"""`wingsmith agent` and `python -m agent`: parse the command line and run an agent.

The top of the agent's layers: it picks the cluster backend (the simulated cluster with
--simulate, a real one with --kubernetes) and the channel's security, and hands over to
agent.app. `wingsmith agent devices` is the node diagnostic (agent/devices/diagnose.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from agent.app import AgentConfig
from agent.devices import diagnose
from agent.kubernetes import KubernetesOptions, kubernetes_agent
from agent.simulation import build_simulated_agent
from agent.sync.channel import ChannelSecurity, open_channel

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
    parser.add_argument(
        "--kubernetes",
        action="store_true",
        help="run on this pod's Kubernetes cluster and node (the DaemonSet)",
    )
    parser.add_argument("--kubeconfig", help="a kubeconfig file (default: in-cluster config)")
    parser.add_argument("--context", help="the kubeconfig context")
    parser.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME", ""), help="this pod's node ($NODE_NAME)"
    )
    parser.add_argument(
        "--pod-name",
        default=os.environ.get("POD_NAME", ""),
        help="this pod's name: its Lease identity ($POD_NAME)",
    )
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", "wingsmith"),
        help="namespace of the leader-election Lease ($POD_NAMESPACE)",
    )
    parser.add_argument("--lease-name", default="wingsmith-hangar")
    parser.add_argument(
        "--pod-resources-socket", default="/var/lib/kubelet/pod-resources/kubelet.sock"
    )
    parser.add_argument("--nvml-library", help="path of libnvidia-ml.so.1, if not the default")
    parser.add_argument(
        "--watch-namespace",
        action="append",
        default=[],
        help="watch DGDs only here (repeatable; default: every namespace)",
    )
    parser.add_argument("--hub-ca", help="PEM CA to verify the hub's certificate (TLS)")
    parser.add_argument("--client-cert", help="PEM client certificate (mutual TLS)")
    parser.add_argument("--client-key", help="PEM key of --client-cert")
    parser.add_argument("--hub-server-name", help="name to verify the hub's certificate against")
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
    security = ChannelSecurity(
        ca_file=args.hub_ca,
        cert_file=args.client_cert,
        key_file=args.client_key,
        server_name=args.hub_server_name,
    )
    if bool(args.simulate) == bool(args.kubernetes):
        raise SystemExit("error: pass exactly one of --simulate SPEC or --kubernetes")
    if args.kubernetes and not (args.node_name and args.pod_name):
        raise SystemExit(
            "error: --kubernetes needs --node-name and --pod-name (or $NODE_NAME/$POD_NAME)"
        )
    with contextlib.suppress(KeyboardInterrupt):
        if args.simulate:
            asyncio.run(
                run_simulated(
                    config, spec=args.simulate, seed_path=args.sim_seed, security=security
                )
            )
        else:
            options = KubernetesOptions(
                node_name=args.node_name,
                pod_name=args.pod_name,
                lease_namespace=args.lease_namespace,
                lease_name=args.lease_name,
                kubeconfig=args.kubeconfig,
                context=args.context,
                pod_resources_socket=args.pod_resources_socket,
                nvml_library=args.nvml_library,
                watch_namespaces=tuple(args.watch_namespace),
            )
            asyncio.run(run_kubernetes(config, options, security=security))


async def run_simulated(
    config: AgentConfig,
    *,
    spec: str,
    seed_path: str | None = None,
    security: ChannelSecurity | None = None,
) -> None:
    async with open_channel(config.hub, security) as channel:
        agent = build_simulated_agent(config, spec=spec, seed_path=seed_path, channel=channel)
        await agent.run()


async def run_kubernetes(
    config: AgentConfig, options: KubernetesOptions, *, security: ChannelSecurity
) -> None:
    async with (
        open_channel(config.hub, security) as channel,
        kubernetes_agent(config, options, channel=channel) as agent,
    ):
        await agent.run()
