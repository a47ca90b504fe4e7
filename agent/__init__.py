"""The Wingsmith agent ("hangar"): runs in each GPU cluster and makes the hub's desired
deployments real through NVIDIA Dynamo, reporting what really runs.

Layers (import-linter checks them, see .importlinter):

    app, simulation   wiring; the only modules that know everything
    sync              the stream client; protobuf <-> agent.model at this edge
    reconcile, observe, render   desired vs observed -> actions; DGD rendering (pure)
    cluster           the ClusterPort: simulated cluster, Kubernetes adapter (kubernetes only here)
    devices           NVML inventory and verification (only user of pynvml)
    kubelet           PodResources client
    model             domain values

The agent never imports the hub; they share only the generated protos (package wingsmith).
"""

__version__ = "0.1.0"
