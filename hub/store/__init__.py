"""The hub's store: every read and write of the database, and nothing else.

Only this package imports sqlite3 and psycopg (import-linter holds the line). `port` is the
seam the service layer sees (Store, Transaction, open_store); `db` is the SQLite backend,
`postgres` the PostgreSQL one. The other modules are named for the tables they own (projects,
clusters, workloads, deployments, observations, ...); each takes an open transaction from
`Store.write()` / `read()`, so the service layer decides where a transaction begins and ends.
Functions return hub.model values, never rows.

Their SQL is written once, in what both engines run (docs/architecture.md "The store seam").
"""
