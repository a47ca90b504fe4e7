"""The store: migrations, the admin token file, and level-triggered observations."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from hub import errors
from hub.api.auth import load_or_create_token
from hub.model import (
    AllocationObservation,
    Device,
    NodeObservation,
    ObservationBatch,
)
from hub.service import clusters, ingest
from hub.service.context import ServiceContext
from hub.store import db as store_db
from hub.store.db import Database
from hub.store.port import open_store


def gpu(uuid: str, *, healthy: bool = True) -> Device:
    return Device(
        uuid, "H100", 80, "0:0", "H100-80GB", healthy=healthy, health_reason="", verified=True
    )


def test_migrations_apply_once_and_record_their_version(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    first = Database(path)
    assert first.schema_version == len(store_db.migrations())
    epoch = first.epoch
    first.close()
    again = Database(path)
    assert again.schema_version == len(store_db.migrations())
    assert again.epoch == epoch, "the store epoch survives restarts"
    with again.read() as conn:
        rows = conn.execute("SELECT version FROM schema_migrations").fetchall()
        assert [r[0] for r in rows] == list(range(1, len(store_db.migrations()) + 1))
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_a_database_from_a_newer_hub_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    Database(path).close()
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'future.sql', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(errors.StoreError):
        Database(path)


def test_the_admin_token_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    db = str(tmp_path / "hub.db")
    token, source = load_or_create_token(db, environ={})
    assert source.endswith(".admin-token")
    assert stat.S_IMODE(os.stat(source).st_mode) == 0o600
    assert load_or_create_token(db, environ={}) == (token, source)
    assert load_or_create_token(db, environ={"WINGSMITH_ADMIN_TOKEN": "from-env-token"})[0] == (
        "from-env-token"
    )


def node(
    ns: int, devices: tuple[Device, ...], allocations: tuple[AllocationObservation, ...] = ()
) -> ObservationBatch:
    return ObservationBatch(seq=1, nodes=(NodeObservation("n1", ns, devices, allocations),))


def test_an_older_observation_never_overwrites_a_newer_one(store_url: str) -> None:
    ctx = ServiceContext(db=open_store(store_url))
    clusters.create(ctx, cluster_id="east", labels={})
    now = time.time_ns()
    ingest.ingest(ctx, [("east", node(now, (gpu("GPU-new"),)))])
    result = ingest.ingest(ctx, [("east", node(now - 1_000, (gpu("GPU-old"),)))])
    assert result.nodes_written == 0
    (only,) = clusters.get(ctx, "east").nodes
    assert [d.uuid for d in only.devices] == ["GPU-new"]


def test_unchanged_node_state_is_not_rewritten_and_changes_are_seen(store_url: str) -> None:
    ctx = ServiceContext(db=open_store(store_url))
    clusters.create(ctx, cluster_id="east", labels={})
    now = time.time_ns()
    assert ingest.ingest(ctx, [("east", node(now, (gpu("GPU-1"),)))]).capacity_changed == {"east"}
    assert ingest.ingest(ctx, [("east", node(now + 1, (gpu("GPU-1"),)))]).capacity_changed == set()
    changed = ingest.ingest(ctx, [("east", node(now + 2, (gpu("GPU-1", healthy=False),)))])
    assert changed.capacity_changed == {"east"}
    capacity = clusters.get(ctx, "east").capacity["H100-80GB"]
    assert (capacity.total, capacity.unusable) == (0, 1), "an unhealthy device is not capacity"


def test_an_absent_node_drops_its_devices(store_url: str) -> None:
    ctx = ServiceContext(db=open_store(store_url))
    clusters.create(ctx, cluster_id="east", labels={})
    now = time.time_ns()
    ingest.ingest(ctx, [("east", node(now, (gpu("GPU-1"),)))])
    gone = ObservationBatch(seq=2, nodes=(NodeObservation("n1", now + 1, (), (), absent=True),))
    ingest.ingest(ctx, [("east", gone)])
    view = clusters.get(ctx, "east")
    assert view.nodes == () and view.capacity == {}


def test_one_ingest_group_keeps_the_newest_of_each_node_across_clusters(store_url: str) -> None:
    """A group is written a statement per table: of two reports of one node the newer wins,
    whatever their order, and nodes of different clusters with the same name stay apart."""
    ctx = ServiceContext(db=open_store(store_url))
    clusters.create(ctx, cluster_id="east", labels={})
    clusters.create(ctx, cluster_id="west", labels={})
    now = time.time_ns()
    result = ingest.ingest(
        ctx,
        [
            ("east", node(now + 5, (gpu("GPU-east-new"),))),
            ("east", node(now, (gpu("GPU-east-old"),))),
            ("west", node(now, (gpu("GPU-west-a"), gpu("GPU-west-b")))),
        ],
    )
    assert result.nodes_written == 2
    assert result.capacity_changed == {"east", "west"}
    (east,) = clusters.get(ctx, "east").nodes
    (west,) = clusters.get(ctx, "west").nodes
    assert [d.uuid for d in east.devices] == ["GPU-east-new"]
    assert sorted(d.uuid for d in west.devices) == ["GPU-west-a", "GPU-west-b"]
    # A new process (no hashes in memory) reads the stored rows back to see nothing changed.
    fresh_ctx = ServiceContext(db=ctx.db)
    again = ingest.ingest(
        fresh_ctx, [("west", node(now + 1, (gpu("GPU-west-b"), gpu("GPU-west-a"))))]
    )
    assert again.nodes_written == 0 and again.capacity_changed == set()


def test_an_allocation_given_twice_is_stored_once(store_url: str) -> None:
    """Allocations are inserted without ON CONFLICT (hub/store/nodes.py): a node observation
    that names one pod's device twice, however it was built, stores one row, on both engines,
    and a report after it replaces the rows."""
    ctx = ServiceContext(db=open_store(store_url))
    clusters.create(ctx, cluster_id="c1", labels={})
    now = time.time_ns()
    twice = (
        AllocationObservation("p", "default", ("GPU-a",), "nvidia.com/gpu"),
        AllocationObservation("p", "default", ("GPU-a", "GPU-b"), "gpu"),
    )
    node = NodeObservation("n1", now, (gpu("GPU-a"), gpu("GPU-b")), twice)
    ingest.ingest(ctx, [("c1", ObservationBatch(1, nodes=(node,)))])
    with ctx.db.read() as conn:
        rows = conn.execute(
            "SELECT pod_name, device_id FROM allocations WHERE cluster_id = 'c1'"
        ).fetchall()
    assert sorted((r[0], r[1]) for r in rows) == [("p", "GPU-a"), ("p", "GPU-b")]
    later = NodeObservation(
        "n1", now + 1, node.devices, (AllocationObservation("q", "default", ("GPU-b",), "gpu"),)
    )
    ingest.ingest(ctx, [("c1", ObservationBatch(2, nodes=(later,)))])
    with ctx.db.read() as conn:
        rows = conn.execute("SELECT pod_name, device_id FROM allocations").fetchall()
    assert [(r[0], r[1]) for r in rows] == [("q", "GPU-b")]
    ctx.db.close()
