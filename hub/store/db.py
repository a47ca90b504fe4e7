"""The SQLite backend of the store (hub/store/port.py): connection settings, transactions and
versioned migrations.

The embedded default: one hub, one file. Settings:
- WAL journal, foreign keys on, busy timeout 5 s;
- synchronous=NORMAL by default: in WAL mode a committed transaction survives a crash or a
  kill -9 of the hub (only a power loss or OS crash can lose the last ones); `synchronous=FULL`
  makes commits survive those too, at one fsync per commit.

Writes go through `write()`, which opens BEGIN IMMEDIATE on the one writing connection: the
write lock is taken before the first read, so a read-decide-write sequence (admission) can
never interleave with another writer, in this process or another one on the same file. Reads
that must be consistent across statements use `read()`: one deferred transaction, a stable
snapshot in WAL mode, on a read-only connection of the calling thread's own. So a read never
waits for a write: the stream sessions on the event loop keep reading desired state while a
control call or an ingest transaction writes in a worker thread. A read sees what was
committed when it began; a write transaction must not call `read()` expecting to see its own
uncommitted changes (it uses its own connection for that).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import pathlib
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from hub import errors
from hub.store import port

log = logging.getLogger(__name__)

# The transaction type the store's functions take (kept under its old name for callers).
Connection = port.Transaction

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql\Z")
SYNCHRONOUS_MODES = ("NORMAL", "FULL")


class SqliteTransaction:
    """A transaction on one sqlite3 connection, as the store's functions see it."""

    __slots__ = ("_conn",)
    dialect = port.SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.IntegrityError as e:
            raise port.IntegrityError(str(e)) from e

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self._conn.executemany(sql, rows)
        except sqlite3.IntegrityError as e:
            raise port.IntegrityError(str(e)) from e

    def serialize(self, key: str) -> None:
        # BEGIN IMMEDIATE already holds the database's one write lock.
        return None

    def try_serialize(self, key: str) -> bool:
        return True

    def notify(self, channel: str, payload: str) -> None:
        # One hub per SQLite file: it publishes its own changes in memory.
        return None


class Database:
    """The SQLite store (port.Store)."""

    dialect = port.SQLITE
    shared = False

    def __init__(
        self, path: str | pathlib.Path, *, synchronous: str = "NORMAL", busy_timeout_s: float = 5.0
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}")
        self.path = str(path)
        self.url = self.path
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        # Read connections, one per thread that reads (the event loop, worker threads).
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        try:
            self._conn = self._connect()
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        except sqlite3.Error as e:
            raise errors.StoreError(f"cannot open database {self.path}: {e}") from e
        self.schema_version = migrate(self._conn)
        self.epoch = self._ensure_epoch()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def listen(
        self,
        channels: Sequence[str],
        on_notify: port.OnNotify,
        on_reconnect: Callable[[], None],
    ) -> port.Listening:
        return port.NotListening()

    def close(self) -> None:
        with self._lock, self._readers_lock:
            self._closed = True
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._conn.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[SqliteTransaction]:
        """One write transaction (BEGIN IMMEDIATE); commits on success, rolls back on error."""
        with self._lock:
            self._begin("BEGIN IMMEDIATE")
            try:
                yield SqliteTransaction(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as e:
                self._conn.execute("ROLLBACK")
                raise errors.StoreError(f"commit failed: {e}") from e

    @contextlib.contextmanager
    def read(self) -> Iterator[SqliteTransaction]:
        """One read transaction on this thread's read connection: every statement sees the
        same snapshot, and no writer is waited for."""
        conn = self._reader()
        _begin(conn, "BEGIN")
        try:
            yield SqliteTransaction(conn)
        finally:
            conn.execute("COMMIT")

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._readers_lock:
            if self._closed:
                raise errors.StoreError(f"database {self.path} is closed")
            try:
                conn = self._connect()
                # Enforced by SQLite: a read connection can never write by mistake.
                conn.execute("PRAGMA query_only=ON")
            except sqlite3.Error as e:
                raise errors.StoreError(f"cannot open database {self.path}: {e}") from e
            self._readers.append(conn)
        self._local.conn = conn
        return conn

    def _begin(self, statement: str) -> None:
        _begin(self._conn, statement)

    def _ensure_epoch(self) -> str:
        with self.write() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'store_epoch'").fetchone()
            if row:
                return str(row["value"])
            epoch = "se_" + secrets.token_hex(8)
            conn.execute("INSERT INTO meta (key, value) VALUES ('store_epoch', ?)", (epoch,))
            return epoch


def _begin(conn: sqlite3.Connection, statement: str) -> None:
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as e:
        raise errors.StoreError(f"database busy: {e}") from e


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every shipped migration, in order."""
    found = []
    for entry in importlib.resources.files("hub.store.migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text()))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 0001.. without gaps, found {versions}")
    return found


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the database's version; return the version."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    shipped = migrations()
    if current > len(shipped):
        raise errors.StoreError(
            f"database schema version {current} is newer than this hub knows ({len(shipped)}): "
            "upgrade the hub"
        )
    for version, name, sql in shipped[current:]:
        log.info("applying migration %s", name)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, time.time()),
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        current = version
    return int(current)


def statements(sql: str) -> Iterator[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    buffer = ""
    for line in sql.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            if statement:
                yield statement
            buffer = ""
    if buffer.strip():
        raise RuntimeError(f"incomplete SQL statement in migration: {buffer.strip()[:80]}")
