"""Reading a DynamoGraphDeployment's shape: its workers, their roles, args and GPUs. Pure.

Shared by the reconciler (which enforces replicas and args on adopted DGDs), the observer and
discovery (which describe DGDs). DGD specs are plain dicts as Kubernetes serializes them
(shared/reference/dynamo-dgd.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def role_of(name: str, service: Mapping[str, Any]) -> str:
    """worker | prefill | decode: subComponentType when set, else the service name says it."""
    sub = service.get("subComponentType", "")
    if sub in ("prefill", "decode"):
        return str(sub)
    lowered = name.lower()
    return "prefill" if "prefill" in lowered else "decode" if "decode" in lowered else "worker"


def workers(services: Mapping[str, Any]) -> list[str]:
    return [n for n, s in services.items() if s.get("componentType") == "worker"]


def main_worker(services: Mapping[str, Any]) -> str | None:
    """The worker whose args describe the engine: the decode worker, or the only worker."""
    names = workers(services)
    for name in names:
        if role_of(name, services[name]) == "decode":
            return name
    return names[0] if names else None


def main_container(service: Mapping[str, Any]) -> Mapping[str, Any]:
    container: Mapping[str, Any] = service.get("extraPodSpec", {}).get("mainContainer", {})
    return container


def worker_args(service: Mapping[str, Any]) -> list[str]:
    """The engine's flags: the main container's args (its command when it has no args)."""
    container = main_container(service)
    args = [str(a) for a in container.get("args", ())]
    return args or [str(a) for a in container.get("command", ())]


def gpus_of(service: Mapping[str, Any]) -> int:
    resources = service.get("resources", {})
    for kind in ("limits", "requests"):
        value = resources.get(kind, {}).get("gpu")
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return 0
    return 0
