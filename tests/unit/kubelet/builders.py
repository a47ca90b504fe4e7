"""Builders for the kubelet's PodResources messages, as a real kubelet shapes them.

The kubelet sends one ContainerDevices per device per NUMA node (pkg/kubelet/cm,
containerDevicesFromResourceDeviceInstances); `devices()` does the same, so the tests see the
fan-out the client has to merge.
"""

from __future__ import annotations

from k8s.podresources.v1 import api_pb2

GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"
MIG_1G = "nvidia.com/mig-1g.10gb"


def devices(resource: str, *device_ids: str, numa: int = 0) -> list[api_pb2.ContainerDevices]:
    """One entry per device, on one NUMA node, like the kubelet."""
    topology = api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=numa)])
    return [
        api_pb2.ContainerDevices(resource_name=resource, device_ids=[d], topology=topology)
        for d in device_ids
    ]


def container(
    name: str,
    *device_lists: list[api_pb2.ContainerDevices],
    claims: list[api_pb2.DynamicResource] | None = None,
) -> api_pb2.ContainerResources:
    flat = [entry for entries in device_lists for entry in entries]
    return api_pb2.ContainerResources(
        name=name, devices=flat, cpu_ids=[2, 3], dynamic_resources=claims or []
    )


def pod(
    name: str, *containers: api_pb2.ContainerResources, namespace: str = "serving"
) -> api_pb2.PodResources:
    return api_pb2.PodResources(name=name, namespace=namespace, containers=list(containers))


def dra_claim(claim: str, device: str) -> api_pb2.DynamicResource:
    return api_pb2.DynamicResource(
        claim_name=claim,
        claim_namespace="serving",
        claim_resources=[
            api_pb2.ClaimResource(
                cdi_devices=[api_pb2.CDIDevice(name=f"k8s.gpu.nvidia.com/device={device}")],
                driver_name="gpu.nvidia.com",
                pool_name="node-a",
                device_name=device,
                share_id="share-1",
            )
        ],
    )
