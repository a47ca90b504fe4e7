-- Version 7: the object the agent applied for each deployment (its DynamoGraphDeployment as
-- the cluster holds it), so an operator sees from the hub exactly what runs (docs/rendering.md).
-- Cluster-written, like deployment_reports: each observation of the deployment replaces it, and
-- the row is rewritten only when the digest changes (observe_ns: when that object was first
-- seen). body is canonical JSON, at most 256 KiB (hub/sync/convert.py); empty when truncated.
CREATE TABLE deployment_applied (
    deployment_id TEXT PRIMARY KEY REFERENCES deployments(deployment_id) ON DELETE CASCADE,
    cluster_id    TEXT NOT NULL,
    api_version   TEXT NOT NULL,
    kind          TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    digest        TEXT NOT NULL,
    body          TEXT NOT NULL,
    truncated     INTEGER NOT NULL DEFAULT 0,
    observe_ns    INTEGER NOT NULL
) STRICT;
