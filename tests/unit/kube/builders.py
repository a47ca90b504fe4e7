"""Builders for Kubernetes objects as the API server serializes them: pods Dynamo made, nodes.

`pod()` gives a running, ready worker pod of DGD `llama` unless told otherwise; the keyword
arguments say what differs. DGD manifests come from tests/unit/cluster/builders.py, the same
ones the simulated cluster's tests apply.
"""

from __future__ import annotations

from typing import Any

from agent.cluster.port import (
    DYNAMO_COMPONENT_TYPE,
    DYNAMO_GRAPH,
    GPU_RESOURCE,
    LABEL_DEPLOYMENT_ID,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"
CREATED = "2025-01-02T03:04:05Z"
CREATED_UNIX = 1735787045.0


def ours(deployment_id: str = "dep-1") -> dict[str, str]:
    """The labels the renderer puts on a DGD (and its pods)."""
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_DEPLOYMENT_ID: deployment_id}


def container(
    name: str = "main",
    *,
    gpus: int | str | None = 1,
    where: str = "limits",
    command: tuple[str, ...] = ("python3", "-m", "dynamo.vllm"),
    args: tuple[str, ...] = ("--model", "Qwen/Qwen3-0.6B"),
    image: str = IMAGE,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources[where] = {GPU_RESOURCE: str(gpus), "cpu": "4"}
    return {
        "name": name,
        "image": image,
        "command": list(command),
        "args": list(args),
        "resources": resources,
    }


def pod(
    name: str = "llama-worker-0",
    *,
    namespace: str = "default",
    graph: str | None = "llama",
    component: str = "worker",
    labels: dict[str, str] | None = None,
    node: str = "gpu-node-1",
    phase: str = "Running",
    ready: bool = True,
    containers: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    container_statuses: list[dict[str, Any]] | None = None,
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    all_labels = {DYNAMO_COMPONENT_TYPE: component, **(labels or {})}
    if graph is not None:
        all_labels[DYNAMO_GRAPH] = graph
    spec: dict[str, Any] = {"containers": containers or [container()]}
    if node:
        spec["nodeName"] = node
    if conditions is None:
        conditions = [
            {"type": "PodScheduled", "status": "True"},
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                **({} if ready else {"reason": "ContainersNotReady"}),
            },
        ]
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if container_statuses is not None:
        status["containerStatuses"] = container_statuses
    if reason:
        status["reason"] = reason
        status["message"] = message
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": all_labels,
            "creationTimestamp": CREATED,
        },
        "spec": spec,
        "status": status,
    }


def unschedulable(name: str = "llama-worker-1", **kwargs: Any) -> dict[str, Any]:
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    return pod(
        name,
        node="",
        phase="Pending",
        ready=False,
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ],
        **kwargs,
    )


def node(
    name: str = "gpu-node-1", *, gpus: int | None = 8, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    allocatable = {"cpu": "96", "memory": "1Ti"}
    if gpus is not None:
        allocatable[GPU_RESOURCE] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {"kubernetes.io/hostname": name}},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }
