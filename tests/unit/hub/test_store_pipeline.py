"""`Transaction.pipeline()` (hub/store/port.py): statements whose results are not read, sent
without waiting for each other on PostgreSQL (psycopg's pipeline mode), at once on SQLite.
What it must keep on both engines: the statements take effect in order, and a failed one
fails the transaction with the error `execute` raises (port.IntegrityError for a constraint),
nothing of it stored. And ingest's node writes, its most frequent, are sent that way on
PostgreSQL (docs/benchmark.md, "Ingest at 2,000 agents, stop 23")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hub.model import ObservationBatch
from hub.service import clusters, ingest
from hub.service.context import ServiceContext
from hub.store import postgres
from hub.store.port import IntegrityError, open_store
from tests import stores
from tests.unit.hub.test_ingest_cost import gpu_node

_TABLE = "CREATE TABLE scratch (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"


@pytest.mark.parametrize("backend", stores.BACKENDS)
def test_a_pipelined_blocks_statements_take_effect_in_order(tmp_path: Path, backend: str) -> None:
    store = open_store(stores.store_url(tmp_path, backend))
    try:
        with store.write() as conn:
            conn.execute(_TABLE)
        with store.write() as conn, conn.pipeline():
            conn.execute("INSERT INTO scratch (k, v) VALUES (?, ?)", ("a", 1))
            conn.executemany("INSERT INTO scratch (k, v) VALUES (?, ?)", [("b", 2), ("c", 3)])
            conn.execute("UPDATE scratch SET v = v * 10 WHERE k = ?", ("a",))
            conn.execute("DELETE FROM scratch WHERE k = ?", ("c",))
        with store.read() as conn:
            rows = conn.execute("SELECT k, v FROM scratch ORDER BY k").fetchall()
        assert [(r["k"], r["v"]) for r in rows] == [("a", 10), ("b", 2)]
    finally:
        store.close()


@pytest.mark.parametrize("backend", stores.BACKENDS)
def test_a_failed_statement_in_a_pipelined_block_fails_the_whole_transaction(
    tmp_path: Path, backend: str
) -> None:
    store = open_store(stores.store_url(tmp_path, backend))
    try:
        with store.write() as conn:
            conn.execute(_TABLE)
            conn.execute("INSERT INTO scratch (k, v) VALUES (?, ?)", ("kept", 1))
        with pytest.raises(IntegrityError, match="scratch"), store.write() as conn:
            conn.execute("INSERT INTO scratch (k, v) VALUES (?, ?)", ("before", 1))
            with conn.pipeline():
                conn.execute("INSERT INTO scratch (k, v) VALUES (?, ?)", ("new", 2))
                conn.execute("INSERT INTO scratch (k, v) VALUES (?, ?)", ("kept", 3))
                conn.execute("INSERT INTO scratch (k, v) VALUES (?, ?)", ("after", 4))
        # Nothing of the failed transaction was stored, before the block or in it, and the
        # store writes on (its connection back in the pool, out of pipeline mode).
        with store.write() as conn, conn.pipeline():
            conn.execute("UPDATE scratch SET v = ? WHERE k = ?", (5, "kept"))
        with store.read() as conn:
            rows = conn.execute("SELECT k, v FROM scratch ORDER BY k").fetchall()
        assert [(r["k"], r["v"]) for r in rows] == [("kept", 5)]
    finally:
        store.close()


def test_ingests_node_writes_are_sent_pipelined_on_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = ServiceContext(db=open_store(stores.store_url(tmp_path, "postgres")))
    ids = [f"c{i}" for i in range(3)]
    for cluster_id in ids:
        clusters.create(ctx, cluster_id=cluster_id, labels={})
    now = time.time_ns()
    ingest.ingest(ctx, [(c, ObservationBatch(1, nodes=(gpu_node(c, 0, "a", now),))) for c in ids])
    seen: list[tuple[str, Any]] = []
    original = postgres.PostgresTransaction.execute

    def recorded(self: postgres.PostgresTransaction, sql: str, params: Any = ()) -> Any:
        seen.append((sql.split()[0] + " " + sql.split()[2], self._conn.pgconn.pipeline_status))
        return original(self, sql, params)

    monkeypatch.setattr(postgres.PostgresTransaction, "execute", recorded)
    # New pods and a changed device set: allocations and devices rewritten, nodes upserted.
    later = [
        (c, ObservationBatch(2, nodes=(gpu_node(c, 0, "b", now + 1), gpu_node(c, 1, "b", now + 1))))
        for c in ids
    ]
    result = ingest.ingest(ctx, later)
    monkeypatch.undo()
    ctx.db.close()
    assert result.nodes_written == 2 * len(ids)
    writes = {
        statement: status
        for statement, status in seen
        if statement.split()[0] in ("INSERT", "DELETE")
        and statement.split()[1] in ("nodes", "devices", "allocations")
    }
    assert set(writes) >= {
        "INSERT nodes",
        "DELETE devices",
        "INSERT devices",
        "DELETE allocations",
        "INSERT allocations",
    }, writes
    assert all(status == psycopg.pq.PipelineStatus.ON for status in writes.values()), writes
