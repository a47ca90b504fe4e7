"""Fixtures for every test: `store_url`, one store per backend (SQLite, PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import stores


@pytest.fixture(params=stores.BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store; tests taking it run once on each backend."""
    return stores.store_url(tmp_path, str(request.param))


def pytest_sessionfinish(session: pytest.Session) -> None:
    stores.stop_pg_server()
