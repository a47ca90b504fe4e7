"""Fixtures for integration tests: a real hub per test, and agents stopped afterwards; and
every REST list page a test's hub answers checked against the message path's bytes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from hub.api import convert, jsonmap, jsonview, listings
from tests.harness import Hub, LoopThread, SimAgent, running_hub, start_agent


@pytest.fixture(autouse=True)
def rest_lists_checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Each REST list page answered in the test (its JSON made straight from the views,
    hub/api/jsonview.py) is compared, byte for byte, with jsonmap.to_json of the message gRPC
    would answer from the same views; the test fails on a difference. Yields the pages
    compared: (response type, items)."""
    compared: list[tuple[str, int]] = []
    differences: list[str] = []
    respond = listings.respond

    def checked(
        listing: listings.Listing[Any, Any],
        found: Sequence[Any],
        token: str,
        output: convert.Output = convert.MESSAGES,
    ) -> Any:
        answer = respond(listing, found, token, output)
        if isinstance(answer, jsonview.Document):
            message = respond(listing, found, token, convert.MESSAGES)
            direct, by_message = json.dumps(answer.body), json.dumps(jsonmap.to_json(message))
            if direct != by_message:
                differences.append(f"{answer.type_name}:\n{direct}\n!=\n{by_message}")
            compared.append((answer.type_name, len(found)))
        return answer

    monkeypatch.setattr(listings, "respond", checked)
    yield compared
    assert not differences, differences[0]


@pytest.fixture
def env(tmp_path: Any) -> Iterator[tuple[LoopThread, Hub]]:
    with running_hub(tmp_path) as pair:
        yield pair


@pytest.fixture
def hub(env: tuple[LoopThread, Hub]) -> Hub:
    return env[1]


@pytest.fixture
def agents(env: tuple[LoopThread, Hub]) -> Iterator[Callable[..., SimAgent]]:
    loop, hub = env
    started: list[SimAgent] = []

    def start(**kwargs: Any) -> SimAgent:
        agent = start_agent(loop, hub, **kwargs)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()
