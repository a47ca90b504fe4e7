"""The serving digest across releases (hub/serving.py, docs/rollouts.md).

A digest change rolls every pod of a deployment. So the digests of configurations stored by
today's schema are pinned here as literals: no later change (a refactor, a new serving field)
may move them. A field added later enters the digest only when set off its default.
"""

from __future__ import annotations

import dataclasses

import pytest

from hub import serving
from hub.model import KvCache, Serving

# Stored configurations exactly as the hub writes them today (hub/store: serving.encode), with
# the digest each one has had since the digest was defined.
STORED = [
    (
        "minimal vllm",
        '{"context_length":0,"decode_workers":1,"engine":"vllm","engine_args":[],'
        '"engine_version":"0.11.0","expert_parallel":1,"image":"","kv_cache":{"block_size":0,'
        '"disable_prefix_caching":false,"dtype":"","gpu_memory_utilization":0.0},'
        '"mode":"aggregated","model":"meta-llama/Llama-3.3-70B-Instruct","pipeline_parallel":1,'
        '"prefill_workers":1,"quantization":"","router_mode":"","tensor_parallel":1}',
        "svg_5fd850bb001d3075",
    ),
    (
        "tensor parallel 4",
        '{"context_length":0,"decode_workers":1,"engine":"vllm","engine_args":[],'
        '"engine_version":"0.11.0","expert_parallel":1,"image":"","kv_cache":{"block_size":0,'
        '"disable_prefix_caching":false,"dtype":"","gpu_memory_utilization":0.0},'
        '"mode":"aggregated","model":"meta-llama/Llama-3.3-70B-Instruct","pipeline_parallel":1,'
        '"prefill_workers":1,"quantization":"","router_mode":"","tensor_parallel":4}',
        "svg_c460adc57ce58de0",
    ),
    (
        "every field set",
        '{"context_length":32768,"decode_workers":1,"engine":"sglang",'
        '"engine_args":["--enforce-eager","--max-num-seqs=256"],"engine_version":"0.5.2",'
        '"expert_parallel":2,"image":"nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.5.0",'
        '"kv_cache":{"block_size":32,"disable_prefix_caching":true,"dtype":"fp8",'
        '"gpu_memory_utilization":0.9},"mode":"aggregated","model":"Qwen/Qwen2.5-72B-Instruct",'
        '"pipeline_parallel":2,"prefill_workers":1,"quantization":"fp8","router_mode":"kv",'
        '"tensor_parallel":4}',
        "svg_2d1efeed81c5ad36",
    ),
    (
        "disaggregated",
        '{"context_length":0,"decode_workers":2,"engine":"trtllm","engine_args":[],'
        '"engine_version":"1.0.0","expert_parallel":1,"image":"","kv_cache":{"block_size":0,'
        '"disable_prefix_caching":false,"dtype":"","gpu_memory_utilization":0.0},'
        '"mode":"disaggregated","model":"nvidia/Llama-3.1-8B-Instruct-FP8","pipeline_parallel":1,'
        '"prefill_workers":1,"quantization":"","router_mode":"","tensor_parallel":2}',
        "svg_b79fe6e1b80c59f8",
    ),
]


@pytest.mark.parametrize(("case", "stored", "pinned"), STORED, ids=[c[0] for c in STORED])
def test_stored_configurations_keep_their_digest(case: str, stored: str, pinned: str) -> None:
    config = serving.decode(stored)
    assert serving.digest(config) == pinned, case
    # Normalizing again (every update does) and storing again move nothing.
    assert serving.digest(serving.normalize(config)) == pinned, case
    assert serving.encode(config) == stored, case


# A later release's schema, simulated: the same classes with one more field each, at a default.
@dataclasses.dataclass(frozen=True)
class KvCacheNext(KvCache):
    cpu_offload_gb: int = 0


@dataclasses.dataclass(frozen=True)
class ServingNext(Serving):
    speculative_tokens: int = 0


def _next_release(
    config: Serving, *, cpu_offload_gb: int = 0, speculative_tokens: int = 0
) -> ServingNext:
    """The config as the next release would read it from the store."""
    document: dict[str, object] = {
        f.name: getattr(config, f.name) for f in dataclasses.fields(config)
    }
    kv: dict[str, object] = {
        f.name: getattr(config.kv_cache, f.name) for f in dataclasses.fields(KvCache)
    }
    document["kv_cache"] = KvCacheNext(**kv, cpu_offload_gb=cpu_offload_gb)  # type: ignore[arg-type]
    return ServingNext(**document, speculative_tokens=speculative_tokens)  # type: ignore[arg-type]


@pytest.mark.parametrize(("case", "stored", "pinned"), STORED, ids=[c[0] for c in STORED])
def test_a_new_serving_field_at_its_default_moves_no_digest(
    case: str, stored: str, pinned: str
) -> None:
    upgraded = _next_release(serving.decode(stored))
    assert serving.digest(upgraded) == pinned, case


def test_a_new_field_set_off_its_default_changes_the_digest() -> None:
    config = serving.decode(STORED[1][1])
    kv_knob = serving.digest(_next_release(config, cpu_offload_gb=16))
    speculative = serving.digest(_next_release(config, speculative_tokens=4))
    assert len({kv_knob, speculative, STORED[1][2]}) == 3


def test_pinned_fields_still_enter_at_their_default() -> None:
    # The first schema hashed every field, defaults included; a pinned field keeps doing so
    # (else today's digests would move). Setting one to its default is still a change.
    config = serving.decode(STORED[2][1])
    for changes in (
        {"context_length": 0},
        {"quantization": ""},
        {"engine_args": ()},
        {"router_mode": ""},
        {"image": ""},
        {"kv_cache": KvCache()},
    ):
        changed = dataclasses.replace(config, **changes)
        assert serving.digest(changed) != STORED[2][2], changes
