-- Version 2: rollouts (surge admitted for a rollout), adoption (discovered workloads and
-- deployments adopted from them), and the live args drift checks compare.

ALTER TABLE deployments ADD COLUMN surge_replicas INTEGER NOT NULL DEFAULT 0
    CHECK (surge_replicas >= 0);
-- A serving change is rolling out: set when the digest changes, cleared when every replica
-- runs the new digest. While set, admission may grant surge replicas.
ALTER TABLE deployments ADD COLUMN rolling INTEGER NOT NULL DEFAULT 0;
-- The DGD's coordinates when it is not the agent's own (adopted); empty otherwise.
ALTER TABLE deployments ADD COLUMN dgd_namespace TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN dgd_name TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN adopted_from TEXT NOT NULL DEFAULT '';

ALTER TABLE deployment_reports ADD COLUMN live_args TEXT NOT NULL DEFAULT '[]';

CREATE TABLE discovered (
    discovered_id TEXT PRIMARY KEY,
    cluster_id    TEXT NOT NULL REFERENCES clusters(cluster_id) ON DELETE CASCADE,
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('new', 'tracked', 'ignored', 'promoted')),
    -- Gone from its cluster: kept, marked, never erased.
    gone          INTEGER NOT NULL DEFAULT 0,
    -- The last sighting, as JSON (services, replicas, imported args, device class, ...).
    observation   TEXT NOT NULL,
    observe_ns    INTEGER NOT NULL,
    first_seen    REAL NOT NULL,
    last_seen     REAL NOT NULL,
    gone_time     REAL,
    workload_id   TEXT NOT NULL DEFAULT '',
    UNIQUE (cluster_id, namespace, name)
) STRICT;
