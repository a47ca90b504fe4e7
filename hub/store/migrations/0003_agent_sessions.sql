-- Version 3: several agents per cluster (a DaemonSet: one per node, one of them leading).
-- The open streams are rows of agent_sessions (cleared at hub start); the newest leader term
-- per cluster survives restarts so a stale leader is fenced even by a restarted hub.

CREATE TABLE agent_sessions (
    session_id    TEXT PRIMARY KEY,
    cluster_id    TEXT NOT NULL REFERENCES clusters(cluster_id) ON DELETE CASCADE,
    instance      TEXT NOT NULL,
    node_name     TEXT NOT NULL,
    leader        INTEGER NOT NULL DEFAULT 0,
    agent_version TEXT NOT NULL,
    connect_time  REAL NOT NULL
) STRICT;
CREATE INDEX agent_sessions_by_cluster ON agent_sessions (cluster_id);

ALTER TABLE clusters ADD COLUMN leader_term INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters DROP COLUMN connected_session;
