"""Fixtures for integration tests: a real hub per test, and agents stopped afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.harness import Hub, LoopThread, SimAgent, running_hub, start_agent


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
