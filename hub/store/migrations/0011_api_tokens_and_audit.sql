-- Scoped API tokens and the audit log (docs/security.md).
-- api_tokens: the hub keeps the SHA-256 of each secret, never the secret; a revoked token
-- keeps its row (revoke_time set) so the audit log's actors stay explained.
CREATE TABLE api_tokens (
    name        TEXT PRIMARY KEY,
    role        TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    projects    TEXT NOT NULL,            -- JSON array of project names (operator)
    secret_hash TEXT NOT NULL UNIQUE,     -- hex SHA-256 of the bearer secret
    create_time REAL NOT NULL,
    created_by  TEXT NOT NULL,
    revoke_time REAL
) STRICT;

-- One row per audited event; id increases with time. Pruned after the retention period.
CREATE TABLE audit_log (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    REAL NOT NULL,
    actor   TEXT NOT NULL,
    role    TEXT NOT NULL,
    edge    TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    outcome TEXT NOT NULL,
    message TEXT NOT NULL
) STRICT;
CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_actor ON audit_log (actor, id);
