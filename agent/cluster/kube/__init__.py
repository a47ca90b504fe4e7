"""The Kubernetes adapter: `ClusterPort` over the official `kubernetes` client.

List-then-watch caches serve reads, server-side apply writes, a Lease elects the leader of a
DaemonSet, and client errors become the port's `ClusterError` here. The only package that
imports `kubernetes`; never imports the simulated cluster (docs/kubernetes.md).
"""
