"""Test certificates, made with the `cryptography` package: a CA, leaf certificates for the
hub (127.0.0.1 / localhost) and agents (SPIFFE ids naming their cluster), and the bad kinds
(another CA, an expired certificate)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SPIFFE = "spiffe://wingsmith/cluster/"


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


class Authority:
    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(f"{name} CA"))
            .issuer_name(_name(f"{name} CA"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / f"{name}-ca.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def server(self, *, expired: bool = False) -> Issued:
        sans: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        return self._issue("hub-expired" if expired else "hub", "hub", sans, expired=expired)

    def agent(self, cluster_id: str, *, expired: bool = False) -> Issued:
        sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(SPIFFE + cluster_id)]
        file = f"agent-{cluster_id}-expired" if expired else f"agent-{cluster_id}"
        return self._issue(file, cluster_id, sans, expired=expired)

    def _issue(
        self, file: str, common_name: str, sans: list[x509.GeneralName], *, expired: bool
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        start, end = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        )
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        issued = Issued(self.directory / f"{file}.pem", self.directory / f"{file}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return issued


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
