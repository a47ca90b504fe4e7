"""Fixtures: the kustomize builds of deploy/ (hub, agent, read-only agent) and one client
`ApiClient` for schema checks (it opens no connection)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from tests.unit.deploy import manifests

Build = list[dict[str, Any]]


@pytest.fixture(scope="session")
def api() -> Iterator[kubernetes.client.ApiClient]:
    with kubernetes.client.ApiClient() as client:
        yield client


@pytest.fixture(scope="session")
def hub_build() -> Build:
    return manifests.build(manifests.DEPLOY / "hub")


@pytest.fixture(scope="session")
def agent_build() -> Build:
    return manifests.build(manifests.DEPLOY / "agent")


@pytest.fixture(scope="session")
def read_only_build() -> Build:
    return manifests.build(manifests.DEPLOY / "agent" / "read-only")
