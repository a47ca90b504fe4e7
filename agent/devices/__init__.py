"""What GPUs a node offers: NVML's inventory, checked against the kubelet, named by class.

The NVML port and its adapter over nvidia-ml-py (the only importer of pynvml), the device
classes workloads ask for ("H100-80GB", MIG profiles), the node labels GPU feature discovery
writes for them, and verification of the kubelet's device ids against NVML's (pure). The
observer reports what this package finds; the renderer and the simulated cluster use its pure
class and label functions. Must not import the agent's layers above it (docs/devices.md).
"""
