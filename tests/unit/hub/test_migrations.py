"""Migrations from an old schema, on each backend: a version-1 database made here (only 0001
applied, rows of every kind inserted as a version-1 hub would have) opens in this hub with its
data intact; a database at every older version migrates to the newest; several hubs opening
one PostgreSQL database at once apply each migration once."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from hub import errors
from hub.service import clusters, deployments, projects, workloads
from hub.service.context import ServiceContext
from hub.store import db as store_db
from hub.store import port
from hub.store.port import open_store
from tests import stores

V1_ROWS = """
INSERT INTO meta VALUES ('store_epoch', 'se_0123456789abcdef');
INSERT INTO projects VALUES ('search', 1, 1);
INSERT INTO quotas VALUES ('search', 'H100-80GB', 16);
INSERT INTO clusters (cluster_id, labels, token_hash, create_time, desired_revision,
    applied_revision, tombstone_floor, last_seen, connected_session, agent_version, read_only)
    VALUES ('east', '{"region":"us-east"}', 'hash-east', 1, 1, 1, 0, 2, 'ss_old', '0.1.0', 0);
INSERT INTO workloads VALUES ('wl_0000000000000001', 'chat', 'search', 1, 'H100-80GB',
    '{"context_length":0,"decode_workers":1,"engine":"vllm","engine_args":[],"engine_version":"0.11.0","expert_parallel":1,"image":"","kv_cache":{"block_size":0,"disable_prefix_caching":false,"dtype":"","gpu_memory_utilization":0.0},"mode":"aggregated","model":"m","pipeline_parallel":1,"prefill_workers":1,"quantization":"","router_mode":"","tensor_parallel":4}',
    '{"cluster_selector":{},"clusters":["east"]}', 1, 1);
INSERT INTO deployments (deployment_id, workload_id, cluster_id, project, desired_replicas,
    admitted_replicas, pending_since, authority, serving, serving_digest, device_class,
    devices_per_replica, revision, create_time, update_time)
    VALUES ('dep_0000000000000001', 'wl_0000000000000001', 'east', 'search', 1, 1, 1,
    'managed', (SELECT serving FROM workloads), 'svg_0000000000000000', 'H100-80GB', 4, 1, 1, 1);
INSERT INTO replicas VALUES ('rep_1', 'dep_0000000000000001', 'east', 'wingsmith', 'chat-0',
    'n1', 1, 'svg_0000000000000000', '0.11.0', 'worker', 5);
INSERT INTO nodes (cluster_id, node_id, observe_ns, inventory_error) VALUES ('east', 'n1', 5, '');
INSERT INTO allocations VALUES ('east', 'n1', 'wingsmith', 'chat-0', 'GPU-1', 'nvidia.com/gpu');
INSERT INTO allocations VALUES ('east', 'n1', 'wingsmith', 'chat-0', 'GPU-2', 'nvidia.com/gpu');
"""


def run_script(url: str, scripts: list[str], *, version: int) -> None:
    """Apply migration scripts by hand, as an old hub did, and record `version`."""
    if port.is_postgres(url):
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(
                "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at DOUBLE PRECISION NOT NULL)"
            )
            for script in scripts:
                for statement in store_db.statements(script):
                    pg.execute(port.POSTGRES.ddl(statement))
            for number, name, _ in store_db.migrations()[:version]:
                pg.execute("INSERT INTO schema_migrations VALUES (%s, %s, 0)", (number, name))
        return
    conn = sqlite3.connect(url, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at REAL NOT NULL)"
    )
    for script in scripts:
        conn.executescript(script)
    for number, name, _ in store_db.migrations()[:version]:
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
    conn.close()


def make_v1(url: str) -> None:
    version, _, sql = store_db.migrations()[0]
    assert version == 1
    run_script(url, [sql, V1_ROWS], version=1)


def columns_of(db: port.Store, table: str) -> set[str]:
    with db.read() as conn:
        if db.dialect.name == "postgresql":
            rows = conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                (table,),
            )
            return {r[0] for r in rows}
        return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def test_a_version_1_database_migrates_and_keeps_its_data(store_url: str) -> None:
    make_v1(store_url)
    db = open_store(store_url)
    assert db.schema_version == len(store_db.migrations()) >= 4
    assert db.epoch == "se_0123456789abcdef", "agents' revisions stay valid"
    ctx = ServiceContext(db=db)
    assert projects.get(ctx, "search").project.quotas == {"H100-80GB": 16}
    east = clusters.get(ctx, "east")
    assert east.cluster.labels == {"region": "us-east"}
    assert east.cluster.agents == (), "no stream is open after a migration"
    assert workloads.get(ctx, "chat").workload.placement.topology == ""
    view = deployments.get(ctx, "chat.east")
    assert view.deployment.surge_replicas == 0 and not view.deployment.adopted
    assert (view.deployment.authority, view.deployment.serving_digest) == (
        "managed",
        "svg_0000000000000000",
    ), "the fields moved into the body kept their values"
    assert view.stale and view.phase == "placed", "its cluster was last seen long ago: stale"
    usage = projects.get(ctx, "search").usage["H100-80GB"]
    assert (usage.used, usage.reserved) == (2, 2), "held devices were counted by the migration"
    columns = columns_of(db, "clusters")
    assert "connected_session" not in columns and "leader_term" in columns
    with db.read() as conn:
        allocations = conn.execute(
            "SELECT node_id, pod_name, device_id FROM allocations ORDER BY device_id"
        ).fetchall()
    assert [tuple(r) for r in allocations] == [
        ("n1", "chat-0", "GPU-1"),
        ("n1", "chat-0", "GPU-2"),
    ], "the allocations table was rebuilt (migration 0024) with its rows"
    db.close()


def _versions() -> Iterator[int]:
    yield from range(1, len(store_db.migrations()))


@pytest.mark.parametrize("version", list(_versions()))
def test_a_database_at_every_older_version_migrates_to_the_newest(
    store_url: str, version: int
) -> None:
    run_script(store_url, [sql for _, _, sql in store_db.migrations()[:version]], version=version)
    db = open_store(store_url)
    assert db.schema_version == len(store_db.migrations())
    ctx = ServiceContext(db=db)
    projects.create(ctx, name="p", quotas={"H100-80GB": 1})
    clusters.create(ctx, cluster_id="east", labels={})
    assert projects.get(ctx, "p").project.quotas == {"H100-80GB": 1}
    db.close()


def test_a_database_from_a_newer_hub_is_refused_on_either_backend(store_url: str) -> None:
    open_store(store_url).close()
    run_script_future(store_url)
    with pytest.raises(errors.StoreError, match="newer than this hub knows"):
        open_store(store_url)


def run_script_future(url: str) -> None:
    if port.is_postgres(url):
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute("INSERT INTO schema_migrations VALUES (999, 'future.sql', 0)")
        return
    conn = sqlite3.connect(url)
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'future.sql', 0)")
    conn.commit()
    conn.close()


def test_hubs_starting_together_on_one_postgres_database_migrate_it_once(tmp_path: Path) -> None:
    store_url = stores.store_url(tmp_path, "postgres")
    opened: list[port.Store] = []
    failures: list[BaseException] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        try:
            barrier.wait()
            opened.append(open_store(store_url, pool_size=2))
        except BaseException as e:  # re-raised below
            failures.append(e)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len({store.epoch for store in opened}) == 1, "one store epoch for every hub"
    with opened[0].read() as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert sorted(versions) == list(range(1, len(store_db.migrations()) + 1))
    for store in opened:
        store.close()


# A deployment as a hub stored it before its unqueried fields moved into `body`: every field
# off its default, so a value dropped or mixed up by the move shows.
BODY_VERSION = next(
    v for v, name, _ in store_db.migrations() if name.endswith("_deployment_body.sql")
)
PRE_BODY_ROWS = """
INSERT INTO projects (name, create_time, update_time) VALUES ('search', 1, 1);
INSERT INTO clusters (cluster_id, labels, token_hash, create_time) VALUES ('east', '{}', 'h', 1);
INSERT INTO workloads (workload_id, name, project, replicas, device_class, serving, placement,
    create_time, update_time) VALUES ('wl_0000000000000001', 'chat', 'search', 2, 'H100-80GB',
    '{"context_length":0,"decode_workers":1,"engine":"vllm","engine_args":[],"engine_version":"0.11.0","expert_parallel":1,"image":"","kv_cache":{"block_size":0,"disable_prefix_caching":false,"dtype":"","gpu_memory_utilization":0.0},"mode":"aggregated","model":"m","pipeline_parallel":1,"prefill_workers":1,"quantization":"","router_mode":"","tensor_parallel":4}',
    '{"cluster_selector":{},"clusters":["east"]}', 1, 1);
INSERT INTO deployments (deployment_id, workload_id, cluster_id, project, desired_replicas,
    admitted_replicas, admission_reason, admission_message, pending_since, generation,
    authority, enabled, engine_args, imported_args, serving, serving_digest, device_class,
    devices_per_replica, revision, create_time, update_time, surge_replicas, rolling,
    dgd_namespace, dgd_name, adopted_from)
    VALUES ('dep_0000000000000001', 'wl_0000000000000001', 'east', 'search', 2, 1, 'quota',
    'waits for 4 devices', 7.5, 3, 'observed', 0, '["--max-model-len","8192"]',
    '["--enforce-eager"]', (SELECT serving FROM workloads), 'svg_00000000000000aa',
    'H100-80GB', 4, 9, 1700000000.25, 1700000100.5, 1, 1, 'team-a', 'chat-dgd', 'dsc_1');
"""


def test_a_deployment_keeps_every_field_when_they_move_into_the_body(store_url: str) -> None:
    before = BODY_VERSION - 1
    scripts = [sql for _, _, sql in store_db.migrations()[:before]]
    run_script(store_url, [*scripts, PRE_BODY_ROWS], version=before)
    db = open_store(store_url)
    assert db.schema_version == len(store_db.migrations())
    d = deployments.get(ServiceContext(db=db), "chat.east").deployment
    assert (d.desired_replicas, d.admitted_replicas, d.generation, d.revision) == (2, 1, 3, 9)
    assert (d.admission_reason, d.admission_message) == ("quota", "waits for 4 devices")
    assert (d.authority, d.enabled, d.rolling, d.surge_replicas) == ("observed", False, True, 1)
    assert d.engine_args == ("--max-model-len", "8192")
    assert d.imported_args == ("--enforce-eager",)
    assert (d.serving_digest, d.device_class, d.devices_per_replica) == (
        "svg_00000000000000aa",
        "H100-80GB",
        4,
    )
    assert (d.pending_since, d.create_time, d.update_time) == (7.5, 1700000000.25, 1700000100.5)
    assert (d.dgd_namespace, d.dgd_name, d.adopted_from) == ("team-a", "chat-dgd", "dsc_1")
    assert d.serving.tensor_parallel == 4
    moved = {"engine_args", "imported_args", "dgd_namespace", "dgd_name", "adopted_from"}
    assert moved.isdisjoint(columns_of(db, "deployments")), "no column left behind"
    db.close()
