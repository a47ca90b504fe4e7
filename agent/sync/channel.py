"""The agent's gRPC channel to the hub: TLS when told, keepalive always.

The agent verifies the hub's certificate against a CA file (`--hub-ca`); with a client
certificate and key (`--client-cert`, `--client-key`) it also authenticates itself (mutual
TLS: the certificate must name this agent's cluster). Without a CA the channel is plaintext,
and the cluster token in every stream's metadata with it: for a hub on loopback only, unless
the agent is started with an explicit `--insecure` (as the hub refuses to listen in plaintext
on the network without one: docs/security.md). A plaintext channel to another machine without
`--insecure` is refused (`PlaintextRefused`) before anything is sent.
"""

from __future__ import annotations

import ipaddress
import logging
import pathlib
from dataclasses import dataclass

import grpc

log = logging.getLogger(__name__)

KEEPALIVE = (
    # Ping an idle connection so a dead hub (or a middlebox that dropped us) is noticed in
    # tens of seconds, not at the next write.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    # gRPC's own reconnect backoff defaults to 1 s growing to 120 s: after a hub outage of a
    # minute the channel could sit in TRANSIENT_FAILURE for two more, failing every stream
    # attempt at once. Cap it near the stream's own backoff (agent/sync/client.py); gRPC
    # jitters each delay by +-20%, so a fleet still spreads out.
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 10_000),
)


@dataclass(frozen=True)
class ChannelSecurity:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    # The name to verify the hub's certificate against, when it differs from the address.
    server_name: str | None = None
    # Plaintext to a hub on another machine (the token readable on the network): only if told.
    insecure: bool = False

    @property
    def tls(self) -> bool:
        return self.ca_file is not None


class PlaintextRefused(ValueError):
    """A plaintext channel to a hub that is not on this machine, without --insecure."""

    def __init__(self, host: str) -> None:
        super().__init__(
            f"refusing to send the cluster token in plaintext to {host}: pass --hub-ca (the CA"
            " of the hub's certificate) to use TLS, or --insecure to accept plaintext on the"
            " network"
        )
        self.host = host


def target_host(target: str) -> str:
    """The host of a gRPC target: "host:port", "[v6]:port", "dns:///host:port", "unix:...".
    "" for a unix socket (always local)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return ""
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target.removeprefix(scheme)
            break
    if target.startswith("["):
        return target[1 : target.find("]")] if "]" in target else target[1:]
    host, sep, port = target.rpartition(":")
    return host if sep and port.isdigit() else target


def is_local(host: str) -> bool:
    if host in ("", "localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_plaintext(target: str, security: ChannelSecurity) -> None:
    """PlaintextRefused for plaintext to another machine unless `insecure`; a loud warning
    when it is."""
    host = target_host(target)
    if security.tls or is_local(host):
        return
    if not security.insecure:
        raise PlaintextRefused(host)
    log.warning(
        "--insecure: the cluster token goes to %s in plaintext; anyone on the path can read it"
        " and act as this cluster's agent",
        host,
    )


def open_channel(target: str, security: ChannelSecurity | None = None) -> grpc.aio.Channel:
    security = security or ChannelSecurity()
    # A connection of its own: channels to one target in one process would otherwise share
    # one (gRPC's global subchannel pool), and so one hub behind a load balancer.
    options: list[tuple[str, int | str]] = [*KEEPALIVE, ("grpc.use_local_subchannel_pool", 1)]
    if not security.tls:
        if security.cert_file or security.key_file:
            raise ValueError("a client certificate needs --hub-ca (mutual TLS is TLS)")
        check_plaintext(target, security)
        return grpc.aio.insecure_channel(target, options=options)
    if bool(security.cert_file) != bool(security.key_file):
        raise ValueError("--client-cert and --client-key go together")
    if security.server_name:
        options.append(("grpc.ssl_target_name_override", security.server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(security.ca_file),
        private_key=_read(security.key_file) if security.key_file else None,
        certificate_chain=_read(security.cert_file) if security.cert_file else None,
    )
    return grpc.aio.secure_channel(target, credentials, options=options)


def _read(path: str | None) -> bytes:
    assert path is not None
    try:
        return pathlib.Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e}") from e
