"""The helpers the table modules share to build their SQL: ids bound in chunks (`chunks`,
`marks`), many rows in few statements (`write_rows`, `row_chunks`), a list's WHERE clause
built filter by filter (`Where`, `among`). Plain SQL both engines run; hub/store/port.py names
these for its callers.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hub.store.port import Transaction


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


# A match of several key columns against rows of keys, `(a, b) KEYS_IN` in a `write_rows` or
# `row_chunks` statement: `(a, b) IN (SELECT * FROM (VALUES ..))`, not `(a, b) IN (VALUES ..)`.
# SQLite (3.40) answers the plain row-value `IN (VALUES ..)` by scanning the whole table and
# probing the list with every row (ingest's `DELETE FROM allocations WHERE (cluster_id, node_id)
# IN (VALUES ..)`: 5 ms a statement with 64,000 allocations stored at 2,000 clusters), and the
# same list behind a SELECT by a search of the key's index (0.2 ms). PostgreSQL plans both alike.
KEYS_IN = "IN (SELECT * FROM ({rows}) AS keys)"

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
        key = operator.itemgetter(*unique)
        rows = list({key(row): row for row in rows}.values())
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
    start = 0
    while start < len(rows):
        count = _shape(min(per, len(rows) - start))
        part = rows[start : start + count]
        yield _values(width, count), list(itertools.chain.from_iterable(part))
        start += count


def _shape(count: int) -> int:
    """The largest power of two up to `count`, or `count` itself at the statement limit: so a
    statement's text takes one of a few shapes per width (77 rows: 64 + 8 + 4 + 1), not one
    per row count. Each text is a statement SQLite compiles and caches (`cached_statements`)
    and psycopg prepares, per connection; one per count held 30-50 KiB of compiled statements
    per connected agent at 200 agents (docs/benchmark.md "Ingest and reads at scale")."""
    if count >= ROWS_PER_STATEMENT:
        return count
    return 1 << (count.bit_length() - 1)


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
