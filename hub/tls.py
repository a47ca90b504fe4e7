"""Transport security of the hub's listeners (docs/security.md).

- TLS on the gRPC and HTTP listeners from a certificate and key file (PEM).
- Optional mutual TLS on the gRPC listener: with a client CA, every gRPC client must present a
  certificate signed by it (grpc core verifies client certificates only when it requires them,
  so the requirement covers the whole gRPC port: admin tools such as grpcurl then need one too;
  the HTTP port stays TLS + admin token). An agent's certificate names its cluster, and the
  stream checks that name like the token: a certificate of cluster A on a stream of cluster B
  is PERMISSION_DENIED.
- The hub refuses to listen on a non-loopback address without TLS unless started with an
  explicit --insecure.

A certificate names its cluster by, in order: a SPIFFE id `spiffe://wingsmith/cluster/<id>`, a
DNS subject alternative name, the subject's common name.
"""

from __future__ import annotations

import hashlib
import ipaddress
import pathlib
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc

SPIFFE_PREFIX = "spiffe://wingsmith/cluster/"


@dataclass(frozen=True)
class TlsConfig:
    cert_file: str
    key_file: str
    # Set: mutual TLS on the gRPC listener (agents present certificates naming their cluster).
    client_ca_file: str | None = None

    def read(self) -> tuple[bytes, bytes, bytes | None]:
        """(certificate chain, key, client CA) as PEM bytes; a clear error for a bad path."""
        try:
            cert = pathlib.Path(self.cert_file).read_bytes()
            key = pathlib.Path(self.key_file).read_bytes()
            ca = pathlib.Path(self.client_ca_file).read_bytes() if self.client_ca_file else None
        except OSError as e:
            raise ValueError(f"cannot read TLS material: {e}") from e
        return cert, key, ca


def server_credentials(config: TlsConfig) -> grpc.ServerCredentials:
    cert, key, ca = config.read()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )


def http_context(config: TlsConfig) -> ssl.SSLContext:
    """TLS for the HTTP listener (REST and /metrics): server authentication only."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.cert_file, config.key_file)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"cannot load the TLS certificate and key: {e}") from e
    return context


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(*, hosts: Sequence[str], tls: TlsConfig | None, insecure: bool) -> None:
    """Refuse plaintext on an address other machines can reach, unless told --insecure."""
    exposed = [h for h in hosts if not is_loopback(h)]
    if exposed and tls is None and not insecure:
        raise ValueError(
            f"refusing to listen on {', '.join(exposed)} without TLS: pass --tls-cert and"
            " --tls-key, or --insecure to accept plaintext on the network"
        )


def peer_cluster_id(auth_context: Mapping[str, Sequence[bytes]]) -> str | None:
    """The cluster a verified client certificate names, or None without one."""
    for value in auth_context.get("peer_spiffe_id", ()):
        text = value.decode(errors="replace")
        if text.startswith(SPIFFE_PREFIX):
            return text.removeprefix(SPIFFE_PREFIX)
    for value in auth_context.get("x509_subject_alternative_name", ()):
        text = value.decode(errors="replace")
        if text.startswith(SPIFFE_PREFIX):
            return text.removeprefix(SPIFFE_PREFIX)
        if "://" not in text and not _is_ip(text):
            return text
    for value in auth_context.get("x509_common_name", ()):
        return value.decode(errors="replace")
    return None


def peer_certificate_fingerprint(auth_context: Mapping[str, Sequence[bytes]]) -> str | None:
    """SHA-256 (hex) of the verified client certificate's DER encoding, or None without one:
    what the hub records, and revokes, per cluster (docs/security.md)."""
    for value in auth_context.get("x509_pem_cert", ()):
        try:
            der = ssl.PEM_cert_to_DER_cert(value.decode("ascii", errors="replace"))
        except ValueError:
            return None
        return hashlib.sha256(der).hexdigest()
    return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
