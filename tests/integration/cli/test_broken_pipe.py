"""`wingsmith ... | head`: when the reader of stdout goes away, the real CLI stops quietly with
141 (what a shell reports for any Unix tool killed by SIGPIPE), never with a traceback or
"Exception ignored ... BrokenPipeError" on the terminal."""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys

import pytest

from cli import main as cli_main
from tests.integration.cli.conftest import RunningHub

_TIMEOUT_S = 60


@pytest.fixture
def crowded_hub(cli_hub: RunningHub) -> RunningHub:
    # Enough projects that `get projects -o json` outgrows a pipe's buffered write (8 KiB).
    client = cli_hub.client()
    for index in range(80):
        client.post("/v1/projects", {"name": f"team-{index:03d}", "quotas": {}})
    return cli_hub


def _argv(hub: RunningHub, *words: str) -> list[str]:
    return [sys.executable, "-m", "cli", *words, "--hub-url", hub.url, "--token", hub.token]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}


def _into_closed_pipe(argv: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """The CLI writing to a pipe nobody reads any more (what `| head` leaves once head has
    its lines): its first write to stdout fails with EPIPE, deterministically."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            argv,
            cwd=cwd,
            env=_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "words",
    [("get", "projects", "-o", "json"), ("get", "projects"), ("get", "project", "team-001")],
    ids=["more than a buffer", "a table", "a few lines"],
)
def test_a_closed_pipe_ends_the_cli_with_141_and_nothing_on_stderr(
    crowded_hub: RunningHub, tmp_path: pathlib.Path, words: tuple[str, ...]
) -> None:
    result = _into_closed_pipe(_argv(crowded_hub, *words), tmp_path)
    assert result.stderr == "", result.stderr
    assert result.returncode == cli_main.EXIT_BROKEN_PIPE == 141


def test_through_head_the_user_gets_the_lines_and_no_traceback(
    crowded_hub: RunningHub, tmp_path: pathlib.Path
) -> None:
    command = " ".join(shlex.quote(a) for a in _argv(crowded_hub, "get", "projects", "-o", "json"))
    result = subprocess.run(
        ["sh", "-c", f"{command} | head -n 2"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    assert result.stdout.startswith('{\n  "apiVersion": "v1",\n'), result.stdout
    assert result.stderr == "", result.stderr
