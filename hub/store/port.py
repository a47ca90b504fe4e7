"""The store seam: what the service layer may ask of a database, whatever the backend.

A `Store` opens transactions; a `Transaction` runs the SQL of the table modules (hub/store/*.py)
and returns rows that read by column name or position. Two backends implement it:
- SQLite (hub/store/db.py): the embedded default, one hub, one file;
- PostgreSQL (hub/store/postgres.py): several hubs on one database (docs/architecture.md).

The table modules write their SQL once, in the subset both engines share: `?` placeholders
(the PostgreSQL backend rewrites them), `INSERT .. ON CONFLICT`, no SQLite-only functions;
where the engines differ (the two-argument maximum, replacing a whole row), they ask the
transaction's `Dialect`.
Migrations are written once too (hub/store/migrations), with SQLite's type names; the
`Dialect` translates them for PostgreSQL (`ddl`).

`open_store(url)` picks the backend: a file path (or `sqlite:///path`) or `postgresql://...`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from hub import errors


class IntegrityError(errors.StoreError):
    """A constraint refused a write (unique key, foreign key, check); the backend's own error
    type never leaves the backend."""


class Row(Protocol):
    def __getitem__(self, key: str | int) -> Any: ...


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Dialect:
    """Where the SQL of the two engines differs, as small pieces the table modules compose."""

    name = "sqlite"

    def greatest(self, a: str, b: str) -> str:
        """The larger of two values (SQLite's two-argument MAX)."""
        return f"MAX({a}, {b})"

    def ddl(self, statement: str) -> str:
        """A migration statement in this engine's terms (the files use SQLite's)."""
        return statement

    def replace(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        """Insert a row, or replace every column of the row with the same `key`. SQLite's
        REPLACE (delete, then insert) is measurably faster there than an upsert that updates
        every column (the ingest of devices: about 20%), so each engine gets its fastest."""
        return _replace(self.name, table, tuple(columns), tuple(key))


@functools.lru_cache(maxsize=64)
def _replace(engine: str, table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
    marks = ", ".join("?" * len(columns))
    names = ", ".join(columns)
    if engine == "sqlite":
        return f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({names}) VALUES ({marks})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


class PostgresDialect(Dialect):
    name = "postgresql"
    # SQLite's INTEGER is 64-bit and REAL a double; PostgreSQL's INTEGER is 32-bit (observe_ns
    # would overflow) and REAL single precision (timestamps would lose seconds).
    _TYPES = ((re.compile(r"\bINTEGER\b"), "BIGINT"), (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"))
    _STRICT = re.compile(r"\)\s*STRICT\s*;?\s*$")

    def greatest(self, a: str, b: str) -> str:
        return f"GREATEST({a}, {b})"

    def ddl(self, statement: str) -> str:
        for pattern, replacement in self._TYPES:
            statement = pattern.sub(replacement, statement)
        return self._STRICT.sub(")", statement)


SQLITE = Dialect()
POSTGRES = PostgresDialect()


class Transaction(Protocol):
    """One open transaction. Table modules take it as their first argument (`conn`)."""

    @property
    def dialect(self) -> Dialect: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def serialize(self, key: str) -> None:
        """Hold, until this transaction ends, the lock named `key` (admission of a project, the
        ownership of a cluster): a concurrent transaction asking for it waits. Every write on
        SQLite is already serialized (BEGIN IMMEDIATE), so there it costs nothing."""
        ...

    def try_serialize(self, key: str) -> bool:
        """Take the lock named `key` until this transaction ends if it is free; False when
        another transaction (of another hub) holds it: singleton work skips its turn."""
        ...

    def notify(self, channel: str, payload: str) -> None:
        """Tell every hub listening on `channel` (Store.listen), once this transaction commits
        (never if it rolls back). Nothing to tell on a store only one hub opens."""
        ...


class Listening(Protocol):
    def close(self) -> None: ...


# (channel, payload) of one notification
OnNotify = Callable[[str, str], None]


class Store(Protocol):
    """A database: migrations applied when opened; transactions opened by the service layer."""

    url: str
    epoch: str
    schema_version: int
    # Several hubs may open it at once (PostgreSQL); SQLite is one hub's.
    shared: bool

    @property
    def dialect(self) -> Dialect: ...

    def write(self) -> AbstractContextManager[Transaction]:
        """A read-decide-write transaction; commits on success, rolls back on error."""
        ...

    def read(self) -> AbstractContextManager[Transaction]:
        """A consistent snapshot for reading; never waits for a writer."""
        ...

    def listen(
        self, channels: Sequence[str], on_notify: OnNotify, on_reconnect: Callable[[], None]
    ) -> Listening:
        """Call `on_notify` (from a thread of the store's) for every notification committed on
        `channels` by any hub, this one included; `on_reconnect` after the listening connection
        was (re)established, when notifications may have been lost meanwhile."""
        ...

    def close(self) -> None: ...


class NotListening:
    """The Listening of a store no other hub shares: there is nothing to hear."""

    def close(self) -> None:
        return None


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


def sqlite_path(url: str) -> str:
    """The file of a SQLite URL (`sqlite:///abs/path`, `sqlite:relative`) or plain path."""
    for prefix in ("sqlite:///", "sqlite://", "sqlite:"):
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            return "/" + rest if prefix == "sqlite:///" else rest
    return url


def open_store(url: str, **options: Any) -> Store:
    """The store at `url`: a PostgreSQL URL, or else a SQLite file. `options` are the
    backend's own settings (SQLite: synchronous, busy_timeout_s; PostgreSQL: pool_size)."""
    if is_postgres(url):
        from hub.store.postgres import PostgresStore

        return PostgresStore(url, **options)
    from hub.store.db import Database

    return Database(sqlite_path(url), **options)
