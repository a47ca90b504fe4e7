"""The hub-in-a-thread helper cleans up after itself: no thread, no listener left."""

from __future__ import annotations

import pathlib
import socket
import threading
import urllib.parse

import pytest

from tests.integration.cli.conftest import hub_in_thread

# grpc.aio starts one poller thread per process on first use and keeps it: not a leak of ours.
_GRPC_POLLER = "_poll_wrapper"


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if _GRPC_POLLER not in t.name}


def test_the_hub_thread_and_its_listener_are_gone_after_the_block(tmp_path: pathlib.Path) -> None:
    before = _threads()
    for attempt in range(2):
        with hub_in_thread(tmp_path / f"hub{attempt}.db") as running:
            port = urllib.parse.urlsplit(running.url).port
            assert port
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert _threads() <= before
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
