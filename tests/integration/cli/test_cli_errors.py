"""How `wingsmith` reports a refusing, missing or unreachable hub, and where it finds a token."""

from __future__ import annotations

import json
import pathlib
import socket

import pytest

from cli import main as cli_main
from tests.integration.cli.conftest import Runner, RunningHub


def test_a_wrong_token_is_refused_with_401_and_exit_1(cli: Runner) -> None:
    result = cli("get", "projects", token="w" * 20)
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: 401 UNAUTHENTICATED: unknown or revoked token\n"


def test_an_unknown_resource_prints_the_hubs_not_found(cli: Runner) -> None:
    result = cli("get", "cluster", "nope")
    assert (result.code, result.err) == (1, "error: 404 NOT_FOUND: cluster 'nope' not found\n")


def test_scaling_an_unknown_workload_is_not_found(cli: Runner) -> None:
    result = cli("scale", "workload", "nope", "--replicas", "1")
    assert (result.code, result.err) == (1, "error: 404 NOT_FOUND: workload 'nope' not found\n")


def test_connection_refused_says_which_url_and_asks_whether_the_hub_runs(
    cli: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WINGSMITH_RETRY_S", "0.3")  # retried once (0.2 s), then reported
    url = f"http://127.0.0.1:{_closed_port()}"
    result = cli("get", "clusters", url=url)
    assert result.code == 1
    assert result.err.startswith(f"error: cannot reach the hub at {url} (connection refused).")
    assert "Is the hub running" in result.err
    assert "--hub-url or WINGSMITH_HUB_URL" in result.err


def test_the_hub_url_and_token_come_from_the_environment(
    cli_hub: RunningHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WINGSMITH_HUB_URL", cli_hub.url)
    monkeypatch.setenv("WINGSMITH_ADMIN_TOKEN", cli_hub.token)
    assert cli_main.main(["get", "projects", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []


def test_options_before_the_command_count_too(
    cli_hub: RunningHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("WINGSMITH_HUB_URL", raising=False)
    argv = ["--hub-url", cli_hub.url, "--token", cli_hub.token, "-o", "json", "get", "clusters"]
    assert cli_main.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []


def test_the_token_is_read_from_token_file(
    cli_hub: RunningHub, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "hub.db.admin-token"
    token_file.write_text(cli_hub.token + "\n")
    argv = ["get", "projects", "--hub-url", cli_hub.url, "--token-file", str(token_file)]
    assert cli_main.main(argv) == 0
    assert capsys.readouterr().err == "no projects found\n"


def test_the_token_file_of_a_hub_started_in_this_directory_is_found(
    cli_hub: RunningHub,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("WINGSMITH_ADMIN_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wingsmith.db.admin-token").write_text(cli_hub.token + "\n")
    assert cli_main.main(["get", "projects", "--hub-url", cli_hub.url]) == 0


def test_a_missing_token_says_how_to_give_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("WINGSMITH_ADMIN_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli_main.main(["get", "projects"]) == 2
    err = capsys.readouterr().err
    for way in ("--token", "--token-file", "WINGSMITH_ADMIN_TOKEN", "admin-token"):
        assert way in err


def _closed_port() -> int:
    """A port nothing listens on: bound to learn a free number, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
