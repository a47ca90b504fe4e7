-- Version 22: a list of deployments filtered by cluster pages by deployment id (keyset:
-- `deployment_id > ? ORDER BY deployment_id`). Without it a cluster's page sorted the
-- cluster's rows first.
-- No (project, deployment_id) index, though a project's page would use it (6.7 -> 0.004 ms
-- for a project with few of 10,000 deployments): SQLite, with no statistics, then takes it
-- for every `project IN (...)` aggregate too, quota_charges over all of a project's
-- deployments among them, and walks the index seeking each row instead of scanning the
-- table: at 2,000 agents connect + first sync 7.4 -> 10.8 s and idle hub CPU 2.6 -> 5.4%
-- (docs/benchmark.md "Ingest and reads at scale").
CREATE INDEX deployments_by_cluster_page ON deployments (cluster_id, deployment_id);
