-- Version 21: the dashboard's chart history (hub/ui/history.py, docs/dashboard.md "Pictures"):
-- one row per sampled value, keyed by kind (cluster, project), name, time bucket (unix seconds
-- floored to the sampling interval), device class and field. Written as an upsert per bucket,
-- so hubs sampling the same bucket keep one point (the latest value); rows older than the
-- retention are deleted at each sample, so the table stays bounded.
CREATE TABLE dashboard_history (
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    bucket       INTEGER NOT NULL,
    device_class TEXT NOT NULL,
    field        TEXT NOT NULL,
    value        INTEGER NOT NULL,
    PRIMARY KEY (kind, name, bucket, device_class, field)
) STRICT;
CREATE INDEX dashboard_history_by_bucket ON dashboard_history (bucket);
