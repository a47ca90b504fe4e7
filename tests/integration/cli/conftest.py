"""A real hub in a background thread, and a runner for `cli.main.main` against it.

The hub runs on its own asyncio loop in one thread (no pytest-asyncio): `start` is awaited in
that thread, the loop then serves until the fixture's finalizer stops the server, the loop and
the thread, so no test leaves a listener or a thread behind. Kept local to the CLI tests on
purpose; a shared harness may replace it later.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cli import main as cli_main
from cli.client import HubClient
from hub.app import HubConfig, HubServer

ADMIN_TOKEN = "t" * 20
_TIMEOUT_S = 30


@dataclass(frozen=True)
class RunningHub:
    url: str
    token: str
    db_path: pathlib.Path
    # The hub's gRPC address (agents' streams), for tests that check an agent token.
    grpc_target: str = ""

    def client(self) -> HubClient:
        return HubClient(self.url, self.token)


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@contextlib.contextmanager
def hub_in_thread(db_path: pathlib.Path) -> Iterator[RunningHub]:
    config = HubConfig(
        db_path=str(db_path),
        grpc_listen="127.0.0.1:0",
        http_listen="127.0.0.1:0",
        admin_token=ADMIN_TOKEN,
    )
    server = HubServer(config)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as e:  # reported to the test thread below
            failure.append(e)
            started.set()
            return
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="cli-test-hub", daemon=True)
    thread.start()
    try:
        assert started.wait(_TIMEOUT_S), "the hub did not start"
        if failure:
            raise failure[0]
        yield RunningHub(
            f"http://127.0.0.1:{server.http_port}",
            ADMIN_TOKEN,
            db_path,
            grpc_target=f"127.0.0.1:{server.grpc_port}",
        )
    finally:
        _stop(server, loop, thread, started=not failure)


def _stop(
    server: HubServer, loop: asyncio.AbstractEventLoop, thread: threading.Thread, *, started: bool
) -> None:
    if started and thread.is_alive():
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
    thread.join(_TIMEOUT_S)
    assert not thread.is_alive(), "the hub's loop did not stop"
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


@pytest.fixture
def cli_hub(tmp_path: pathlib.Path) -> Iterator[RunningHub]:
    with hub_in_thread(tmp_path / "hub.db") as running:
        yield running


@pytest.fixture
def cli(
    cli_hub: RunningHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runner]:
    # Only the flags say where the hub is: nothing from the developer's shell leaks in.
    monkeypatch.delenv("WINGSMITH_HUB_URL", raising=False)
    monkeypatch.delenv("WINGSMITH_ADMIN_TOKEN", raising=False)
    yield Runner(hub=cli_hub, capsys=capsys)


@dataclass(frozen=True)
class Runner:
    hub: RunningHub
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *argv: str, token: str | None = None, url: str | None = None) -> Result:
        """`wingsmith <argv>` in-process against the test hub; its exit code and output."""
        connection = ["--hub-url", url or self.hub.url, "--token", token or self.hub.token]
        self.capsys.readouterr()  # drop what earlier steps printed
        code = cli_main.main([*argv, *connection])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *argv: str) -> str:
        result = self(*argv)
        assert result.code == 0, result.err
        return result.out
