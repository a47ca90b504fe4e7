"""Identical REST list calls share one read (hub/api/coalesce.py), and still read their own
writes: with pollers listing the same page back to back, a workload whose creation was
acknowledged before a list request is in that list's answer, every time (docs/rest.md
"Identical list reads share one read")."""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any

import pytest

from hub.api import coalesce
from hub.service import deployments
from tests.harness import ADMIN_TOKEN, Hub
from tests.harness import workload as workload_body

PAGE = "/v1/deployments?page_size=1000"
POLLERS = 8
# Each list read holds on to its answer this long after reading it: a read is nearly always
# in flight when a write is acknowledged, so a request that joined it would read stale.
SLOW_READ_S = 0.05


def _get(hub: Hub, path: str) -> bytes:
    request = urllib.request.Request(
        f"http://127.0.0.1:{hub.http_port}{path}",
        headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        body: bytes = response.read()
        return body


def test_a_write_acknowledged_before_a_list_request_is_in_its_answer(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared: list[int] = []
    begin_next = coalesce.Coalescer._begin_next

    def counted(self: coalesce.Coalescer[Any], key: Any) -> None:
        if self._keys[key].next is not None:
            shared.append(1)  # a read that requests waited for, beginning after they arrived
        begin_next(self, key)

    monkeypatch.setattr(coalesce.Coalescer, "_begin_next", counted)
    list_page = deployments.list_page

    def slow_list_page(*args: Any, **kwargs: Any) -> Any:
        page = list_page(*args, **kwargs)
        time.sleep(SLOW_READ_S)
        return page

    monkeypatch.setattr(deployments, "list_page", slow_list_page)
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=1000)
    stop = threading.Event()
    failures: list[BaseException] = []

    def poll() -> None:
        try:
            while not stop.is_set():
                _get(hub, PAGE)
        except BaseException as e:  # reported below
            failures.append(e)

    pollers = [threading.Thread(target=poll, daemon=True) for _ in range(POLLERS)]
    for poller in pollers:
        poller.start()
    try:
        for i in range(30):
            name = f"w{i}"
            hub.post("/v1/workloads", workload_body(name, replicas=1, tp=1, clusters=("east",)))
            # Acknowledged: the very next list, whatever reads are in flight, must show it.
            assert f'"workload_name": "{name}"'.encode() in _get(hub, PAGE), name
    finally:
        stop.set()
        for poller in pollers:
            poller.join(timeout=60)
    assert not failures, failures[0]
    assert shared, "the pollers' identical reads never shared one: the test proved nothing"
