"""The hub's side of the agent stream (ClusterSync.Sync): sessions, fan-out, batching.

session.py speaks the protocol (docs/stream.md); convert.py validates every incoming field and
converts at the edge; fanout.py wakes sessions when their cluster's desired state changes;
ingest.py batches observations of all sessions into few transactions; liveness.py batches
heartbeats and acks. The rules (what a delta holds, who may write what) live in
hub/service/sync.py. Must not import sqlite3 or hub/store.
"""
