"""The agent's domain values: desired deployments as the agent sees them.

Converted from `wingsmith.v1.DeploymentSpec` at the sync edge (agent/sync/convert.py); the
renderer, the reconciler and the observer work only with these frozen dataclasses, never with
protobuf messages. Enum-like fields hold the lower-case words of the design ("vllm",
"aggregated", "managed").
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENGINES = ("vllm", "sglang", "trtllm")
MODES = ("aggregated", "disaggregated")
AUTHORITIES = ("managed", "observed")
ROUTER_MODES = ("", "round_robin", "kv")


@dataclass(frozen=True)
class KvCache:
    dtype: str = ""
    gpu_memory_utilization: float = 0.0
    block_size: int = 0
    disable_prefix_caching: bool = False


@dataclass(frozen=True)
class Serving:
    """How a model is served; every field is part of the serving digest."""

    engine: str
    engine_version: str
    model: str
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    expert_parallel: int = 1
    context_length: int = 0
    quantization: str = ""
    kv_cache: KvCache = field(default_factory=KvCache)
    engine_args: tuple[str, ...] = ()
    mode: str = "aggregated"
    prefill_workers: int = 1
    decode_workers: int = 1
    router_mode: str = ""
    image: str = ""
    # Dynamo's runtime version inside `image` when its tag is not one (runtimeVersionOverride).
    runtime_version: str = ""

    @property
    def devices_per_worker(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def workers_per_replica(self) -> int:
        if self.mode == "disaggregated":
            return self.prefill_workers + self.decode_workers
        return 1


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment the hub wants on this cluster (DeploymentSpec in sync.proto)."""

    deployment_id: str
    name: str
    workload_id: str
    workload_name: str
    project: str
    replicas: int
    admitted: bool
    enabled: bool
    authority: str
    serving: Serving
    generation: int
    serving_digest: str
    device_class: str
    devices_per_replica: int
    revision: int = 0
    # Extra replicas admitted for a rollout (old and new side by side up to replicas + surge).
    surge_replicas: int = 0
    # An adopted DGD's coordinates; empty for the agent's own (named after the workload).
    dgd_namespace: str = ""
    dgd_name: str = ""
    adopted: bool = False

    @property
    def should_run(self) -> bool:
        """The agent may run it: admitted, enabled and managed."""
        return self.admitted and self.enabled and self.authority == "managed"

    def workers_of(self, role: str) -> int:
        """Worker pods of one role in one replica (role: worker, prefill or decode)."""
        if role == "prefill":
            return self.serving.prefill_workers
        if role == "decode" and self.serving.mode == "disaggregated":
            return self.serving.decode_workers
        return 1
