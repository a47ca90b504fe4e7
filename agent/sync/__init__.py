"""The agent's end of the hub stream (ClusterSync.Sync): channel, client, conversion.

The gRPC channel to the hub (TLS, keepalive), the stream client that connects, reconnects by
agent/backoff.py's rule, hands desired state to the agent and sends its observations, and the
conversion between stream messages and agent.model values: the only place agent code reads
protobuf fields (docs/stream.md). Above reconcile and observe, below the agent's wiring.
"""
