"""Serving configs (hub/serving.py): validation, normalization, digests."""

from __future__ import annotations

import dataclasses

import pytest

from hub import errors, serving
from hub.model import KvCache, Serving

BASE = Serving(engine="vllm", engine_version="0.11.0", model="meta-llama/Llama-3.3-70B-Instruct")


def test_defaults_resolve_zero_parallelism_to_one() -> None:
    normalized = serving.normalize(
        dataclasses.replace(BASE, tensor_parallel=0, pipeline_parallel=0)
    )
    assert (
        normalized.tensor_parallel,
        normalized.pipeline_parallel,
        normalized.expert_parallel,
    ) == (1, 1, 1)


@pytest.mark.parametrize(
    ("case", "changes", "devices"),
    [
        ("tp x pp", {"tensor_parallel": 4, "pipeline_parallel": 2}, 8),
        ("expert parallel adds no devices", {"tensor_parallel": 8, "expert_parallel": 8}, 8),
        (
            "disaggregated counts every worker",
            {
                "tensor_parallel": 2,
                "mode": "disaggregated",
                "prefill_workers": 1,
                "decode_workers": 2,
            },
            6,
        ),
    ],
)
def test_devices_per_replica(case: str, changes: dict[str, object], devices: int) -> None:
    assert serving.normalize(dataclasses.replace(BASE, **changes)).devices_per_replica == devices, (
        case
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"engine": "vlm"}, "serving.engine"),
        ({"engine": ""}, "serving.engine"),
        ({"engine_version": ""}, "serving.engine_version"),
        ({"engine_version": "0.11.0+cu128"}, "serving.engine_version"),
        ({"model": ""}, "serving.model"),
        ({"tensor_parallel": -1}, "serving.tensor_parallel"),
        ({"tensor_parallel": 4, "expert_parallel": 3}, "serving.expert_parallel"),
        ({"context_length": -5}, "serving.context_length"),
        ({"quantization": "FP 8"}, "serving.quantization"),
        (
            {"kv_cache": KvCache(gpu_memory_utilization=1.5)},
            "serving.kv_cache.gpu_memory_utilization",
        ),
        ({"engine_args": ("--ok", "")}, "serving.engine_args[1]"),
        ({"mode": "both"}, "serving.mode"),
        ({"router_mode": "random"}, "serving.router_mode"),
    ],
)
def test_invalid_configs_name_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(errors.InvalidArgument) as caught:
        serving.normalize(dataclasses.replace(BASE, **changes))  # type: ignore[arg-type]
    assert caught.value.field == field


def test_digest_is_stable_and_has_the_documented_shape() -> None:
    digest = serving.digest(serving.normalize(BASE))
    assert digest == serving.digest(serving.normalize(BASE))
    assert digest.startswith("svg_") and len(digest) == 20


def test_digest_changes_with_every_serving_field_and_only_then() -> None:
    base = serving.normalize(BASE)
    for changes in (
        {"engine_version": "0.12.0"},
        {"model": "other/model"},
        {"context_length": 4096},
        {"tensor_parallel": 2},
        {"quantization": "fp8"},
        {"kv_cache": KvCache(dtype="fp8")},
        {"engine_args": ("--enforce-eager",)},
    ):
        changed = serving.normalize(dataclasses.replace(base, **changes))  # type: ignore[arg-type]
        assert serving.digest(changed) != serving.digest(base), changes
    assert serving.digest(serving.from_document(serving.to_document(base))) == serving.digest(base)


def test_a_known_digest_does_not_drift_across_releases() -> None:
    # Same config, same digest, on every machine: pin one value so a refactor cannot change it.
    assert serving.digest(serving.normalize(BASE)) == serving.digest(serving.normalize(BASE))
    pinned = serving.normalize(dataclasses.replace(BASE, tensor_parallel=4))
    assert serving.digest(pinned) == PINNED_DIGEST


PINNED_DIGEST = "svg_c460adc57ce58de0"


@pytest.mark.parametrize(
    "image",
    [
        "mirror/vllm:1.3.1.post1",
        "mirror/vllm:01.3.1",
        "mirror/vllm:1.3.1-rc.01",
        "mirror/vllm:1.3.1-",
        "mirror/vllm:latest",
        "mirror/vllm",
        "mirror/vllm@sha256:" + "0" * 64,
    ],
)
def test_an_image_dynamo_cannot_read_a_version_off_needs_the_runtime_version(image: str) -> None:
    with pytest.raises(errors.InvalidArgument) as refused:
        serving.normalize(dataclasses.replace(BASE, image=image))
    assert refused.value.field == "serving.runtime_version"
    ok = serving.normalize(dataclasses.replace(BASE, image=image, runtime_version="1.5.0"))
    assert ok.runtime_version == "1.5.0"


@pytest.mark.parametrize(
    "image", ["mirror/vllm:1.5.0", "mirror/vllm:v1.5.0-rc.1", "host:5000/vllm:1.0.0"]
)
def test_a_versioned_image_needs_none(image: str) -> None:
    assert serving.normalize(dataclasses.replace(BASE, image=image)).runtime_version == ""


@pytest.mark.parametrize("bad", ["1.5", "v1.5.0", "1.5.0-rc.1", "01.5.0", "10000.0.0"])
def test_a_runtime_version_not_in_the_crds_form_is_refused(bad: str) -> None:
    with pytest.raises(errors.InvalidArgument) as refused:
        serving.normalize(dataclasses.replace(BASE, runtime_version=bad))
    assert refused.value.field == "serving.runtime_version"


def test_the_hub_and_the_agent_read_image_tags_alike() -> None:
    from tests.unit.render.test_runtime_version import NOT_VERSIONS, VERSIONS

    for tag in VERSIONS:
        assert serving.image_versioned(f"mirror/vllm:{tag}"), tag
    for tag in NOT_VERSIONS:
        assert not serving.image_versioned(f"mirror/vllm:{tag}" if tag else "mirror/vllm"), tag


def test_a_runtime_version_enters_the_digest_only_when_set() -> None:
    plain = serving.normalize(BASE)
    assert serving.digest(plain) == serving.digest(dataclasses.replace(plain, runtime_version=""))
    pinned = dataclasses.replace(plain, runtime_version="1.5.0")
    assert serving.digest(pinned) != serving.digest(plain)


@pytest.mark.parametrize(
    "model",
    [
        "meta-llama/Llama-3.3-70B-Instruct",
        "Qwen/Qwen3-30B-A3B",
        "nvidia/Qwen3-30B-A3B-FP8",
        "gpt2",
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        "/models/llama-70b",
        "/mnt/weights/org_name/v1.2",
    ],
)
def test_a_model_reference_the_engines_accept_is_kept(model: str) -> None:
    assert serving.normalize(dataclasses.replace(BASE, model=model)).model == model


@pytest.mark.parametrize(
    "model",
    [
        "org/name\t",
        "org/na\tme",
        "org/name\r\nimage: evil",
        "org/name\n",
        " org/name",
        "..",
        "../x",
        "org/../name",
        "org/name/..",
        "org/na..me",
        "org/na--me",
        "a/b/c",
        "-org/name",
        "org/name.",
        "models/llama-70b/",
        "/models/../etc/passwd",
        "/models/./x",
        "/models//x",
        "/",
        "hf://org/name",
        "org/" + "n" * 97,
        "/" + "m" * 600,
    ],
)
def test_a_model_reference_with_control_characters_or_traversal_is_refused(model: str) -> None:
    with pytest.raises(errors.InvalidArgument) as caught:
        serving.normalize(dataclasses.replace(BASE, model=model))
    assert caught.value.field == "serving.model"
