-- Version 4: the devices each deployment's pods hold in live allocations, kept current by
-- ingest (hub/store/observations.py refresh_held, once per cluster per transaction). Admission
-- then sums it instead of joining every replica with every allocation of the fleet on every
-- pass (the fleet benchmark measured 207 ms per pass at 10,000 clusters before, 15 ms after).
-- A table of its own, not a column of deployments: it is cluster-written data, and the plane's
-- tables are never written by observations.
CREATE TABLE deployment_held (
    deployment_id TEXT PRIMARY KEY REFERENCES deployments(deployment_id) ON DELETE CASCADE,
    cluster_id    TEXT NOT NULL,
    held          INTEGER NOT NULL
) STRICT;
CREATE INDEX deployment_held_by_cluster ON deployment_held (cluster_id);

INSERT INTO deployment_held (deployment_id, cluster_id, held)
SELECT r.deployment_id, r.cluster_id, COUNT(*) FROM replicas r
JOIN allocations a
  ON a.cluster_id = r.cluster_id AND a.namespace = r.namespace AND a.pod_name = r.name
GROUP BY r.deployment_id, r.cluster_id;
