"""TensorRT-LLM worker flags (`python3 -m dynamo.trtllm`) and its extra-engine-args YAML.

Used by `agent.render.dgd` through `ENGINE`. dynamo.trtllm takes a few settings as flags
(model, TP, free GPU memory fraction, KV block size, disaggregation mode) and the rest of
TensorRT-LLM's LLM-API arguments only from a YAML file named by `--extra-engine-args`
(shared/reference/dynamo-dgd.md). A DGD cannot carry a file without a ConfigMap, and a
ConfigMap would be a second object to apply, garbage-collect and keep in step with the pod
template. So the YAML travels in the container's env and a one-line `sh -c` wrapper writes
it to a file, then `exec`s the engine with its argv untouched:

    command: [sh, -c, 'printf ... "$WINGSMITH_TRTLLM_ENGINE_ARGS" > /tmp/...yaml && exec "$@"', sh]
    args:    [python3, -m, dynamo.trtllm, --model-path, ..., --extra-engine-args, /tmp/...yaml]

The env value is part of the pod template, so a config change rolls the workers as any other
serving change does. The YAML is dumped with sorted keys: same serving, same bytes.
"""

from __future__ import annotations

from typing import Any

import yaml

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

ENGINE_ARGS_ENV = "WINGSMITH_TRTLLM_ENGINE_ARGS"
ENGINE_ARGS_PATH = "/tmp/wingsmith-trtllm-engine-args.yaml"
# "$@" keeps every argv word exactly as rendered (no shell quoting of engine_args); exec
# makes the engine the container's main process, so it gets the kubelet's signals.
WRAPPER = f'printf \'%s\' "${ENGINE_ARGS_ENV}" > {ENGINE_ARGS_PATH} && exec "$@"'

# Our quantization words (shared with vLLM and SGLang) -> TensorRT-LLM QuantAlgo names;
# anything else is passed upper-cased, which is how QuantAlgo spells its members.
_QUANT_ALGO = {
    "awq": "W4A16_AWQ",
    "gptq": "W4A16_GPTQ",
    "fp8": "FP8",
    "fp8_block": "FP8_BLOCK_SCALES",
    "nvfp4": "NVFP4",
}


def main_container(serving: Serving, role: Role) -> MainContainer:
    engine_argv = (
        *engine_module("dynamo.trtllm"),
        *_flags(serving, role),
        *flag("--extra-engine-args", ENGINE_ARGS_PATH),
    )
    return MainContainer(
        command=("sh", "-c", WRAPPER, "sh"),
        args=engine_argv,
        env=((ENGINE_ARGS_ENV, engine_args_yaml(serving, role)),),
    )


def engine_args_yaml(serving: Serving, role: Role) -> str:
    return yaml.safe_dump(engine_args(serving, role), sort_keys=True, default_flow_style=False)


def engine_args(serving: Serving, role: Role) -> dict[str, Any]:
    """The LLM-API arguments dynamo.trtllm takes only from the YAML."""
    config: dict[str, Any] = {
        "tensor_parallel_size": serving.tensor_parallel,
        "pipeline_parallel_size": serving.pipeline_parallel,
    }
    if serving.expert_parallel > 1:
        config["moe_expert_parallel_size"] = serving.expert_parallel
    if serving.context_length:
        config["max_seq_len"] = serving.context_length
    if serving.quantization:
        config["quant_config"] = {"quant_algo": quant_algo(serving.quantization)}
    kv_cache_config = _kv_cache_config(serving.kv_cache)
    if kv_cache_config:
        config["kv_cache_config"] = kv_cache_config
    if role != "aggregated":
        # Both roles of a pair move KV blocks through the cache transceiver.
        config["cache_transceiver_config"] = {"backend": "DEFAULT"}
    if role == "prefill":
        # TensorRT-LLM's overlap scheduler does not support prefill-only workers.
        config["disable_overlap_scheduler"] = True
    return config


def quant_algo(quantization: str) -> str:
    return _QUANT_ALGO.get(quantization, quantization.upper())


def _flags(serving: Serving, role: Role) -> tuple[str, ...]:
    kv = serving.kv_cache
    words: tuple[str, ...] = (
        *flag("--model-path", serving.model),
        *flag("--tensor-parallel-size", serving.tensor_parallel),
    )
    if kv.gpu_memory_utilization:
        words += flag("--free-gpu-memory-fraction", decimal(kv.gpu_memory_utilization))
    if kv.block_size:
        # A flag, not YAML: dynamo.trtllm needs the block size for the KV events it publishes
        # to the router as well as for the engine.
        words += flag("--kv-block-size", kv.block_size)
    if role != "aggregated":
        words += flag("--disaggregation-mode", role)
    return words


def _kv_cache_config(kv: KvCache) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if kv.gpu_memory_utilization:
        # Repeated from the flag on purpose: a kv_cache_config in the YAML replaces the one
        # dynamo.trtllm builds from --free-gpu-memory-fraction instead of merging with it.
        config["free_gpu_memory_fraction"] = float(kv.gpu_memory_utilization)
    if kv.dtype:
        config["dtype"] = kv.dtype
    if kv.disable_prefix_caching:
        config["enable_block_reuse"] = False
    return config


ENGINE = Engine(
    framework="trtllm",
    runtime_image="tensorrtllm-runtime",
    # Dynamo's TRT-LLM examples (agg.yaml: TRTLLMWorker; disagg_router.yaml:
    # TRTLLMPrefillWorker / TRTLLMDecodeWorker).
    services=ServiceNames(
        aggregated="TRTLLMWorker", prefill="TRTLLMPrefillWorker", decode="TRTLLMDecodeWorker"
    ),
    main_container=main_container,
)
