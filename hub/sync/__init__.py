"""The hub's side of the agent stream (ClusterSync.Sync): sessions, fan-out, batching.

session.py speaks the protocol (docs/stream.md); convert.py validates every incoming field and
converts at the edge; fanout.py knows the open streams and which clusters' desired state
changed; pump.py reads those deltas in batches and hands them to the streams; ingest.py
batches observations of all sessions into few transactions, written in the store's writer
thread; liveness.py batches heartbeats and acks; episodes.py tells a lasting fault of the
periodic loops once, then a summary, then its end. The rules (what a delta holds, who may write
what) live in hub/service/sync.py and ingest.py. Must not import sqlite3 or hub/store.
"""
