"""vLLM worker flags (`python3 -m dynamo.vllm`), from shared/reference/dynamo-dgd.md.

Used by `agent.render.dgd` through `ENGINE`. Every serving field the user left at its
default is left out, so the engine's own default applies and the argv stays short; the
parallelism flags are always written because they must agree with the GPU request.
"""

from __future__ import annotations

import json

from agent.model import KvCache, Serving
from agent.render.engine import (
    Engine,
    MainContainer,
    Role,
    ServiceNames,
    decimal,
    engine_module,
    flag,
)

# Both sides of a disaggregated pair send and receive KV blocks over NIXL; compact JSON so
# the argv word is the same on every host.
KV_TRANSFER_CONFIG = json.dumps(
    {"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":")
)


def main_container(serving: Serving, role: Role) -> MainContainer:
    args = (
        *flag("--model", serving.model),
        *_parallelism(serving),
        *_model_limits(serving),
        *_kv_cache(serving.kv_cache),
        *_disaggregation(role),
    )
    return MainContainer(command=engine_module("dynamo.vllm"), args=args)


def _parallelism(serving: Serving) -> tuple[str, ...]:
    words: tuple[str, ...] = (
        *flag("--tensor-parallel-size", serving.tensor_parallel),
        *flag("--pipeline-parallel-size", serving.pipeline_parallel),
    )
    # vLLM has no expert-parallel size: when enabled, experts span all TP x DP ranks.
    if serving.expert_parallel > 1:
        words += ("--enable-expert-parallel",)
    return words


def _model_limits(serving: Serving) -> tuple[str, ...]:
    words: tuple[str, ...] = ()
    if serving.context_length:
        words += flag("--max-model-len", serving.context_length)
    if serving.quantization:
        words += flag("--quantization", serving.quantization)
    return words


def _kv_cache(kv: KvCache) -> tuple[str, ...]:
    words: tuple[str, ...] = ()
    if kv.dtype:
        words += flag("--kv-cache-dtype", kv.dtype)
    if kv.gpu_memory_utilization:
        words += flag("--gpu-memory-utilization", decimal(kv.gpu_memory_utilization))
    if kv.block_size:
        words += flag("--block-size", kv.block_size)
    if kv.disable_prefix_caching:
        words += ("--no-enable-prefix-caching",)
    return words


def _disaggregation(role: Role) -> tuple[str, ...]:
    if role == "aggregated":
        return ()
    return (
        *flag("--disaggregation-mode", role),
        *flag("--kv-transfer-config", KV_TRANSFER_CONFIG),
    )


ENGINE = Engine(
    framework="vllm",
    runtime_image="vllm-runtime",
    # Dynamo's vLLM examples (examples/backends/vllm/deploy/agg.yaml, disagg.yaml).
    services=ServiceNames(
        aggregated="VllmDecodeWorker", prefill="VllmPrefillWorker", decode="VllmDecodeWorker"
    ),
    main_container=main_container,
)
