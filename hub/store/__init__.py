"""The hub's store: every read and write of the SQLite database, and nothing else.

Only this package imports sqlite3 (import-linter holds the line). Modules are named for the
tables they own (projects, clusters, workloads, deployments, observations, sync); each takes an
open connection from `db.Database.write()` / `read()`, so the service layer decides where a
transaction begins and ends. Functions return hub.model values, never sqlite3 rows.

The SQL stays portable where it costs little (no SQLite-only functions in queries beyond
JSON text columns and UPSERT), so a PostgreSQL store can keep this interface.
"""
