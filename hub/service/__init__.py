"""The hub's use cases: read a view, decide (pure hub.admission / hub.placement / hub.phases),
commit, then publish.

Called by hub/api (control calls) and hub/sync (stream sessions); calls hub/store for every
read and write, inside transactions it opens itself (`context.transaction`). Works only with
hub.model values: protobuf stays at the edges. Must not import grpc, aiohttp or sqlite3.

After a transaction commits, the clusters whose desired state changed are handed to the
`Publisher`, which wakes their agents' stream sessions (hub/sync/fanout.py).
"""
