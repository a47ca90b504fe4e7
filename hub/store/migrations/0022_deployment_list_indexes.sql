-- Version 22: a list of deployments filtered by cluster or project pages by deployment id
-- (keyset: `deployment_id > ? ORDER BY deployment_id`). Without these a cluster's page sorted
-- the cluster's rows first, and a project's page walked the primary key skipping other
-- projects' rows: at 10,000 deployments, all of them for a project with few (6.7 ms; 0.004 ms
-- with the index: docs/benchmark.md "Ingest and reads at scale").
CREATE INDEX deployments_by_cluster_page ON deployments (cluster_id, deployment_id);
CREATE INDEX deployments_by_project_page ON deployments (project, deployment_id);
