"""SGLang worker flags (`python3 -m dynamo.sglang`), from shared/reference/dynamo-dgd.md.

Used by `agent.render.dgd` through `ENGINE`. Same rule as vLLM: defaults are left out,
parallelism is always written. SGLang names things differently: the KV block is a "page",
the memory budget is `--mem-fraction-static`, prefix caching is the radix cache.
"""

from __future__ import annotations

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


def main_container(serving: Serving, role: Role) -> MainContainer:
    args = (
        *flag("--model-path", serving.model),
        *_parallelism(serving),
        *_model_limits(serving),
        *_kv_cache(serving.kv_cache),
        *_disaggregation(role),
    )
    return MainContainer(command=engine_module("dynamo.sglang"), args=args)


def _parallelism(serving: Serving) -> tuple[str, ...]:
    words: tuple[str, ...] = (
        *flag("--tp", serving.tensor_parallel),
        *flag("--pp-size", serving.pipeline_parallel),
    )
    if serving.expert_parallel > 1:
        words += flag("--ep-size", serving.expert_parallel)
    return words


def _model_limits(serving: Serving) -> tuple[str, ...]:
    words: tuple[str, ...] = ()
    if serving.context_length:
        words += flag("--context-length", serving.context_length)
    if serving.quantization:
        words += flag("--quantization", serving.quantization)
    return words


def _kv_cache(kv: KvCache) -> tuple[str, ...]:
    words: tuple[str, ...] = ()
    if kv.dtype:
        words += flag("--kv-cache-dtype", kv.dtype)
    if kv.gpu_memory_utilization:
        words += flag("--mem-fraction-static", decimal(kv.gpu_memory_utilization))
    if kv.block_size:
        words += flag("--page-size", kv.block_size)
    if kv.disable_prefix_caching:
        words += ("--disable-radix-cache",)
    return words


def _disaggregation(role: Role) -> tuple[str, ...]:
    if role == "aggregated":
        return ()
    # The bootstrap port is left at SGLang's default; engine_args can set it.
    return (
        *flag("--disaggregation-mode", role),
        *flag("--disaggregation-transfer-backend", "nixl"),
    )


ENGINE = Engine(
    framework="sglang",
    runtime_image="sglang-runtime",
    # Dynamo's SGLang examples and planner docs (SGLangDecodeWorker / SGLangPrefillWorker).
    services=ServiceNames(
        aggregated="SGLangDecodeWorker",
        prefill="SGLangPrefillWorker",
        decode="SGLangDecodeWorker",
    ),
    main_container=main_container,
)
