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

Write locks (docs/architecture.md "Write locks"). A write transaction holds the locks scoped to
what its read-decide-write reads and writes, always taken in this one order, so no two writers
can wait for each other in a cycle:

  1. `fleet`       shared by every scoped write; exclusive (the covering lock) for a write
                   that names no scope: it then waits for every other writer and none
                   waits for it but later writers, as the old single write lock did;
  2. `cluster:ID`  one per cluster: its ingest, desired-state revisions, sessions and
                   leadership term (all taken as the write begins, in one statement);
  3. `devices`     binding GPU UUIDs to the node that verified them first: an ingest that
                   writes nodes reads every cluster's devices to decide;
  4. `admission:P` one per project, in ascending name: its quota admission (a quota is
                   shared by the project's clusters; a cluster's free devices are guarded by
                   the cluster's lock, which every pass writing there holds);
  5. `watch`       the watch feed's recorder.

Singleton try-locks (`try_serialize`: pruning tombstones, sweeping dead hubs) never wait, so
they stand outside the order. `Store.write(clusters)` takes levels 1 and 2 when it begins;
`serialize(key)` takes a later one. Each transaction records what it holds (`Locks`) and
refuses a lock that would come before one it already holds (`LockOrderError`, on both
backends, so a test on SQLite finds an out-of-order path too). SQLite has one writer
(BEGIN IMMEDIATE): there the locks are recorded and checked, never taken.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from hub import errors


class IntegrityError(errors.StoreError):
    """A constraint refused a write (unique key, foreign key, check); the backend's own error
    type never leaves the backend."""


T = TypeVar("T")


class LockOrderError(RuntimeError):
    """A write asked for a lock that comes before one it holds, or wrote what it holds no lock
    for: a defect of the caller (the lock order is in this module's docstring)."""


class WiderScope(Exception):
    """A scoped write found it needs clusters it could not lock in order: the caller runs the
    whole transaction again with `clusters` added to its scope (bounded: see `retry_wider`)."""

    def __init__(self, clusters: Iterable[str]) -> None:
        self.clusters = frozenset(clusters)
        super().__init__(f"needs the locks of clusters {sorted(self.clusters)}")


FLEET = "fleet"
DEVICES = "devices"
WATCH = "watch"
_CLUSTER = "cluster:"
_ADMISSION = "admission:"
# The order of the waiting locks (the module docstring); clusters sort by id within theirs,
# projects by name within theirs.
_LEVELS = {FLEET: 1, DEVICES: 3, WATCH: 5}
_CLUSTER_LEVEL = 2
_ADMISSION_LEVEL = 4


def cluster_lock(cluster_id: str) -> str:
    """The name of a cluster's lock."""
    return _CLUSTER + cluster_id


def admission_lock(project: str) -> str:
    """The name of the lock of a project's quota admission."""
    return _ADMISSION + project


def _rank(key: str) -> tuple[int, str]:
    if key.startswith(_CLUSTER):
        return (_CLUSTER_LEVEL, key[len(_CLUSTER) :])
    if key.startswith(_ADMISSION):
        return (_ADMISSION_LEVEL, key[len(_ADMISSION) :])
    level = _LEVELS.get(key)
    if level is None:
        raise LockOrderError(f"no lock named {key!r} in the lock order")
    return (level, "")


class Locks:
    """The locks one write transaction holds, and the order they must come in. `covering`:
    it holds the fleet lock exclusively, so no other writer holds anything: every later lock
    is already covered (nothing to take)."""

    __slots__ = ("_held", "_top", "covering")

    def __init__(self, *, covering: bool) -> None:
        # Exclusive fleet lock: every other writer is excluded, every later lock covered.
        self.covering = covering
        self._held: set[str] = {FLEET}
        self._top = _rank(FLEET)

    def take(self, key: str) -> bool:
        """Record `key` as held; True when the backend must take it now. LockOrderError when
        it comes before the last lock taken (waiting for it could close a cycle)."""
        rank = _rank(key)
        if key in self._held or self.covering:
            return False
        if rank[0] == _CLUSTER_LEVEL:
            raise LockOrderError(
                f"lock {key!r} requested inside the transaction: a write takes its clusters'"
                " locks when it begins (Store.write(clusters); lock_clusters)"
            )
        if rank < self._top:
            raise LockOrderError(
                f"lock {key!r} requested after {sorted(self._held)}: out of order"
                ' (docs/architecture.md "Write locks")'
            )
        self._held.add(key)
        self._top = rank
        return True

    def begin(self, cluster_ids: Iterable[str]) -> list[str]:
        """Record the cluster locks a write begins with; the ids whose locks the backend must
        take (sorted, none when covering). Only here: a cluster lock is never taken later."""
        if self.covering:
            return []
        wanted = sorted(set(cluster_ids))
        self._held.update(cluster_lock(c) for c in wanted)
        if wanted:
            self._top = (_CLUSTER_LEVEL, wanted[-1])
        return wanted

    def missing(self, cluster_ids: Iterable[str]) -> list[str]:
        """Those of `cluster_ids` whose lock this transaction does not hold (sorted)."""
        if self.covering:
            return []
        return sorted({c for c in cluster_ids if cluster_lock(c) not in self._held})

    def held(self) -> frozenset[str]:
        return frozenset(self._held)


def lock_clusters(conn: Transaction, cluster_ids: Iterable[str]) -> None:
    """Make sure the transaction holds the locks of `cluster_ids`. Cluster locks are all taken
    when a write begins (in one order), so one it lacks is WiderScope: the caller starts again
    with them in its scope (`retry_wider`)."""
    wanted = conn.locks.missing(cluster_ids)
    if wanted:
        raise WiderScope(wanted)


def retry_wider(run: Callable[[frozenset[str] | None], T], clusters: Iterable[str]) -> T:
    """`run(scope)` (one whole write transaction) with `clusters` as its scope, again with the
    clusters a WiderScope asked for added (at most `WIDER_ATTEMPTS` times: a workload's
    clusters rarely change between two tries), then under the covering lock."""
    scope = frozenset(clusters)
    for _ in range(WIDER_ATTEMPTS):
        try:
            return run(scope)
        except WiderScope as e:
            scope |= e.clusters
    return run(None)


WIDER_ATTEMPTS = 3
# A write naming more clusters than this takes the covering lock instead: PostgreSQL keeps
# advisory locks in a shared table sized by max_locks_per_transaction (64 per connection by
# default), and a liveness flush of thousands of clusters would fill it.
MAX_SCOPED_CLUSTERS = 256


def scope_of(clusters: Iterable[str] | None) -> frozenset[str] | None:
    """The clusters a write locks, or None for the covering lock (none named, or too many)."""
    if clusters is None:
        return None
    scope = frozenset(clusters)
    return None if len(scope) > MAX_SCOPED_CLUSTERS else scope


def check_held(conn: Transaction, cluster_ids: Iterable[str]) -> None:
    """LockOrderError unless the transaction holds the locks of `cluster_ids` (a write to a
    cluster's desired state is about to commit)."""
    missing = conn.locks.missing(cluster_ids)
    if missing:
        raise LockOrderError(
            f"wrote the desired state of clusters {missing} without their locks"
            f" (held: {sorted(conn.locks.held())})"
        )


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

    def ddl(self, statement: str) -> str:
        for pattern, replacement in self._TYPES:
            statement = pattern.sub(replacement, statement)
        statement = self._AUTOINCREMENT.sub(
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", statement
        )
        for pattern, replacement in self._JSON:
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

    @property
    def locks(self) -> Locks:
        """The write locks this transaction holds (none taken on a read)."""
        ...

    def serialize(self, key: str) -> None:
        """Hold, until this transaction ends, the lock named `key` (`ADMISSION`, `WATCH`,
        `cluster_lock(id)`): a concurrent transaction asking for it waits. LockOrderError when
        it comes before a lock already held (the order: this module's docstring). Every write
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


# Ids bound per `IN (...)`: well below SQLite's 32,766 and PostgreSQL's 65,535 parameters.
IN_CHUNK = 500


def chunks(values: Iterable[str]) -> Iterator[list[str]]:
    """`values`, sorted and without repeats, in lists of at most IN_CHUNK: one statement each."""
    items = sorted(set(values))
    for start in range(0, len(items), IN_CHUNK):
        yield items[start : start + IN_CHUNK]


def marks(values: Sequence[object]) -> str:
    """The `?` placeholders for an `IN (...)` of `values`."""
    return ",".join("?" * len(values))


# A multi-row statement (`write_rows`) binds at most this many rows, and this many parameters:
# under SQLite's 32,766 and PostgreSQL's 65,535, and short enough that a statement's text and
# plan stay cheap to build.
ROWS_PER_STATEMENT = 1000
PARAMS_PER_STATEMENT = 20_000


def write_rows(
    conn: Transaction,
    sql: str,
    rows: Sequence[Sequence[object]],
    *,
    unique: Sequence[int] = (),
) -> None:
    """Run `sql` over every row of `rows` in a few multi-row statements instead of one per row:
    `sql` holds one `{rows}` where the rows go, written `VALUES (?, ..), (?, ..)` (an
    `INSERT .. {rows} ON CONFLICT ..`, or a `DELETE .. WHERE (a, b) IN ({rows})`). On
    PostgreSQL a statement is a round trip and a plan, whatever its rows; on SQLite it saves
    the per-row step of executemany. `unique`: the positions of the key columns when `sql`
    updates on conflict: a key given twice keeps its last row, as one statement per row would
    (PostgreSQL refuses to update a row twice in one statement)."""
    if not rows:
        return
    if unique:
        rows = list({tuple(row[i] for i in unique): row for row in rows}.values())
    for values, params in row_chunks(rows):
        conn.execute(sql.format(rows=values), params)


def row_chunks(rows: Sequence[Sequence[object]]) -> Iterator[tuple[str, list[object]]]:
    """`rows` (of one width) as `VALUES (?, ..), (?, ..)` lists within the statement limits, each
    with its parameters: for `write_rows`, and for a read keyed by several columns
    (`WHERE (a, b) IN (VALUES ..)`)."""
    if not rows:
        return
    width = len(rows[0])
    per = max(1, min(ROWS_PER_STATEMENT, PARAMS_PER_STATEMENT // width))
    for start in range(0, len(rows), per):
        part = rows[start : start + per]
        yield _values(width, len(part)), [v for row in part for v in row]


@functools.lru_cache(maxsize=256)
def _values(width: int, count: int) -> str:
    group = "(" + ",".join("?" * width) + ")"
    return "VALUES " + ",".join([group] * count)


def among(column: str, values: Iterable[str]) -> tuple[str, list[str]]:
    """A WHERE clause keeping rows whose `column` is one of `values` (a scoped token's projects:
    at most a few dozen, one statement), and its parameters; none given keeps no row."""
    items = sorted(set(values))
    if not items:
        return "1 = 0", []
    return f"{column} IN ({marks(items)})", items


class Where:
    """A list's WHERE clause, built filter by filter, with its parameters in order: each
    list query (deployments, replicas, allocations) states its filters the same way, and a
    new filter is one more call.

        where = port.Where("d.deployment_id > ?", after).equal(("d.project", project))
        conn.execute(f"SELECT .. {where.sql()} ORDER BY ..", where.params)
    """

    def __init__(self, clause: str = "", *params: object) -> None:
        self.clauses: list[str] = [clause] if clause else []
        self.params: list[object] = list(params)

    def equal(self, *pairs: tuple[str, object]) -> Where:
        """`column = ?` for each (column, value) whose value is set: an empty filter field
        (no value given) keeps every row."""
        for column, value in pairs:
            if value:
                self.clauses.append(f"{column} = ?")
                self.params.append(value)
        return self

    def among(self, column: str, values: Iterable[str] | None, *, within: str = "") -> Where:
        """`column` one of `values` (a scoped token's projects; None: no such filter). With
        `within` (a `SELECT .. WHERE {clause}` template), the membership is tested there."""
        if values is not None:
            clause, params = among(column, values)
            self.clauses.append(within.format(clause=clause) if within else clause)
            self.params += params
        return self

    def extend(self, clauses: tuple[Sequence[str], Sequence[object]]) -> Where:
        """Clauses built elsewhere, with their parameters (a label selector's:
        hub/store/labels.py `selected`)."""
        self.clauses += clauses[0]
        self.params += clauses[1]
        return self

    def add(self, clause: str, *params: object) -> Where:
        self.clauses.append(clause)
        self.params += params
        return self

    def condition(self) -> str:
        """`a AND b` (every row when no filter is set)."""
        return " AND ".join(self.clauses) if self.clauses else "1 = 1"

    def sql(self) -> str:
        """`WHERE a AND b`, or nothing when no filter is set."""
        return f"WHERE {self.condition()}" if self.clauses else ""


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
