"""A small Kubernetes API emulator for the Kubernetes adapter's tests (agent/cluster/kube/).

Real HTTP on 127.0.0.1 port 0, spoken to by the real kubernetes client through a kubeconfig
file: lists, watches (resourceVersion, bookmarks, 410 Gone), server-side apply with field
ownership and 409 conflicts, deletes, a request log and fault injection. See server.py.
"""

from tests.fake_kube.server import KubeEmulator, Request
from tests.fake_kube.store import DGDS, NODES, PODS, Kind

__all__ = ["DGDS", "NODES", "PODS", "Kind", "KubeEmulator", "Request"]
