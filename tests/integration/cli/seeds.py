"""Foreign DynamoGraphDeployments: what a simulated agent is seeded with for the CLI's
adoption tests (`seed_path`, agent/simulation.py). Nobody declared them at the hub, so the
agent reports them as discovered."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

NAMESPACE = "ml"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.1"
LEGACY_ARGS = [
    "--model",
    "Qwen/Qwen2.5-7B-Instruct",
    "--tensor-parallel-size",
    "2",
    "--max-model-len",
    "16384",
]


def dgd(name: str, *, replicas: int = 2, args: list[str] | None = None) -> dict[str, Any]:
    """A vLLM DGD with a frontend and one worker service of 2 GPUs a pod."""
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": IMAGE}},
                },
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "replicas": replicas,
                    "resources": {"limits": {"gpu": "2"}},
                    "extraPodSpec": {
                        "mainContainer": {
                            "image": IMAGE,
                            "command": ["python3", "-m", "dynamo.vllm"],
                            "args": list(args or LEGACY_ARGS),
                        }
                    },
                },
            },
        },
    }


def write(directory: pathlib.Path, *dgds: dict[str, Any]) -> str:
    path = directory / "seed.yaml"
    path.write_text(yaml.safe_dump_all(list(dgds)))
    return str(path)


def ref(name: str, *, cluster_id: str = "east") -> str:
    """The discovered entry's ref, "<cluster>.<namespace>.<name>"."""
    return f"{cluster_id}.{NAMESPACE}.{name}"
