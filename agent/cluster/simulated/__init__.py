"""The simulated cluster: `ClusterPort` over a GPU cluster held in memory.

Nodes with GPUs, a scheduler that reads node selection as kube-scheduler does, a Dynamo
operator that turns DGDs into pods and rolls them out, and the NVML and kubelet answers of
each node. A product feature (the laptop demo, the fleet benchmark), not a test double.
Never imports the Kubernetes adapter or its client (docs/simulated-cluster.md).
"""

# The entry points, for `from agent.cluster.simulated import SimulatedCluster`.
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.cluster.simulated.hardware import DRIVER_VERSION
from agent.cluster.simulated.seed import SeedFileError, load_seed_file
from agent.cluster.simulated.spec import NodeGroup, SimSpec

__all__ = [
    "DRIVER_VERSION",
    "NodeGroup",
    "SeedFileError",
    "SimSpec",
    "SimulatedCluster",
    "load_seed_file",
]
