"""Migrations from an old schema: a version-1 database made here (only 0001 applied, rows of
every kind inserted as a version-1 hub would have) opens in this hub with its data intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hub.service import clusters, deployments, projects, workloads
from hub.service.context import ServiceContext
from hub.store import db as store_db
from hub.store.db import Database

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


def make_v1(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at REAL NOT NULL)"
    )
    version, name, sql = store_db.migrations()[0]
    assert version == 1
    conn.executescript(sql)
    conn.executescript(V1_ROWS)
    conn.execute("INSERT INTO schema_migrations VALUES (1, ?, 0)", (name,))
    conn.close()


def test_a_version_1_database_migrates_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    make_v1(path)
    db = Database(path)
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
    assert view.stale and view.phase == "placed", "its cluster was last seen long ago: stale"
    usage = projects.get(ctx, "search").usage["H100-80GB"]
    assert (usage.used, usage.reserved) == (2, 2), "held devices were counted by the migration"
    with db.read() as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(clusters)")}
    assert "connected_session" not in columns and "leader_term" in columns
