"""What ingest's statements cost: the ones keyed by (cluster, node) search an index, on SQLite
(hub/store/sql.py `KEYS_IN`) and on PostgreSQL (hub/store/port.py `Dialect.keys_in`). SQLite
3.40 answers `(cluster_id, node_id) IN (VALUES ..)` by scanning the whole table, and PostgreSQL
15 every plain form of it for a group's few hundred keys, a cost that grows with the fleet
(docs/benchmark.md "Ingest and reads at scale"); the plan is read from the engine itself
(EXPLAIN) for every statement a real ingest ran. And what validation does by hand for speed
gives what the generic path gives."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from hub import errors, wire
from hub.model import AllocationObservation, Device, NodeObservation, ObservationBatch
from hub.service import clusters, ingest
from hub.service.context import ServiceContext
from hub.store import db, postgres
from hub.store.port import POSTGRES, open_store
from hub.sync import observed
from hub.sync.fields import Checker
from tests import stores
from wingsmith.v1 import resources_pb2

H100 = "H100-80GB"
TABLE_SCANS = [["SCAN", t] for t in ("nodes", "devices", "allocations", "replicas")]


def _recorded_statements(monkeypatch: pytest.MonkeyPatch, kind: type) -> list[tuple[str, Any]]:
    """Every statement a transaction of `kind` executes from now on, with its parameters."""
    seen: list[tuple[str, Any]] = []
    original = kind.execute

    def recorded(self: Any, sql: str, params: Any = ()) -> Any:
        seen.append((sql, params))
        return original(self, sql, params)

    monkeypatch.setattr(kind, "execute", recorded)
    return seen


def gpu_node(cluster: str, n: int, pods: str, now: int, *, absent: bool = False) -> NodeObservation:
    """Node `n` of `cluster`: 8 verified H100s, two pods (named after `pods`) of 4 each."""
    uuids = [f"GPU-{cluster}-{n}-{g}" for g in range(8)]
    devices = tuple(
        Device(u, "H100", 80 * 2**30, f"0:{g}", H100, healthy=True, health_reason="", verified=True)
        for g, u in enumerate(uuids)
    )
    allocations = tuple(
        AllocationObservation(f"{pods}-{a}", "default", tuple(uuids[a * 4 : a * 4 + 4]), "gpu")
        for a in range(2)
    )
    if absent:
        return NodeObservation(f"{cluster}-n{n}", now, (), (), absent=True)
    return NodeObservation(f"{cluster}-n{n}", now, devices, allocations)


def test_node_keyed_statements_search_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = ServiceContext(db=open_store(str(tmp_path / "hub.db")))
    ids = [f"c{i:03d}" for i in range(40)]
    for cluster_id in ids:
        clusters.create(ctx, cluster_id=cluster_id, labels={})
    now = time.time_ns()
    ingest.ingest(
        ctx,
        [
            (c, ObservationBatch(1, nodes=tuple(gpu_node(c, n, "a", now) for n in range(4))))
            for c in ids
        ],
    )
    seen = _recorded_statements(monkeypatch, db.SqliteTransaction)
    # Every node's pods replaced (allocations rewritten), one node of each cluster gone
    # (its devices and replicas deleted), one new device set (devices rewritten).
    later = [
        (
            c,
            ObservationBatch(
                2,
                nodes=(
                    gpu_node(c, 0, "b", now + 1),
                    gpu_node(c, 1, "b", now + 1),
                    gpu_node(c, 2, "b", now + 1, absent=True),
                    gpu_node(f"{c}x", 3, "b", now + 1),
                ),
            ),
        )
        for c in ids
    ]
    result = ingest.ingest(ctx, later)
    monkeypatch.undo()
    assert result.nodes_written == 4 * len(ids)
    keyed = [(sql, params) for sql, params in seen if "(cluster_id, node_id)" in sql]
    kinds = {
        (sql.split()[0], sql.split(" FROM ")[1].split()[0]) for sql, _ in keyed if " FROM " in sql
    }
    # The statements under test ran: versions read; replicas, devices, allocations deleted.
    assert {
        ("SELECT", "nodes"),
        ("DELETE", "replicas"),
        ("DELETE", "devices"),
        ("DELETE", "allocations"),
    } <= kinds, kinds
    with ctx.db.read() as conn:
        for sql, params in keyed:
            if sql.startswith("INSERT"):
                continue
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            # The VALUES list itself is scanned (the subquery `keys`); no table is.
            scans = [step for step in plan if step.split(" ")[:2] in TABLE_SCANS]
            assert not scans, (sql[:120], plan)


# A fleet's worth of other clusters' rows, written straight into the tables (foreign keys off
# for this session only): 2,000 clusters x 8 nodes, 8 devices and 4 allocations a node.
_FILL = (
    "INSERT INTO nodes (cluster_id, node_id, observe_ns)"
    " SELECT 'f' || c, 'f' || c || '-n' || n, 1"
    " FROM generate_series(1, 2000) c, generate_series(0, 7) n",
    "INSERT INTO devices (cluster_id, node_id, uuid, name, memory_bytes, pci_bus_id,"
    " device_class, healthy, health_reason, verified, nvlink_domain, parent_uuid)"
    " SELECT 'f' || c, 'f' || c || '-n' || n, 'GPU-f' || c || '-' || n || '-' || g, 'H100', 1,"
    " '0:' || g, 'H100-80GB', 1, '', 1, '', ''"
    " FROM generate_series(1, 2000) c, generate_series(0, 7) n, generate_series(0, 7) g",
    "INSERT INTO allocations SELECT 'f' || c, 'f' || c || '-n' || n, 'default', 'p' || a,"
    " 'GPU-f' || c || '-' || n || '-' || a, 'gpu'"
    " FROM generate_series(1, 2000) c, generate_series(0, 7) n, generate_series(0, 3) a",
)


def test_node_keyed_statements_search_an_index_on_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group of 128 clusters' reports (512 nodes) on tables holding 2,000 clusters' rows:
    every node-keyed read and delete of nodes, devices and allocations is planned as index
    searches, before the tables were ever analyzed (a fresh database, as the benchmark's) and
    after. The plain forms (`IN (VALUES ..)`, behind a SELECT or not) were planned as a scan
    of the whole table and a hash join here."""
    import psycopg

    url = stores.store_url(tmp_path, "postgres")
    ctx = ServiceContext(db=open_store(url))
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("SET session_replication_role = replica")
        for statement in _FILL:
            raw.execute(statement)
    ids = [f"c{i:03d}" for i in range(128)]
    for cluster_id in ids:
        clusters.create(ctx, cluster_id=cluster_id, labels={})
    now = time.time_ns()
    first = [
        (c, ObservationBatch(1, nodes=tuple(gpu_node(c, n, "a", now) for n in range(4))))
        for c in ids
    ]
    ingest.ingest(ctx, first)
    seen = _recorded_statements(monkeypatch, postgres.PostgresTransaction)
    # Every node's pods replaced (allocations rewritten), a new device set on one node of
    # each cluster (devices rewritten).
    later = [
        (
            c,
            ObservationBatch(
                2,
                nodes=(
                    *(gpu_node(c, n, "b", now + 1) for n in range(3)),
                    gpu_node(f"{c}x", 3, "b", now + 1),
                ),
            ),
        )
        for c in ids
    ]
    result = ingest.ingest(ctx, later)
    monkeypatch.undo()
    ctx.db.close()
    assert result.nodes_written == 4 * len(ids)
    keyed = [
        (sql, params)
        for sql, params in seen
        if "(cluster_id, node_id)" in sql and sql.split()[0] in ("SELECT", "DELETE")
    ]
    kinds = {(sql.split()[0], sql.split(" FROM ")[1].split()[0]) for sql, _ in keyed}
    assert {("SELECT", "nodes"), ("DELETE", "devices"), ("DELETE", "allocations")} <= kinds
    # The held-device recount of the group's clusters reads their allocations by index too.
    recounts = [(q, p) for q, p in seen if q.startswith("INSERT INTO deployment_held")]
    assert recounts
    recounts = [("SELECT " + q.split(" SELECT ", 1)[1], p) for q, p in recounts]
    with psycopg.connect(url, autocommit=True) as raw:
        for analyzed in (False, True):
            if analyzed:
                raw.execute("ANALYZE")
            for sql, params in keyed:
                table = sql.split(" FROM ")[1].split()[0]
                if table == "replicas":
                    continue  # no index by node: a departed node's replicas (rare) scan
                plan = [
                    r[0]
                    for r in psycopg.RawCursor(raw).execute(
                        "EXPLAIN " + postgres.translate_raw(sql), params
                    )
                ]
                scans = [step for step in plan if f"Seq Scan on {table}" in step]
                assert not scans, (analyzed, sql[:160], "\n".join(plan))
            for sql, params in recounts:
                plan = [
                    r[0]
                    for r in psycopg.RawCursor(raw).execute(
                        "EXPLAIN " + postgres.translate_raw(sql), params
                    )
                ]
                scans = [step for step in plan if "Seq Scan on allocations" in step]
                assert not scans, (analyzed, sql[:160], "\n".join(plan))


def test_deployment_keyed_deletes_search_an_index_on_postgres(tmp_path: Path) -> None:
    """Ingest deletes a group's replicas by deployment id (and applied objects, the same way):
    on 16,000 replicas stored, 125 ids are index searches, analyzed or not (`IN (VALUES ..)`
    and `= ANY(array)` were planned as a scan of the whole table: 4 ms a statement at 2,000
    clusters)."""
    import psycopg

    url = stores.store_url(tmp_path, "postgres")
    open_store(url).close()
    ids = [f"dep_{d:05d}" for d in range(2000)]
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("SET session_replication_role = replica")
        raw.execute(
            "INSERT INTO replicas (replica_id, deployment_id, cluster_id, namespace, name,"
            " node_id, ready, serving_digest, engine_version, role, observe_ns)"
            " SELECT 'r' || d || '-' || r, 'dep_' || lpad(d::text, 5, '0'), 'c' || d, 'default',"
            " 'pod-' || r, 'n', 1, '', '', 'worker', 1"
            " FROM generate_series(0, 1999) d, generate_series(0, 7) r"
        )
        for analyzed in (False, True):
            if analyzed:
                raw.execute("ANALYZE")
            for table in ("replicas",):
                for condition, params in POSTGRES.keys_in(
                    table, ("deployment_id",), [(i,) for i in ids[::16]]
                ):
                    plan = [
                        r[0]
                        for r in psycopg.RawCursor(raw).execute(
                            postgres.translate_raw(
                                f"EXPLAIN DELETE FROM {table} WHERE {condition}"
                            ),
                            params,
                        )
                    ]
                    scans = [step for step in plan if f"Seq Scan on {table}" in step]
                    assert not scans, (analyzed, table, "\n".join(plan))


def test_device_copied_by_hand_as_the_converter_copies_it() -> None:
    """hub/sync/observed.py builds a reported device field by field (the converter's generic
    loop cost more than every check of the device): for a message with every field set, the
    result is the converter's. A field added to the message fails here until it is set below
    (and copied there)."""
    message = resources_pb2.Device(
        uuid="GPU-0123abcd-0123-4567-89ab-0123456789ab",
        name="NVIDIA H100 80GB HBM3",
        memory_bytes=80 * 2**30,
        pci_bus_id="00000000:17:00.0",
        device_class="H100-80GB",
        healthy=True,
        health_reason="xid 79 cleared",
        verified=True,
        nvlink_domain="cluster-uuid.7",
        parent_uuid="GPU-89abcdef-0123-4567-89ab-0123456789ab",
    )
    unset = [
        f.name for f in message.DESCRIPTOR.fields if getattr(message, f.name) == f.default_value
    ]
    assert not unset, f"set every field of the message in this test: {unset}"
    check = Checker(now_ns=time.time_ns(), max_skew_ns=0)
    assert observed._device(message, check, "nodes[0]", 0) == wire.record_from(Device, message)
    # A bad field still names its path (the checked version runs for a device that fails).
    message.pci_bus_id = "bad\x00"
    with pytest.raises(errors.InvalidArgument, match=r"nodes\[0\]\.devices\[3\]\.pci_bus_id"):
        observed._device(message, check, "nodes[0]", 3)
