"""The Kubernetes adapter: `ClusterPort` over the official `kubernetes` client.

List-then-watch caches serve reads, server-side apply writes, a Lease elects the leader of a
DaemonSet, and client errors become the port's `ClusterError` here. The only package that
imports `kubernetes`; never imports the simulated cluster (docs/kubernetes.md).
"""

# The entry points, for `from agent.cluster.kube import KubernetesCluster`.
from agent.cluster.kube.cluster import APPLY_PATCH, FIELD_MANAGER, KubernetesCluster
from agent.cluster.kube.config import load_api_client
from agent.cluster.kube.watch import WatchTuning

__all__ = ["APPLY_PATCH", "FIELD_MANAGER", "KubernetesCluster", "WatchTuning", "load_api_client"]
