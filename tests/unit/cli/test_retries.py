"""The CLI retries what a hub could not answer (a hub restarting behind a balancer), only where
a retry cannot do twice what the first try did. A real HTTP server on 127.0.0.1 port 0."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from cli import config
from cli.client import HubClient
from cli.errors import ApiError, UsageError

UNAVAILABLE = json.dumps(
    {"error": {"code": 14, "status": "UNAVAILABLE", "message": "database busy"}}
).encode()


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 503 UNAVAILABLE to the first `failures` calls, then 200."""

    failures = 0
    calls: list[str] = []

    def _answer(self) -> None:
        type(self).calls.append(self.command)
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        failing = len(type(self).calls) <= type(self).failures
        body = UNAVAILABLE if failing else b'{"ok": true}'
        self.send_response(503 if failing else 200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def flaky() -> Iterator[tuple[str, type[_Flaky]]]:
    handler = type("Handler", (_Flaky,), {"calls": [], "failures": 2})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_an_idempotent_call_answered_unavailable_is_retried_until_it_succeeds(
    flaky: tuple[str, type[_Flaky]],
) -> None:
    url, handler = flaky
    client = HubClient(url, "t" * 20, retry_pauses_s=(0.01, 0.01, 0.01))
    assert client.get("/v1/projects") == {"ok": True}
    assert client.patch("/v1/workloads/w", {"replicas": 1}) == {"ok": True}
    assert handler.calls == ["GET", "GET", "GET", "PATCH"]
    assert client.retried == 2


def test_a_create_answered_unavailable_is_not_retried(flaky: tuple[str, type[_Flaky]]) -> None:
    url, handler = flaky
    client = HubClient(url, "t" * 20, retry_pauses_s=(0.01, 0.01, 0.01))
    with pytest.raises(ApiError) as raised:
        client.post("/v1/workloads", {"name": "w"})
    assert raised.value.status == 503 and handler.calls == ["POST"]


def test_retries_give_up_within_their_budget(flaky: tuple[str, type[_Flaky]]) -> None:
    url, handler = flaky
    handler.failures = 100
    client = HubClient(url, "t" * 20, retry_pauses_s=(0.01,))
    with pytest.raises(ApiError, match="UNAVAILABLE"):
        client.get("/v1/projects")
    assert handler.calls == ["GET", "GET"]


def test_the_retry_budget_comes_from_the_environment() -> None:
    assert sum(config.retry_pauses({})) <= config.DEFAULT_RETRY_S
    assert config.retry_pauses({"WINGSMITH_RETRY_S": "0"}) == ()
    assert config.retry_pauses({"WINGSMITH_RETRY_S": "1"}) == (0.2, 0.5)
    with pytest.raises(UsageError, match="WINGSMITH_RETRY_S"):
        config.retry_pauses({"WINGSMITH_RETRY_S": "soon"})
