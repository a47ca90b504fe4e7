"""How a model is served: the serving configuration's types, defined once for the hub (which
validates and stores them, hub/serving.py) and the agent (which renders them, agent/render/).

Enum-like fields hold the lower-case words of the design ("vllm", "disaggregated"); every field
is part of the serving digest. The wire form is `wingsmith.v1.ServingConfig`, converted by
common/convert.py with the one rule both sides share (`to_message`, `from_message` below).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common import convert
from wingsmith.v1 import resources_pb2 as pb


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


def to_message(serving: Serving) -> pb.ServingConfig:
    """The fields of the same name by the converter's rule; the worker counts travel in the
    `disaggregation` message, set only for a disaggregated config."""
    disaggregation = None
    if serving.mode == "disaggregated":
        disaggregation = pb.Disaggregation(
            prefill_workers=serving.prefill_workers, decode_workers=serving.decode_workers
        )
    message: pb.ServingConfig = convert.to_message(
        pb.ServingConfig, serving, disaggregation=disaggregation
    )
    return message


def from_message(message: pb.ServingConfig, **given: Any) -> Serving:
    """Raw values, not validated (the hub's hub/serving.py checks them); an unset mode reads as
    aggregated. `given` fields win (the agent resolves unset parallelism to 1)."""
    values: dict[str, Any] = {
        "mode": convert.enum_word(pb.ServingMode, message.mode) or "aggregated",
        "prefill_workers": message.disaggregation.prefill_workers,
        "decode_workers": message.disaggregation.decode_workers,
    }
    values.update(given)
    serving: Serving = convert.from_message(Serving, message, **values)
    return serving


convert.register(Serving, to_message, from_message)
