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

Write locks: the order and its checks are hub/store/locks.py's (`Locks`, `check_held`,
`WiderScope`); the helpers the table modules share to build SQL (`chunks`, `marks`,
`write_rows`, `Where`) are hub/store/sql.py's. This module names both for its callers.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from hub import errors
from hub.store.locks import (
    DEVICES,
    FLEET,
    MAX_SCOPED_CLUSTERS,
    WATCH,
    WIDER_ATTEMPTS,
    LockOrderError,
    Locks,
    WiderScope,
    admission_lock,
    check_held,
    cluster_lock,
    lock_clusters,
    project_lock,
    retry_wider,
    scope_of,
)
from hub.store.sql import (
    IN_CHUNK,
    KEYS_IN,
    PARAMS_PER_STATEMENT,
    ROWS_PER_STATEMENT,
    Where,
    among,
    chunks,
    marks,
    row_chunks,
    write_rows,
)

# The seam, and what it names of the lock order (hub/store/locks.py) and the SQL helpers
# (hub/store/sql.py): callers import all of it from here.
__all__ = [
    "DEVICES",
    "FLEET",
    "IN_CHUNK",
    "KEYS_IN",
    "MAX_SCOPED_CLUSTERS",
    "PARAMS_PER_STATEMENT",
    "POSTGRES",
    "POSTGRES_SCHEMES",
    "ROWS_PER_STATEMENT",
    "SQLITE",
    "WATCH",
    "WIDER_ATTEMPTS",
    "Cursor",
    "Dialect",
    "IntegrityError",
    "Listening",
    "LockOrderError",
    "Locks",
    "NotListening",
    "OnNotify",
    "PostgresDialect",
    "Row",
    "Store",
    "Transaction",
    "Where",
    "WiderScope",
    "admission_lock",
    "among",
    "check_held",
    "chunks",
    "cluster_lock",
    "is_postgres",
    "lock_clusters",
    "marks",
    "open_store",
    "project_lock",
    "retry_wider",
    "row_chunks",
    "scope_of",
    "sqlite_path",
    "undone",
    "write_rows",
]


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

    def replace_rows(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        """`replace` for many rows at once: the statement for `write_rows` (its `{rows}`)."""
        return _replace(self.name, table, tuple(columns), tuple(key), rows=True)

    def label_pairs(self, labels: str) -> str:
        """A table of (key, value) text rows, aliased `l`, from the SQL expression `labels`
        (a column or scalar subquery holding a JSON object; NULL reads as no labels)."""
        return f"json_each(COALESCE({labels}, '{{}}')) AS l"

    def keys_in(
        self,
        table: str,
        columns: Sequence[str],
        keys: Iterable[tuple[str, ...]],
        *,
        alias: str = "",
    ) -> Iterator[tuple[str, list[Any]]]:
        """A WHERE condition keeping the rows of `table` (named `alias` in the statement, if
        given) whose `columns` (text) are one of `keys`, in chunks: (condition, parameters) per
        statement, each answered by searches of an index of `table` led by `columns`, never
        by a scan of the whole table (ingest's deletes and reads keyed by node, deployment or
        cluster: docs/benchmark.md "Ingest and reads at scale"). SQLite: the keys as rows
        behind a SELECT (`KEYS_IN`)."""
        names = ", ".join(f"{alias}.{c}" if alias else c for c in columns)
        for values, params in row_chunks(sorted(set(keys))):
            yield f"({names}) " + KEYS_IN.format(rows=values), params


@functools.lru_cache(maxsize=64)
def _replace(
    engine: str, table: str, columns: tuple[str, ...], key: tuple[str, ...], *, rows: bool = False
) -> str:
    values = "{rows}" if rows else f"VALUES ({', '.join('?' * len(columns))})"
    names = ", ".join(columns)
    if engine == "sqlite":
        return f"INSERT OR REPLACE INTO {table} ({names}) {values}"
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({names}) {values}"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


class PostgresDialect(Dialect):
    name = "postgresql"
    # SQLite's INTEGER is 64-bit and REAL a double; PostgreSQL's INTEGER is 32-bit (observe_ns
    # would overflow) and REAL single precision (timestamps would lose seconds).
    _TYPES = ((re.compile(r"\bINTEGER\b"), "BIGINT"), (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"))
    _STRICT = re.compile(r"\)\s*STRICT\s*;?\s*$")
    # SQLite's rowid alias with AUTOINCREMENT (ids never reused) -> an identity column.
    _AUTOINCREMENT = re.compile(r"\bBIGINT PRIMARY KEY AUTOINCREMENT\b")
    # SQLite's JSON functions in data migrations: json_object(k, v, ..) builds a document and
    # json(text) embeds a JSON text as a value rather than as a string.
    _JSON = (
        (re.compile(r"\bjson_object\("), "json_build_object("),
        (re.compile(r"\bjson\((\w+)\)"), r"CAST(\1 AS json)"),
    )

    def greatest(self, a: str, b: str) -> str:
        return f"GREATEST({a}, {b})"

    def label_pairs(self, labels: str) -> str:
        return f"jsonb_each_text(CAST(COALESCE({labels}, '{{}}') AS jsonb)) AS l"

    def keys_in(
        self,
        table: str,
        columns: Sequence[str],
        keys: Iterable[tuple[str, ...]],
        *,
        alias: str = "",
    ) -> Iterator[tuple[str, list[Any]]]:
        # PostgreSQL (15) answers every plain form of a many-key match, `(a, b) IN (VALUES ..)`,
        # the same behind a SELECT, `IN (SELECT * FROM unnest(..))`, `USING unnest(..)`,
        # `a = ANY(array)`, by a scan of the whole table for a group's hundred or more keys,
        # analyzed or not (ingest's allocations DELETE: 11 ms a statement with 64,000 stored at
        # 2,000 clusters, against 0.5-3 ms by the index). Each key looked up in a LATERAL
        # subquery with LIMIT 1 gives the planner one row a key, whatever its statistics: a
        # nested loop of index searches. The keys go as one array per column, so a chunk's
        # statement text is the same whatever its count.
        items = sorted(set(keys))
        condition = _lateral_keys(table, tuple(columns), alias)
        for start in range(0, len(items), ROWS_PER_STATEMENT):
            part = items[start : start + ROWS_PER_STATEMENT]
            yield condition, [list(column) for column in zip(*part, strict=True)]

    def ddl(self, statement: str) -> str:
        for pattern, replacement in self._TYPES:
            statement = pattern.sub(replacement, statement)
        statement = self._AUTOINCREMENT.sub(
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", statement
        )
        for pattern, replacement in self._JSON:
            statement = pattern.sub(replacement, statement)
        return self._STRICT.sub(")", statement)


@functools.lru_cache(maxsize=32)
def _lateral_keys(table: str, columns: tuple[str, ...], alias: str) -> str:
    names = ", ".join(columns)
    outer = ", ".join(f"{alias}.{c}" if alias else c for c in columns)
    arrays = ", ".join("CAST(? AS text[])" for _ in columns)
    aliases = ", ".join(f"k{i}" for i in range(len(columns)))
    match = " AND ".join(f"{c} = k.k{i}" for i, c in enumerate(columns))
    return (
        f"({outer}) IN (SELECT {', '.join(f'x.{c}' for c in columns)}"
        f" FROM unnest({arrays}) AS k({aliases})"
        f" CROSS JOIN LATERAL (SELECT {names} FROM {table} WHERE {match} LIMIT 1) AS x)"
    )


SQLITE = Dialect()
POSTGRES = PostgresDialect()


class Transaction(Protocol):
    """One open transaction. Table modules take it as their first argument (`conn`)."""

    @property
    def dialect(self) -> Dialect: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def pipeline(self) -> AbstractContextManager[None]:
        """A block of statements whose results it does not read, each sent without waiting
        for the one before to finish: on PostgreSQL the server runs one while the hub builds
        and sends the next (psycopg's pipeline mode); on SQLite, in the process, each runs at
        once. An error of any of them is raised as `execute` raises it, at the latest as the
        block ends, and the block's later statements then did not run: the transaction fails
        as it would have at that statement."""
        ...

    @property
    def locks(self) -> Locks:
        """The write locks this transaction holds (none taken on a read)."""
        ...

    def serialize(self, key: str) -> None:
        """Hold, until this transaction ends, the lock named `key` (`ADMISSION`, `WATCH`,
        `cluster_lock(id)`): a concurrent transaction asking for it waits. LockOrderError when
        it comes before a lock already held (the order: hub/store/locks.py). Every write
        on SQLite is already serialized (BEGIN IMMEDIATE): there it is only recorded."""
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

    def write(self, clusters: Iterable[str] | None = None) -> AbstractContextManager[Transaction]:
        """A read-decide-write transaction; commits on success, rolls back on error. It
        begins holding the fleet lock shared and the locks of `clusters` (ascending), or, with
        `clusters` None, the fleet lock exclusively (covering every other lock). A lock wait
        that ends in a deadlock or a timeout is `errors.StoreBusy` (retry)."""
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


_UNDO = "wingsmith_undo"


@contextlib.contextmanager
def undone(conn: Transaction) -> Iterator[None]:
    """Run the block inside `conn`'s open transaction, then undo what it wrote and keep the
    transaction open, so what was there before reads again at the same moment (a dry run's
    before and after). A savepoint: the same SQL on both engines. When the block raises, its
    writes are left to the transaction's own rollback."""
    conn.execute(f"SAVEPOINT {_UNDO}")
    yield
    conn.execute(f"ROLLBACK TO SAVEPOINT {_UNDO}")
    conn.execute(f"RELEASE SAVEPOINT {_UNDO}")


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
