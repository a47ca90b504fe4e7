-- Version 24: allocations lose their foreign key to nodes. Every pod that comes or goes
-- deletes and inserts its allocation rows, one per device, and each inserted row had its
-- node looked up (and, on PostgreSQL, key-share locked by a per-row trigger) although ingest
-- writes the node's row in the same statements just before (hub/store/nodes.py
-- `write_nodes`): on PostgreSQL that check was about a sixth of the server's CPU an ingested
-- record at 2,000 clusters (docs/benchmark.md "Ingest at 2,000 agents, stop 24"). What the
-- key's cascade did, a cluster's deletion now does itself (hub/store/clusters.py `delete`),
-- and nodes are never deleted otherwise (a node gone is marked absent, its allocations
-- deleted with its report). tests/invariants.py checks that no allocation outlives its node.
-- The table is rebuilt (SQLite cannot drop a constraint); its rows are copied as they are.
CREATE TABLE allocations_rebuilt (
    cluster_id    TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    pod_name      TEXT NOT NULL,
    device_id     TEXT NOT NULL,
    resource_name TEXT NOT NULL,
    PRIMARY KEY (cluster_id, node_id, namespace, pod_name, device_id)
) STRICT;
INSERT INTO allocations_rebuilt (cluster_id, node_id, namespace, pod_name, device_id,
    resource_name)
SELECT cluster_id, node_id, namespace, pod_name, device_id, resource_name FROM allocations;
DROP TABLE allocations;
ALTER TABLE allocations_rebuilt RENAME TO allocations;
CREATE INDEX allocations_by_pod ON allocations (cluster_id, namespace, pod_name);
