"""What every engine module (vllm, sglang, trtllm) provides to the DGD builder.

An engine turns a `Serving` and a worker role into the worker's main container (command,
args, env) and names its services the way Dynamo's own examples do. `agent.render.dgd`
picks the engine by `serving.engine` and does the rest (layout, replicas, GPUs, labels,
image). Engine modules only build argv words: no I/O, no Kubernetes shapes beyond the
container fields, and no knowledge of replicas, so a scale can never change a pod template.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agent.model import Serving

Role = Literal["aggregated", "prefill", "decode"]


@dataclass(frozen=True)
class MainContainer:
    """The engine's part of `extraPodSpec.mainContainer`; engine_args are appended later."""

    command: tuple[str, ...]
    args: tuple[str, ...]
    # (name, value) pairs, in the order they are rendered.
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ServiceNames:
    """DGD service keys per role; they name Dynamo's child objects, so they never change."""

    aggregated: str
    prefill: str
    decode: str

    def for_role(self, role: Role) -> str:
        name: str = getattr(self, role)
        return name


@dataclass(frozen=True)
class Engine:
    # spec.backendFramework, and the key of the agent's `images` mapping.
    framework: str
    # Repository under nvcr.io/nvidia/ai-dynamo/ of Dynamo's runtime image for the engine.
    runtime_image: str
    services: ServiceNames
    main_container: Callable[[Serving, Role], MainContainer]


def flag(name: str, value: int | str) -> tuple[str, str]:
    return (name, str(value))


def decimal(value: float) -> str:
    """A float as argv text: repr is the shortest round-trip form, the same on every host."""
    return repr(float(value))


def engine_module(module: str) -> tuple[str, ...]:
    """The command that starts a Dynamo component (`python3 -m dynamo.<name>`)."""
    return ("python3", "-m", module)
