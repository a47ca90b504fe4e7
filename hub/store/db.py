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

Faults are told as such (`store_error`, the one place that reads SQLite's result codes): a
full disk, an I/O error or a read-only file is `StoreCannotWrite`, a damaged file
`StoreCorrupt`, a lock held past the busy timeout `StoreError`; all UNAVAILABLE / 503 with a
message that says what to do. A failed write leaves nothing behind (its transaction is rolled
back), reads keep working, and the next write after the cause is gone succeeds. At open the
file is checked first: an empty file is refused unless `init=True` (`wingsmith hub
--init-db`), a file that is not a database or fails `PRAGMA quick_check` is refused.
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

    __slots__ = ("_conn", "_locks")
    dialect = port.SQLITE

    def __init__(self, conn: sqlite3.Connection, locks: port.Locks | None = None) -> None:
        self._conn = conn
        self._locks = locks or port.Locks(covering=False)

    @property
    def locks(self) -> port.Locks:
        return self._locks

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

    def pipeline(self) -> contextlib.AbstractContextManager[None]:
        # In the process, a statement has no round trip to save: each runs at once.
        return contextlib.nullcontext()

    def serialize(self, key: str) -> None:
        # BEGIN IMMEDIATE already holds the database's one write lock: recorded (the order is
        # checked on both backends), never taken.
        self._locks.take(key)

    def try_serialize(self, key: str) -> bool:
        return True

    def notify(self, channel: str, payload: str) -> None:
        # One hub per SQLite file: it publishes its own changes in memory.
        return None


# SQLite's primary result codes (the low byte of the extended code), grouped by what the
# operator has to do about them.
_CANNOT_WRITE = {
    3: "SQLITE_PERM",
    8: "SQLITE_READONLY",
    10: "SQLITE_IOERR",
    13: "SQLITE_FULL",
    14: "SQLITE_CANTOPEN",
}
_CORRUPT = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}
_BUSY = {5: "SQLITE_BUSY", 6: "SQLITE_LOCKED"}
_SQLITE_FULL = 13
_SQLITE_IOERR = 10


def store_error(error: sqlite3.Error, *, path: str) -> errors.StoreError:
    """The hub error for a SQLite failure that is not the caller's doing."""
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    if code in _CANNOT_WRITE:
        return errors.StoreCannotWrite(f"the store cannot write ({error}): {_what_to_do(code)}")
    if code in _CORRUPT:
        return errors.StoreCorrupt(
            f"database {path} is damaged or not a database ({error}): restore it from a backup"
        )
    if code in _BUSY:
        return errors.StoreError(f"database busy ({error}): retry")
    return errors.StoreError(f"database error ({error})")


def _what_to_do(code: int) -> str:
    """What is wrong and what to do, by SQLite's result code: only a full disk clears by
    itself; a read-only or unwritable file, or an I/O error, needs the operator."""
    if code == _SQLITE_FULL:
        return (
            "the disk is full: free space on the database's volume; reads still work, and"
            " writes resume by themselves once there is space"
        )
    if code == _SQLITE_IOERR:
        return (
            "an I/O error on the database's volume: check the disk and the kernel log (dmesg);"
            " writes fail until it is fixed, then restart the hub"
        )
    return (
        "the database file, its -wal and -shm files or their directory cannot be written:"
        " the volume is mounted read-only or the hub's user lacks write permission. Mount the"
        " volume read-write (for Kubernetes: a ReadWriteOnce PersistentVolumeClaim, not"
        " readOnly), give the hub's user write access to the file and its directory, then"
        " start the hub again"
    )


def _ours(error: sqlite3.Error) -> bool:
    """A failure of the store itself, not a bug of ours (a constraint, a bad statement)."""
    return not isinstance(error, sqlite3.IntegrityError | sqlite3.ProgrammingError)


def _check_file(path: str, *, init: bool) -> None:
    file = pathlib.Path(path)
    if file.is_file() and file.stat().st_size == 0 and not init:
        raise errors.StoreError(
            f"database {path} is an empty file, not a Wingsmith database: name the right file,"
            " or pass --init-db to create a new database in it"
        )


class Database:
    """The SQLite store (port.Store)."""

    dialect = port.SQLITE
    shared = False

    def __init__(
        self,
        path: str | pathlib.Path,
        *,
        synchronous: str = "NORMAL",
        busy_timeout_s: float = 5.0,
        init: bool = False,
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}")
        self.path = str(path)
        self.url = self.path
        _check_file(self.path, init=init)
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
            self._quick_check()
            self.schema_version = migrate(self._conn)
        except sqlite3.Error as e:
            raise store_error(e, path=self.path) from e
        self.epoch = self._ensure_epoch()

    def _quick_check(self) -> None:
        """Refuse a damaged file at start, rather than serve 500s from it later. quick_check
        reads every page once (seconds for a few GB), without the index cross-checks of
        integrity_check."""
        problems = [row[0] for row in self._conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise errors.StoreCorrupt(
                f"database {self.path} failed its integrity check ({'; '.join(problems)}):"
                " restore it from a backup"
            )

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
    def write(self, clusters: Iterable[str] | None = None) -> Iterator[SqliteTransaction]:
        """One write transaction (BEGIN IMMEDIATE); commits on success, rolls back on error.
        The scoped locks (locks.py) are recorded and checked, not taken: one writer already."""
        scope = port.scope_of(clusters)
        locks = port.Locks(covering=scope is None)
        locks.begin(scope or ())
        with self._lock:
            self._begin("BEGIN IMMEDIATE")
            try:
                yield SqliteTransaction(self._conn, locks)
            except sqlite3.Error as e:
                self._rollback()
                if _ours(e):
                    raise store_error(e, path=self.path) from e
                raise
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise store_error(e, path=self.path) from e

    def _rollback(self) -> None:
        # SQLite may have rolled back already (a full disk does): nothing left to undo then.
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def read(self) -> Iterator[SqliteTransaction]:
        """One read transaction on this thread's read connection: every statement sees the
        same snapshot, and no writer is waited for."""
        conn = self._reader()
        _begin(conn, "BEGIN", path=self.path)
        try:
            yield SqliteTransaction(conn)
        except sqlite3.Error as e:
            if _ours(e):
                raise store_error(e, path=self.path) from e
            raise
        finally:
            with contextlib.suppress(sqlite3.Error):
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
                raise store_error(e, path=self.path) from e
            self._readers.append(conn)
        self._local.conn = conn
        return conn

    def _begin(self, statement: str) -> None:
        _begin(self._conn, statement, path=self.path)

    def _ensure_epoch(self) -> str:
        with self.write() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'store_epoch'").fetchone()
            if row:
                return str(row["value"])
            epoch = "se_" + secrets.token_hex(8)
            conn.execute("INSERT INTO meta (key, value) VALUES ('store_epoch', ?)", (epoch,))
            return epoch


def _begin(conn: sqlite3.Connection, statement: str, *, path: str) -> None:
    try:
        conn.execute(statement)
    except sqlite3.Error as e:
        raise store_error(e, path=path) from e


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
