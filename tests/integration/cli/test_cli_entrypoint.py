"""The installed entry points: `python -m cli` as a real process, and the console script."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

from cli import main as cli_main
from tests.integration.cli import manifests
from tests.integration.cli.conftest import RunningHub

_TIMEOUT_S = 60


def _wingsmith(*argv: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}
    return subprocess.run(
        [sys.executable, "-m", "cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )


def test_python_m_cli_creates_and_lists_in_a_real_process(
    cli_hub: RunningHub, tmp_path: pathlib.Path
) -> None:
    connection = ["--hub-url", cli_hub.url, "--token", cli_hub.token]
    path = manifests.write(tmp_path, manifests.PROJECT)
    created = _wingsmith("create", "-f", path, *connection, cwd=tmp_path)
    assert (created.returncode, created.stdout) == (0, "project/team-a created\n"), created.stderr
    listed = _wingsmith("get", "projects", "-o", "json", *connection, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [p["name"] for p in json.loads(listed.stdout)["items"]] == ["team-a"]


def test_python_m_cli_exits_1_on_a_refusal(cli_hub: RunningHub, tmp_path: pathlib.Path) -> None:
    refused = _wingsmith("get", "projects", "--hub-url", cli_hub.url, "--token", "x", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr == "error: 401 UNAUTHENTICATED: unknown or revoked token\n"


def test_the_wingsmith_console_script_is_cli_main() -> None:
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="wingsmith")
    assert entry.load() is cli_main.main
