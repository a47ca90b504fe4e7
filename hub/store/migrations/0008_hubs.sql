-- Version 8: several hubs on one database (PostgreSQL). Each hub process registers and beats
-- a heartbeat; each open stream row names the hub holding it and the slot it occupies (a pod's
-- name, or '' for the agent of a whole cluster), so a hub's sessions die with its heartbeat
-- and a newer stream on another hub supersedes the one in the same slot.

CREATE TABLE hubs (
    hub_id     TEXT PRIMARY KEY,
    started    REAL NOT NULL,
    heartbeat  REAL NOT NULL
) STRICT;

ALTER TABLE agent_sessions ADD COLUMN hub_id TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_sessions ADD COLUMN slot TEXT NOT NULL DEFAULT '';
CREATE INDEX agent_sessions_by_slot ON agent_sessions (cluster_id, slot);
