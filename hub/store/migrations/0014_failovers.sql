-- Version 14: failovers (docs/placement.md "Failover and failback"): a workload's replicas on a
-- lost cluster (stale past the toleration, cordoned, or draining) stand in on other clusters.
-- One row per (workload, lost cluster); an ended row (end_time set) is kept as history until
-- the next failover of that cluster replaces it. stand_ins: JSON {cluster_id: replicas}, the
-- share of those clusters' desired_replicas that stands in.
CREATE TABLE failovers (
    workload_id     TEXT NOT NULL REFERENCES workloads(workload_id) ON DELETE CASCADE,
    cluster_id      TEXT NOT NULL,
    deployment_id   TEXT NOT NULL,
    cause           TEXT NOT NULL,
    state           TEXT NOT NULL,
    start_time      REAL NOT NULL,
    replicas        INTEGER NOT NULL,
    stand_ins       TEXT NOT NULL,
    recovered_since REAL,
    end_time        REAL,
    message         TEXT NOT NULL,
    PRIMARY KEY (workload_id, cluster_id)
) STRICT;
