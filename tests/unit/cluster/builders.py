"""Builders for DGD manifests as the renderer (or a human) would apply them.

`aggregated()` and `disaggregated()` give minimal valid DGD dicts; `service()` one service;
`with_args`, `scaled` and `with_gpus` return edited deep copies, so a test reads as
"the same DGD, but ...".
"""

from __future__ import annotations

import copy
from typing import Any

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"
ENGINE = ("python3", "-m", "dynamo.vllm")


def service(
    *,
    component: str,
    replicas: int = 1,
    gpus: int = 0,
    args: tuple[str, ...] = (),
    command: tuple[str, ...] = ENGINE,
    sub: str = "",
    labels: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    image: str = IMAGE,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "componentType": component,
        "replicas": replicas,
        "extraPodSpec": {
            "mainContainer": {"image": image, "command": list(command), "args": list(args)}
        },
    }
    if gpus:
        spec["resources"] = {"limits": {"gpu": str(gpus)}}
    if sub:
        spec["subComponentType"] = sub
    if labels:
        spec["labels"] = dict(labels)
    if pod_labels:
        spec["extraPodMetadata"] = {"labels": dict(pod_labels)}
    return spec


def frontend(*, replicas: int = 1, args: tuple[str, ...] = ()) -> dict[str, Any]:
    return service(
        component="frontend",
        replicas=replicas,
        command=("python3", "-m", "dynamo.frontend"),
        args=args,
    )


def dgd(
    name: str = "llama",
    *,
    namespace: str = "default",
    services: dict[str, dict[str, Any]],
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": metadata,
        "spec": {"backendFramework": "vllm", "services": services},
    }


def aggregated(
    name: str = "llama",
    *,
    namespace: str = "default",
    replicas: int = 1,
    gpus: int = 1,
    args: tuple[str, ...] = ("--model", "Qwen/Qwen3-0.6B"),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Frontend + one aggregated VllmWorker."""
    return dgd(
        name,
        namespace=namespace,
        labels=labels,
        services={
            "Frontend": frontend(),
            "VllmWorker": service(
                component="worker", replicas=replicas, gpus=gpus, args=args, labels=labels
            ),
        },
    )


def disaggregated(
    name: str = "llama",
    *,
    namespace: str = "default",
    prefill: int = 1,
    decode: int = 1,
    gpus: int = 1,
    args: tuple[str, ...] = ("--model", "Qwen/Qwen3-0.6B"),
) -> dict[str, Any]:
    """Frontend + VllmPrefillWorker + VllmDecodeWorker."""
    return dgd(
        name,
        namespace=namespace,
        services={
            "Frontend": frontend(),
            "VllmPrefillWorker": service(
                component="worker",
                sub="prefill",
                replicas=prefill,
                gpus=gpus,
                args=(*args, "--disaggregation-mode", "prefill"),
            ),
            "VllmDecodeWorker": service(
                component="worker",
                sub="decode",
                replicas=decode,
                gpus=gpus,
                args=(*args, "--disaggregation-mode", "decode"),
            ),
        },
    )


def _edited(manifest: dict[str, Any], svc: str) -> tuple[dict[str, Any], dict[str, Any]]:
    copied = copy.deepcopy(manifest)
    return copied, copied["spec"]["services"][svc]


def with_args(manifest: dict[str, Any], svc: str, args: tuple[str, ...]) -> dict[str, Any]:
    copied, spec = _edited(manifest, svc)
    spec["extraPodSpec"]["mainContainer"]["args"] = list(args)
    return copied


def scaled(manifest: dict[str, Any], svc: str, replicas: int) -> dict[str, Any]:
    copied, spec = _edited(manifest, svc)
    spec["replicas"] = replicas
    return copied


def with_gpus(manifest: dict[str, Any], svc: str, gpus: int) -> dict[str, Any]:
    copied, spec = _edited(manifest, svc)
    spec["resources"] = {"limits": {"gpu": str(gpus)}}
    return copied
