"""Building the client: a kubeconfig file (and a context in it), the in-cluster service
account (HTTPS with the account's CA and bearer token), and the error when neither works."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cluster.kube.cluster import KubernetesCluster
from agent.cluster.kube.config import load_api_client
from agent.cluster.kube.errors import KubeConfigError
from tests.fake_kube import NODES
from tests.fake_kube.tls import make_certificates
from tests.unit.kube import builders
from tests.unit.kube.conftest import FAST, StartEmulator, write_kubeconfig


def test_a_kubeconfig_file_points_the_client_at_its_server(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    server = start_emulator()
    client = load_api_client(kubeconfig=write_kubeconfig(tmp_path / "config", server=server.url))
    try:
        assert client.configuration.host == server.url
    finally:
        client.close()


def test_a_context_picks_its_cluster_from_the_kubeconfig(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    server = start_emulator()
    path = write_kubeconfig(tmp_path / "config", server="http://127.0.0.1:9")
    config = yaml.safe_load(path.read_text())
    config["clusters"].append({"name": "other", "cluster": {"server": server.url}})
    config["contexts"].append({"name": "other", "context": {"cluster": "other", "user": "nobody"}})
    path.write_text(yaml.safe_dump(config))

    client = load_api_client(kubeconfig=path, context="other")
    try:
        assert client.configuration.host == server.url
    finally:
        client.close()


def test_in_cluster_config_uses_the_service_account_token_and_ca(
    start_emulator: StartEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certificates = make_certificates(tmp_path)
    server = start_emulator(tls=certificates.server_context(), token="sa-token-1")
    server.store.update(NODES, builders.node(), manager="kubelet")
    token = tmp_path / "token"
    token.write_text("sa-token-1")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))

    client = load_api_client(token_file=str(token), ca_file=str(certificates.ca_file))
    try:
        assert client.configuration.host == f"https://127.0.0.1:{server.port}"
        # The adapter over that client lists and watches through TLS with the token.
        cluster = KubernetesCluster(client, tuning=FAST)
        cluster.start()
        try:
            assert cluster.wait_synced(5.0)
            assert [n.name for n in cluster.list_nodes()] == ["gpu-node-1"]
        finally:
            assert cluster.stop()
    finally:
        client.close()
    assert server.requests()
    assert {r.authorization.lower() for r in server.requests()} == {"bearer sa-token-1"}


def test_without_a_cluster_or_a_kubeconfig_the_error_says_both(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing")}
    with pytest.raises(KubeConfigError) as raised:
        load_api_client(environ=environ, token_file=str(tmp_path / "no-token"))
    assert raised.value.retryable is False
    assert "not in a cluster" in str(raised.value)
    assert "kubeconfig" in str(raised.value)


def test_outside_a_cluster_the_default_kubeconfig_is_used(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    server = start_emulator()
    path = write_kubeconfig(tmp_path / "config", server=server.url)
    client = load_api_client(environ={"KUBECONFIG": str(path)})
    try:
        assert client.configuration.host == server.url
    finally:
        client.close()


def test_a_missing_kubeconfig_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError):
        load_api_client(kubeconfig=tmp_path / "nope")
