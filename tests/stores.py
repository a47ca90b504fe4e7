"""Stores for tests: a SQLite file, or a fresh database on one throwaway PostgreSQL server.

The server (tools/pgserver.py) starts on first use, once per test process, and stops when the
process ends (tests/conftest.py stops it at the end of the session). Each test gets a database
of its own, so tests never see each other's rows.

`WINGSMITH_TEST_STORE=postgres` makes `default_store_url` (the integration tests' hubs) use
PostgreSQL; unset or `sqlite`, the hubs use a SQLite file as before.
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
from pathlib import Path

import pytest

from tools.pgserver import PgServer

BACKENDS = ("sqlite", "postgres")
ENV_BACKEND = "WINGSMITH_TEST_STORE"

_server: PgServer | None = None
_lock = threading.Lock()
_names = itertools.count(1)


def pg_server() -> PgServer:
    global _server
    with _lock:
        if _server is None:
            _server = PgServer._start()
            atexit.register(stop_pg_server)
        return _server


def stop_pg_server() -> None:
    global _server
    with _lock:
        if _server is not None:
            _server.stop()
            _server = None


def store_url(tmp_path: Path, backend: str, name: str = "hub") -> str:
    """A new, empty store of `backend` (the SQLite file lives in `tmp_path`)."""
    if backend == "sqlite":
        return str(tmp_path / f"{name}.db")
    if backend == "postgres":
        return pg_server().create_database(f"t{os.getpid()}_{next(_names)}")
    raise ValueError(f"unknown store backend {backend!r}; expected one of {BACKENDS}")


def default_backend() -> str:
    backend = os.environ.get(ENV_BACKEND, "sqlite") or "sqlite"
    if backend not in BACKENDS:
        raise ValueError(f"${ENV_BACKEND} must be one of {BACKENDS}, got {backend!r}")
    return backend


def default_store_url(tmp_path: Path, name: str = "hub") -> str:
    return store_url(tmp_path, default_backend(), name)


# For a test whose mechanics are SQLite's own (its file, its locks, its trace callback) and
# whose promise another test shows on PostgreSQL: skipped when the hubs run on PostgreSQL.
sqlite_mechanics = pytest.mark.skipif(
    default_backend() != "sqlite",
    reason="exercises SQLite's own file, locks or tracing ($WINGSMITH_TEST_STORE=postgres)",
)
