"""The PostgreSQL backend of the store (hub/store/port.py): several hubs on one database.

psycopg 3 with its connection pool. The table modules' SQL is shared with SQLite; here:
- placeholders: `?` becomes `%s` (and a literal `%` is doubled), once per statement text;
- values: Python booleans are written as 0/1 (the schema keeps SQLite's integer flags), and
  NUMERIC results (PostgreSQL's SUM of a BIGINT) are read back as int;
- rows read by column name or position, as sqlite3.Row does;
- constraint violations leave as port.IntegrityError.

Writes: READ COMMITTED, holding transaction-scoped advisory locks scoped to what the
read-decide-write reads and writes, in the order of hub/store/locks.py (docs/architecture.md
"Write locks"): the fleet lock (`FLEET_LOCK`) shared, then the cluster locks in the order of
their keys, in one statement as the transaction begins; or the fleet lock exclusive (the
covering lock) for a write that names no scope. Later, `serialize` takes the project,
admission and watch locks. So writes of different clusters run at once on every hub, and a
read-decide-write sequence (admission against a quota, a revision bump, a leadership term)
never interleaves with another that reads or writes the same things. A deadlock PostgreSQL
breaks (40P01) or a lock wait that timed out (55P03) leaves as errors.StoreBusy, never a bare
psycopg error.
The fleet lock is the key the single write lock had: a hub of the previous version (taking it
exclusively for every write) and one of this version exclude each other correctly while a
fleet is upgraded one hub at a time.
Reads: REPEATABLE READ, READ ONLY: one snapshot for every statement of the read, no waiting for
writers (MVCC).

Migrations run under a session advisory lock, so hubs starting together apply each once; a
database whose schema is newer than the hub is refused.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import psycopg
import psycopg.adapt
import psycopg.errors
import psycopg.postgres
import psycopg_pool

from hub import errors
from hub.store import db as sqlite_store
from hub.store import port

log = logging.getLogger(__name__)

# Advisory lock keys (64-bit, chosen once; any value unused by other applications sharing the
# database would do).
FLEET_LOCK = 0x57494E4753_0001  # every write: shared when scoped, exclusive when covering
MIGRATE_LOCK = 0x57494E4753_0002  # schema migrations at start
# Cluster locks: two-int keys (this space, hashtext(cluster id)), apart from the one-key locks.
CLUSTER_SPACE = 0x57470001
# The listening connection's name in pg_stat_activity.
LISTENER_NAME = "wingsmith-listen"


class PgRow:
    """A result row readable by column name or position (like sqlite3.Row)."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, int):
            return self._values[key]
        return self._values[self._index[key]]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    description = cursor.description or ()
    index = {column.name: i for i, column in enumerate(description)}

    def make(values: Sequence[Any]) -> PgRow:
        return PgRow(values, index)

    return make


class _IntegralNumericLoader(psycopg.adapt.Loader):
    """NUMERIC as int when integral: the schema's numbers are integers, and PostgreSQL widens
    SUM(BIGINT) to NUMERIC."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        try:
            return int(text)
        except ValueError:
            return float(text)


class _BoolAsIntDumper(psycopg.adapt.Dumper):
    """True/False as 1/0: the flag columns are integers (as in SQLite)."""

    oid = psycopg.postgres.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


@functools.lru_cache(maxsize=8192)
def translate(sql: str) -> str:
    """`?` placeholders as psycopg's `%s`; `%` doubled; quoted text left alone."""
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "?" and not quoted:
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


# Above this many parameters a statement goes as PostgreSQL's own `$n` placeholders through a
# raw cursor: psycopg caches its parse of `%s` only for short statements, and parses a long one
# (a multi-row upsert, port.write_rows) anew each time, placeholder by placeholder.
RAW_ABOVE = 50


@functools.lru_cache(maxsize=512)
def translate_raw(sql: str) -> str:
    """`?` placeholders as `$1, $2, ..`; quoted text left alone."""
    out: list[str] = []
    quoted = False
    n = 0
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "?" and not quoted:
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


def _execute_raw(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> Any:
    return psycopg.RawCursor(conn).execute(translate_raw(sql), params)


class PostgresTransaction:
    """A transaction on one pooled psycopg connection, as the store's functions see it."""

    __slots__ = ("_conn", "_locks")
    dialect = port.POSTGRES

    def __init__(self, conn: psycopg.Connection[Any], locks: port.Locks | None = None) -> None:
        self._conn = conn
        self._locks = locks or port.Locks(covering=False)

    @property
    def locks(self) -> port.Locks:
        return self._locks

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with _STORE_ERRORS:
            if len(params) > RAW_ABOVE:
                return _execute_raw(self._conn, sql, params)
            return self._conn.execute(translate(sql), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with _STORE_ERRORS, self._conn.cursor() as cursor:
            cursor.executemany(translate(sql), rows)

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[None]:
        # psycopg raises the first failed statement's own error as the block ends (a later
        # statement of the block is skipped by the server): mapped as `execute` maps it.
        with _STORE_ERRORS, self._conn.pipeline():
            yield

    def serialize(self, key: str) -> None:
        if self._locks.take(key):
            _lock(self._conn, *hold_statement(key))

    def try_serialize(self, key: str) -> bool:
        row = self._conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (key,))
        found = row.fetchone()
        return bool(found[0]) if found else False

    def notify(self, channel: str, payload: str) -> None:
        self._conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


# A lock wait PostgreSQL ended: a deadlock it broke, or lock_timeout.
_LOST_WAIT = (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable)


class _StoreErrors:
    """The statements' errors as the store's: a constraint violated leaves as
    port.IntegrityError, a lock wait PostgreSQL ended as errors.StoreBusy; any other as it
    is. A stateless context manager, one for every statement (cheaper than a generator's)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        if isinstance(error, psycopg.errors.IntegrityError):
            raise port.IntegrityError(str(error).strip()) from error
        if isinstance(error, _LOST_WAIT):
            raise _busy(error) from error


_STORE_ERRORS = _StoreErrors()


def _busy(e: psycopg.Error) -> errors.StoreBusy:
    return errors.StoreBusy(f"database busy: a lock wait was given up ({e}): retry")


def _lock(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> None:
    try:
        conn.execute(sql, params)
    except _LOST_WAIT as e:
        raise _busy(e) from e


def hold_statement(key: str) -> tuple[str, tuple[Any, ...]]:
    """The statement that takes the write lock named `key` (locks.py's names) until the
    transaction ends, as a hub takes it (tests hold one from outside with it)."""
    if key == port.FLEET:
        return "SELECT pg_advisory_xact_lock_shared(%s)", (FLEET_LOCK,)
    if key.startswith(port.cluster_lock("")):
        cluster_id = key[len(port.cluster_lock("")) :]
        return "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (CLUSTER_SPACE, cluster_id)
    return "SELECT pg_advisory_xact_lock(hashtext(%s))", (key,)


def _begin_locks(conn: psycopg.Connection[Any], locks: port.Locks, clusters: Iterable[str]) -> None:
    """The locks a write begins with: the fleet lock (exclusive when covering, else shared),
    then its clusters' locks in the order of their keys (so two writers of overlapping
    clusters never wait for each other in a cycle, even where two ids hash alike)."""
    if locks.covering:
        _lock(conn, "SELECT pg_advisory_xact_lock(%s)", (FLEET_LOCK,))
        return
    wanted = locks.begin(clusters)
    if not wanted:
        _lock(conn, *hold_statement(port.FLEET))
        return
    _lock(
        conn,
        "SELECT pg_advisory_xact_lock_shared(%s) FROM (SELECT 1) AS fleet"
        " UNION ALL SELECT pg_advisory_xact_lock(%s, key) FROM"
        " (SELECT DISTINCT hashtext(id) AS key FROM unnest(%s::text[]) AS id ORDER BY key) AS k",
        (FLEET_LOCK, CLUSTER_SPACE, wanted),
    )


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_loader("numeric", _IntegralNumericLoader)
    conn.adapters.register_dumper(bool, _BoolAsIntDumper)
    conn.row_factory = _row_factory


class PostgresStore:
    """The PostgreSQL store (port.Store)."""

    dialect = port.POSTGRES
    shared = True

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        try:
            self._pool = psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=max(2, pool_size),
                kwargs={"autocommit": True},
                configure=_configure,
                open=False,
                name="wingsmith-store",
            )
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
            raise errors.StoreError(f"cannot open database {_redacted(url)}: {e}") from e
        try:
            with self._pool.connection() as conn:
                self.schema_version = migrate(conn)
            self.epoch = self._ensure_epoch()
        except BaseException:
            self._pool.close()
            raise

    def close(self) -> None:
        self._pool.close()

    def listen(
        self,
        channels: Sequence[str],
        on_notify: port.OnNotify,
        on_reconnect: Callable[[], None],
    ) -> port.Listening:
        return _Listener(self.url, channels, on_notify, on_reconnect)

    @contextlib.contextmanager
    def write(self, clusters: Iterable[str] | None = None) -> Iterator[PostgresTransaction]:
        scope = port.scope_of(clusters)
        locks = port.Locks(covering=scope is None)
        with self._connection() as conn:
            _run(conn, "BEGIN ISOLATION LEVEL READ COMMITTED")
            try:
                _begin_locks(conn, locks, scope or ())
                yield PostgresTransaction(conn, locks)
            except BaseException:
                _rollback(conn)
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.Error as e:
                _rollback(conn)
                raise errors.StoreError(f"commit failed: {e}") from e

    @contextlib.contextmanager
    def read(self) -> Iterator[PostgresTransaction]:
        with self._connection() as conn:
            _run(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                yield PostgresTransaction(conn)
            finally:
                _rollback(conn)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg_pool.PoolTimeout as e:
            raise errors.StoreError(f"database busy: no connection free ({e})") from e
        except psycopg.OperationalError as e:
            raise errors.StoreError(f"database unavailable: {e}") from e

    def _ensure_epoch(self) -> str:
        with self.write() as tx:
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('store_epoch', ?) ON CONFLICT DO NOTHING",
                ("se_" + secrets.token_hex(8),),
            )
            row = tx.execute("SELECT value FROM meta WHERE key = 'store_epoch'").fetchone()
            return str(row["value"])


class _Listener:
    """LISTEN on a connection of its own, in a thread; reconnects with a pause when the
    connection drops (and says so: notifications may have been lost meanwhile)."""

    RETRY_S = 1.0
    # How often the thread looks up from waiting, to notice close().
    POLL_S = 0.5

    def __init__(
        self,
        url: str,
        channels: Sequence[str],
        on_notify: port.OnNotify,
        on_reconnect: Callable[[], None],
    ) -> None:
        self._url = url
        self._channels = list(channels)
        self._on_notify = on_notify
        self._on_reconnect = on_reconnect
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-listen", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, connect_timeout=5, application_name=LISTENER_NAME
                ) as conn:
                    for channel in self._channels:
                        conn.execute(f'LISTEN "{channel}"')
                    self._safely(self._on_reconnect)
                    while not self._stopped.is_set():
                        for note in conn.notifies(timeout=self.POLL_S):
                            self._deliver(note.channel, note.payload)
            except psycopg.Error as e:
                if self._stopped.is_set():
                    return
                log.warning("store listener lost its connection (%s); reconnecting", e)
                self._stopped.wait(self.RETRY_S)

    def _deliver(self, channel: str, payload: str) -> None:
        self._safely(lambda: self._on_notify(channel, payload))

    @staticmethod
    def _safely(call: Callable[[], None]) -> None:
        try:
            call()
        except Exception:  # a callback's bug must not end the listening
            log.exception("store notification callback failed")


def _run(conn: psycopg.Connection[Any], statement: str) -> None:
    try:
        conn.execute(statement)
    except psycopg.OperationalError as e:
        raise errors.StoreError(f"database unavailable: {e}") from e


def _rollback(conn: psycopg.Connection[Any]) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.execute("ROLLBACK")


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Apply every migration newer than the database's version, once even when several hubs
    start together (a session advisory lock); return the version."""
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        current = int(row[0]) if row else 0
        shipped = sqlite_store.migrations()
        if current > len(shipped):
            raise errors.StoreError(
                f"database schema version {current} is newer than this hub knows"
                f" ({len(shipped)}): upgrade the hub"
            )
        for version, name, sql in shipped[current:]:
            log.info("applying migration %s", name)
            with conn.transaction():
                for statement in sqlite_store.statements(sql):
                    conn.execute(port.POSTGRES.ddl(statement))
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                    (version, name, time.time()),
                )
            current = version
        return int(current)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
