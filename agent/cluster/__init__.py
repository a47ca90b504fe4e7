"""The agent's view of a cluster: the port every backend implements, and the two backends.

`port.py` is the seam (`ClusterPort` and the plain values crossing it); `shape.py` and
`dgd_versions.py` read and convert DGD manifests for everyone. Behind the port sit
`kube/` (a real cluster through the Kubernetes API) and `simulated/` (a whole GPU cluster in
memory). The two never import each other; the rest of the agent imports the port and the
shared modules, and only the wiring (agent.main, agent.kubernetes, agent.simulation) picks a
backend. Must not import the agent's layers above it.
"""
