"""`wingsmith agent` and `python -m agent`: parse the command line and run an agent.

The top of the agent's layers: it picks the cluster backend (the simulated cluster with
--simulate, a real one with --kubernetes) and the channel's security, and hands over to
agent.app. `wingsmith agent devices` is the node diagnostic (agent/devices/diagnose.py);
`wingsmith agent dgd-versions` says which DynamoGraphDeployment versions the API server serves
and which one the agent would write (docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence

from agent import tracing
from agent.app import AgentConfig
from agent.cluster import dgd_versions
from agent.cluster.kube.cluster import KubernetesCluster
from agent.cluster.kube.config import load_api_client
from agent.cluster.port import ClusterError
from agent.cluster.simulated.cluster import SimSpec, load_seed_file
from agent.cluster.simulated.manifest import parse_manifest
from agent.cluster.simulated.spec import KEYS as SIM_KEYS
from agent.devices import diagnose
from agent.kubernetes import KubernetesOptions, kubernetes_agent
from agent.simulation import build_simulated_agent
from agent.sync.channel import (
    ChannelSecurity,
    PlaintextRefused,
    is_local,
    open_channel,
    target_host,
)
from common import flags
from common.flags import UsageError

ENV_TOKEN = "WINGSMITH_AGENT_TOKEN"
ENV_READ_ONLY = "HANGAR_OPERATOR_READ_ONLY"


def read_only_from_env(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ENV_READ_ONLY, "").strip().lower() in ("1", "true", "yes")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wingsmith agent", description="Run the hangar agent.")
    parser.add_argument(
        "--hub", default="127.0.0.1:50051", help="hub gRPC address HOST:PORT (default: %(default)s)"
    )
    parser.add_argument("--cluster-id", required=True)
    parser.add_argument("--token", default=None, help=f"cluster token (else ${ENV_TOKEN})")
    parser.add_argument(
        "--simulate",
        metavar="SPEC",
        help='run on a simulated cluster, e.g. "nodes=2,gpus=8,class=H100-80GB,ready_after=2s";'
        f" keys: {', '.join(SIM_KEYS)} (docs/simulated-cluster.md)",
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
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext (no --hub-ca) to a hub on another machine: the cluster token"
        " crosses the network readable",
    )
    parser.add_argument(
        "--namespace", default="wingsmith", help="namespace for our DGDs (default: %(default)s)"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=None,
        help=f"apply nothing (also ${ENV_READ_ONLY}=true)",
    )
    parser.add_argument(
        "--metrics-listen",
        default="",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: none)",
    )
    flags.add_logging_flags(parser)
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> str:
    """Refuse bad flags before the agent starts (UsageError); returns the cluster token."""
    flags.check_logging_flags(args)
    if args.metrics_listen:
        host, sep, port = args.metrics_listen.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise UsageError(
                "--metrics-listen",
                f"expected HOST:PORT, e.g. 0.0.0.0:9400; got {args.metrics_listen!r}",
            )
    host, sep, port = args.hub.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise UsageError("--hub", f"expected HOST:PORT, e.g. 127.0.0.1:50051; got {args.hub!r}")
    if not args.cluster_id.strip():
        raise UsageError("--cluster-id", "must not be empty")
    token = args.token or environ.get(ENV_TOKEN, "")
    if not token:
        raise UsageError("--token", f"a cluster token is required: --token or ${ENV_TOKEN}")
    if bool(args.simulate) == bool(args.kubernetes):
        raise UsageError("", "pass exactly one of --simulate SPEC or --kubernetes")
    if args.simulate:
        _check_simulated(args)
    elif args.sim_seed:
        raise UsageError("--sim-seed", "goes with --simulate")
    if args.kubernetes and not (args.node_name and args.pod_name):
        raise UsageError(
            "--kubernetes", "needs --node-name and --pod-name (or $NODE_NAME/$POD_NAME)"
        )
    _check_tls(args)
    return token


def _check_simulated(args: argparse.Namespace) -> None:
    try:
        SimSpec.parse(args.simulate)
    except ValueError as e:
        raise UsageError(
            "--simulate", f'{e} (e.g. "nodes=2,gpus=8,class=H100-80GB,ready_after=2s")'
        ) from None
    if args.sim_seed:
        try:
            for manifest in load_seed_file(args.sim_seed):
                parse_manifest(manifest)
        except ValueError as e:  # SeedFileError, InvalidManifest
            raise UsageError("--sim-seed", str(e)) from None


def _check_tls(args: argparse.Namespace) -> None:
    if bool(args.client_cert) != bool(args.client_key):
        raise UsageError("--client-cert", "--client-cert and --client-key go together")
    if args.client_cert and not args.hub_ca:
        raise UsageError("--client-cert", "needs --hub-ca (mutual TLS is TLS)")
    for flag, path in (
        ("--hub-ca", args.hub_ca),
        ("--client-cert", args.client_cert),
        ("--client-key", args.client_key),
    ):
        if path and not os.access(path, os.R_OK):
            raise UsageError(flag, f"cannot read {path}")
    if not args.hub_ca and not args.insecure and not is_local(target_host(args.hub)):
        raise UsageError("--hub", str(PlaintextRefused(target_host(args.hub))))


def dgd_versions_main(argv: Sequence[str]) -> int:
    """`wingsmith agent dgd-versions [--kubeconfig PATH] [--context NAME]`: API discovery of
    the DGD versions, printed as JSON; it only reads. Exit status: 0 a version the agent can
    write is served; 1 none is, or the API server could not be asked; 2 a usage error."""
    parser = argparse.ArgumentParser(
        prog="wingsmith agent dgd-versions",
        description="Which DynamoGraphDeployment versions the API server serves, and which one"
        " the agent writes (in-cluster configuration unless --kubeconfig or --context).",
    )
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default=None)
    args = parser.parse_args(list(argv))
    try:
        client = load_api_client(kubeconfig=args.kubeconfig, context=args.context)
    except ClusterError as e:
        print(json.dumps({"error": str(e)}, indent=2))
        return 1
    try:
        cluster = KubernetesCluster(client, read_only=True)
        chosen = cluster.discover_dgd_versions()
    except ClusterError as e:
        print(json.dumps({"error": str(e)}, indent=2))
        return 1
    finally:
        client.close()  # type: ignore[no-untyped-call]
    report = {
        "served": list(cluster.served_dgd_versions),
        "known": list(dgd_versions.KNOWN_VERSIONS),
        "writes": chosen or "none",
    }
    if not chosen:
        report["problem"] = dgd_versions.no_version_message(cluster.served_dgd_versions)
    print(json.dumps(report, indent=2))
    return 0 if chosen else 1


def main(argv: Sequence[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["devices"]:
        # The node diagnostic (agent/devices/diagnose.py) parses its own options.
        raise SystemExit(diagnose.main(words[1:]))
    if words[:1] == ["dgd-versions"]:
        raise SystemExit(dgd_versions_main(words[1:]))
    args = parse_args(argv)
    token = flags.checked(check_args, args)
    flags.start_logging(args, tracing.configure)
    config = AgentConfig(
        hub=args.hub,
        cluster_id=args.cluster_id,
        token=token,
        namespace=args.namespace,
        read_only=args.read_only if args.read_only is not None else read_only_from_env(),
        metrics_listen=args.metrics_listen,
    )
    security = ChannelSecurity(
        ca_file=args.hub_ca,
        cert_file=args.client_cert,
        key_file=args.client_key,
        server_name=args.hub_server_name,
        insecure=args.insecure,
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
