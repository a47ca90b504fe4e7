"""Transport security: TLS on both listeners, the agent verifying the hub, mutual TLS with the
certificate bound to the cluster, and no plaintext on the network without --insecure."""

from __future__ import annotations

import asyncio
import http.client
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent import main as agent_main
from agent.sync.channel import ChannelSecurity, PlaintextRefused, open_channel
from hub import tls
from tests.certs import Authority
from tests.harness import Hub, LoopThread, running_hub, start_agent, wait_until, workload


@pytest.fixture
def pki(tmp_path: Path) -> tuple[Authority, Authority]:
    return Authority(tmp_path, "wingsmith"), Authority(tmp_path, "other")


@pytest.fixture
def tls_hub(tmp_path: Path, pki: tuple[Authority, Authority]) -> Iterator[tuple[LoopThread, Hub]]:
    ca, _ = pki
    server = ca.server()
    config = tls.TlsConfig(str(server.cert), str(server.key))
    with running_hub(tmp_path, tls=config, ca_file=str(ca.cert)) as pair:
        yield pair


@pytest.fixture
def mtls_hub(tmp_path: Path, pki: tuple[Authority, Authority]) -> Iterator[tuple[LoopThread, Hub]]:
    ca, _ = pki
    server = ca.server()
    config = tls.TlsConfig(str(server.cert), str(server.key), str(ca.cert))
    with running_hub(tmp_path, tls=config, ca_file=str(ca.cert)) as pair:
        yield pair


def test_an_agent_that_trusts_the_hubs_ca_syncs_over_tls(
    tls_hub: tuple[LoopThread, Hub], pki: tuple[Authority, Authority]
) -> None:
    loop, hub = tls_hub
    ca, _ = pki
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = start_agent(
        loop, hub, cluster_id="east", token=token, security=ChannelSecurity(ca_file=str(ca.cert))
    )
    try:
        hub.post("/v1/workloads", workload("chat", clusters=("east",)))
        wait_until(lambda: hub.get("/v1/workloads/chat")["phase"] == "running", what="running")
    finally:
        agent.stop()


@pytest.mark.parametrize("bad", ["wrong CA", "expired certificate"])
def test_an_agent_refuses_a_hub_it_cannot_verify(
    tmp_path: Path, pki: tuple[Authority, Authority], bad: str
) -> None:
    ca, other = pki
    server = ca.server(expired=bad == "expired certificate")
    trusted = other.cert if bad == "wrong CA" else ca.cert
    config = tls.TlsConfig(str(server.cert), str(server.key))
    with running_hub(tmp_path, tls=config, ca_file=str(ca.cert)) as (loop, hub):
        token = hub.register_cluster("east") if bad == "wrong CA" else "wsa_unused-token"
        agent = start_agent(
            loop,
            hub,
            cluster_id="east",
            token=token,
            security=ChannelSecurity(ca_file=str(trusted)),
        )
        try:
            stats = agent.agent.client.stats
            wait_until(lambda: stats.last_code is not None, what="the connection refused")
            assert stats.last_code == grpc.StatusCode.UNAVAILABLE
            assert stats.sessions == 0, "no stream was ever opened"
        finally:
            agent.stop()


def test_rest_is_served_over_tls_only(
    tls_hub: tuple[LoopThread, Hub], pki: tuple[Authority, Authority]
) -> None:
    _, hub = tls_hub
    assert hub.get("/v1/clusters") == {"clusters": [], "next_page_token": ""}
    with pytest.raises((urllib.error.URLError, http.client.HTTPException, ConnectionError)):
        urllib.request.urlopen(f"http://127.0.0.1:{hub.http_port}/healthz", timeout=10)
    _, other = pki
    untrusting = ssl.create_default_context(cafile=str(other.cert))
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(
            f"https://127.0.0.1:{hub.http_port}/healthz", timeout=10, context=untrusting
        )


def test_mutual_tls_binds_the_certificate_to_its_cluster(
    mtls_hub: tuple[LoopThread, Hub], pki: tuple[Authority, Authority]
) -> None:
    loop, hub = mtls_hub
    ca, _ = pki
    east_token = hub.register_cluster("east")
    hub.register_cluster("west")

    def agent_with(cert_of: str) -> grpc.StatusCode | None:
        issued = ca.agent(cert_of)
        security = ChannelSecurity(
            ca_file=str(ca.cert), cert_file=str(issued.cert), key_file=str(issued.key)
        )
        agent = start_agent(loop, hub, cluster_id="east", token=east_token, security=security)
        try:
            stats = agent.agent.client.stats
            wait_until(lambda: stats.sessions or stats.last_code, what="an outcome")
            return None if stats.sessions else stats.last_code
        finally:
            agent.stop()

    assert agent_with("east") is None, "its own certificate: the stream opens"
    assert agent_with("west") == grpc.StatusCode.PERMISSION_DENIED
    no_cert = start_agent(
        loop,
        hub,
        cluster_id="east",
        token=east_token,
        security=ChannelSecurity(ca_file=str(ca.cert)),
    )
    try:
        stats = no_cert.agent.client.stats
        wait_until(lambda: stats.last_code is not None, what="refused")
        assert stats.last_code == grpc.StatusCode.UNAVAILABLE and stats.sessions == 0
    finally:
        no_cert.stop()


@pytest.mark.parametrize("bad", ["another CA", "expired"])
def test_mutual_tls_refuses_a_client_certificate_from_another_ca_or_expired(
    mtls_hub: tuple[LoopThread, Hub], pki: tuple[Authority, Authority], bad: str
) -> None:
    loop, hub = mtls_hub
    ca, other = pki
    token = hub.register_cluster("east")
    issued = other.agent("east") if bad == "another CA" else ca.agent("east", expired=True)
    security = ChannelSecurity(
        ca_file=str(ca.cert), cert_file=str(issued.cert), key_file=str(issued.key)
    )
    agent = start_agent(loop, hub, cluster_id="east", token=token, security=security)
    try:
        stats = agent.agent.client.stats
        wait_until(lambda: stats.last_code is not None, what="the handshake refused")
        # The hub's TLS handshake fails: no stream, not even an authentication error.
        assert stats.last_code == grpc.StatusCode.UNAVAILABLE and stats.sessions == 0
        assert hub.get("/v1/clusters/east")["agents"] == []
    finally:
        agent.stop()


@pytest.mark.parametrize(
    ("target", "insecure", "refused"),
    [
        ("127.0.0.1:50051", False, False),
        ("localhost:50051", False, False),
        ("[::1]:50051", False, False),
        ("unix:///run/wingsmith/hub.sock", False, False),
        ("10.0.0.5:50051", False, True),
        ("hub.example:50051", False, True),
        ("dns:///hub.example:50051", False, True),
        ("[2001:db8::1]:50051", False, True),
        ("hub.example:50051", True, False),
    ],
)
def test_the_agent_sends_its_token_in_plaintext_only_to_loopback_unless_insecure(
    target: str, insecure: bool, refused: bool
) -> None:
    security = ChannelSecurity(insecure=insecure)
    if refused:
        with pytest.raises(PlaintextRefused, match="--insecure"):
            open_channel(target, security)
    else:

        async def opened() -> None:
            await open_channel(target, security).close()

        asyncio.run(opened())


def test_the_agent_command_refuses_a_plaintext_hub_on_the_network_before_starting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--cluster-id", "east", "--token", "wsa_t", "--simulate", "nodes=1"]
    with pytest.raises(SystemExit) as caught:
        agent_main.main(["--hub", "hub.example:50051", *argv])
    assert caught.value.code == 2
    assert capsys.readouterr().err.startswith("error: --hub: refusing to send the cluster token")
    args = agent_main.parse_args(["--hub", "hub.example:50051", "--insecure", *argv])
    assert agent_main.check_args(args) == "wsa_t"


@pytest.mark.parametrize(
    ("hosts", "has_tls", "insecure", "refused"),
    [
        (["127.0.0.1", "127.0.0.1"], False, False, False),
        (["localhost", "::1"], False, False, False),
        (["0.0.0.0", "127.0.0.1"], False, False, True),
        (["10.0.0.5"], False, False, True),
        (["0.0.0.0"], True, False, False),
        (["0.0.0.0"], False, True, False),
    ],
)
def test_plaintext_on_the_network_needs_insecure(
    hosts: list[str], has_tls: bool, insecure: bool, refused: bool
) -> None:
    config = tls.TlsConfig("c", "k") if has_tls else None
    if refused:
        with pytest.raises(ValueError, match="--insecure"):
            tls.check_exposure(hosts=hosts, tls=config, insecure=insecure)
    else:
        tls.check_exposure(hosts=hosts, tls=config, insecure=insecure)


def test_the_certificate_names_its_cluster_in_the_documented_order() -> None:
    spiffe = {"peer_spiffe_id": [b"spiffe://wingsmith/cluster/east"], "x509_common_name": [b"x"]}
    dns = {"x509_subject_alternative_name": [b"west"], "x509_common_name": [b"x"]}
    cn = {"x509_common_name": [b"lab"]}
    assert tls.peer_cluster_id(spiffe) == "east"
    assert tls.peer_cluster_id(dns) == "west"
    assert tls.peer_cluster_id(cn) == "lab"
    assert tls.peer_cluster_id({}) is None
