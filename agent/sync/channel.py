"""The agent's gRPC channel to the hub: TLS when told, keepalive always.

The agent verifies the hub's certificate against a CA file (`--hub-ca`); with a client
certificate and key (`--client-cert`, `--client-key`) it also authenticates itself (mutual
TLS: the certificate must name this agent's cluster). Without a CA the channel is plaintext,
for loopback and tests only (the hub refuses plaintext on the network unless --insecure).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import grpc

KEEPALIVE = (
    # Ping an idle connection so a dead hub (or a middlebox that dropped us) is noticed in
    # tens of seconds, not at the next write.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
)


@dataclass(frozen=True)
class ChannelSecurity:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    # The name to verify the hub's certificate against, when it differs from the address.
    server_name: str | None = None

    @property
    def tls(self) -> bool:
        return self.ca_file is not None


def open_channel(target: str, security: ChannelSecurity | None = None) -> grpc.aio.Channel:
    security = security or ChannelSecurity()
    options: list[tuple[str, int | str]] = list(KEEPALIVE)
    if not security.tls:
        if security.cert_file or security.key_file:
            raise ValueError("a client certificate needs --hub-ca (mutual TLS is TLS)")
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
