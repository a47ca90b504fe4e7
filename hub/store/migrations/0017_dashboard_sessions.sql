-- Version 17: dashboard sessions held server-side (docs/dashboard.md, docs/security.md). A
-- signed cookie alone cannot be ended before it expires: a copy taken before logout would
-- still open pages. session_id: hex SHA-256 of the cookie's nonce (the nonce itself is not
-- stored); actor: "admin" or "token/<name>". Logout deletes the row; revoking a token deletes
-- its actor's rows; expired rows are deleted at each login.
CREATE TABLE dashboard_sessions (
    session_id  TEXT PRIMARY KEY,
    actor       TEXT NOT NULL,
    create_time REAL NOT NULL,
    expire_time REAL NOT NULL
) STRICT;
CREATE INDEX dashboard_sessions_actor ON dashboard_sessions (actor);
