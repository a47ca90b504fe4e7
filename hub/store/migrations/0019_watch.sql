-- Version 19: the watch feed (docs/rest.md "Watch"). watch_objects: every watched object
-- (kind: workload, deployment, cluster) as watchers last saw it, its JSON body, a digest of it
-- and the revision of its last change. watch_events: the changes, one row per revision
-- (dense: allocated under the "watch" lock), kept for a bounded window; type ADDED,
-- MODIFIED or DELETED; project "" for clusters.
CREATE TABLE watch_objects (
    kind      TEXT NOT NULL,
    object_id TEXT NOT NULL,
    project   TEXT NOT NULL,
    digest    TEXT NOT NULL,
    body      TEXT NOT NULL,
    revision  INTEGER NOT NULL,
    PRIMARY KEY (kind, object_id)
) STRICT;
CREATE TABLE watch_events (
    revision  INTEGER PRIMARY KEY,
    kind      TEXT NOT NULL,
    object_id TEXT NOT NULL,
    project   TEXT NOT NULL,
    type      TEXT NOT NULL,
    body      TEXT NOT NULL,
    time      REAL NOT NULL
) STRICT;
