"""How a model is served: the serving configuration's types, defined once for the hub (which
validates and stores them, hub/serving.py) and the agent (which renders them, agent/render/).

Enum-like fields hold the lower-case words of the design ("vllm", "disaggregated"); every field
is part of the serving digest. The wire form is `wingsmith.v1.ServingConfig`, converted by
common/convert.py (`serving_to_message`, `serving_from_message`). This module imports no
protobuf: the hub's core holds these values and never loads a message type.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KvCache:
    dtype: str = ""
    gpu_memory_utilization: float = 0.0
    block_size: int = 0
    disable_prefix_caching: bool = False


@dataclass(frozen=True)
class Serving:
    """A serving config. The hub normalizes it before storing (parallelism 0 -> 1)."""

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
    # The Dynamo runtime version inside `image` when its tag is not a version
    # (runtimeVersionOverride; hub/serving.py).
    runtime_version: str = ""

    @property
    def devices_per_worker(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def workers_per_replica(self) -> int:
        if self.mode == "disaggregated":
            return self.prefill_workers + self.decode_workers
        return 1

    @property
    def devices_per_replica(self) -> int:
        """TP x PP per worker, times the workers of one replica (docs/placement.md)."""
        return self.devices_per_worker * self.workers_per_replica
