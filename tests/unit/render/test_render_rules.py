"""The renderer's rules, one table each: layout, replicas, GPUs, flags, labels, image,
what a scale may change, what is refused, and determinism."""

from __future__ import annotations

import copy
import dataclasses
import math
import subprocess
from typing import Any

import pytest
import yaml

from agent.cluster import port
from agent.model import DeploymentSpec
from agent.render import dgd, trtllm
from agent.render.errors import InvalidField, RenderError, UnsupportedEngine
from tests.unit.render.builders import (
    make_deployment,
    make_kv_cache,
    make_serving,
    to_yaml,
    with_serving,
)

NAMESPACE = "serving"
ENGINES = ("vllm", "sglang", "trtllm")
MODES = ("aggregated", "disaggregated")
ENGINE_MODES = [pytest.param(e, m, id=f"{e}-{m}") for e in ENGINES for m in MODES]
RUNTIME = {"vllm": "vllm-runtime", "sglang": "sglang-runtime", "trtllm": "tensorrtllm-runtime"}
KV = make_kv_cache


def render(spec: DeploymentSpec, **kwargs: Any) -> dict[str, Any]:
    return dgd.render_dgd(spec, namespace=kwargs.pop("namespace", NAMESPACE), **kwargs)


def spec_for(engine: str, mode: str, **serving: Any) -> DeploymentSpec:
    return make_deployment(serving=make_serving(engine=engine, mode=mode, **serving))


def services(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = manifest["spec"]["services"]
    return result


def workers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in services(manifest).items() if v["componentType"] == "worker"}


def argv(service: dict[str, Any]) -> list[str]:
    container = service["extraPodSpec"]["mainContainer"]
    words: list[str] = [*container["command"], *container.get("args", [])]
    return words


def has_words(words: list[str], expected: tuple[str, ...]) -> bool:
    """`expected` appears in `words` as one contiguous run."""
    n = len(expected)
    return any(tuple(words[i : i + n]) == expected for i in range(len(words) - n + 1))


def changed_paths(a: Any, b: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(a, dict) and isinstance(b, dict):
        paths: list[tuple[Any, ...]] = []
        for key in [*a, *(k for k in b if k not in a)]:
            if key in a and key in b:
                paths += changed_paths(a[key], b[key], (*path, key))
            else:
                paths.append((*path, key))
        return paths
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            p
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for p in changed_paths(x, y, (*path, i))
        ]
    return [] if a == b else [path]


# --- layout ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "mode", "expected"),
    [
        ("vllm", "aggregated", {"VllmDecodeWorker": None}),
        ("vllm", "disaggregated", {"VllmPrefillWorker": "prefill", "VllmDecodeWorker": "decode"}),
        ("sglang", "aggregated", {"SGLangDecodeWorker": None}),
        (
            "sglang",
            "disaggregated",
            {"SGLangPrefillWorker": "prefill", "SGLangDecodeWorker": "decode"},
        ),
        ("trtllm", "aggregated", {"TRTLLMWorker": None}),
        (
            "trtllm",
            "disaggregated",
            {"TRTLLMPrefillWorker": "prefill", "TRTLLMDecodeWorker": "decode"},
        ),
    ],
)
def test_workers_are_named_and_typed_as_dynamo_examples_do(
    engine: str, mode: str, expected: dict[str, str | None]
) -> None:
    manifest = render(spec_for(engine, mode))
    assert list(services(manifest)) == ["Frontend", *expected]
    assert manifest["spec"]["backendFramework"] == engine
    for name, sub_component in expected.items():
        service = services(manifest)[name]
        assert service["componentType"] == "worker"
        assert service.get("subComponentType") == sub_component


@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_the_manifest_names_the_dgd_after_the_workload(engine: str, mode: str) -> None:
    manifest = render(spec_for(engine, mode), namespace="team-a")
    assert manifest["apiVersion"] == "nvidia.com/v1alpha1"
    assert manifest["kind"] == "DynamoGraphDeployment"
    assert manifest["metadata"]["name"] == "qwen-chat"
    assert manifest["metadata"]["namespace"] == "team-a"


@pytest.mark.parametrize(
    ("router_mode", "expected_args"),
    [
        ("", None),
        ("round_robin", ["--router-mode", "round-robin"]),
        ("kv", ["--router-mode", "kv"]),
    ],
)
def test_the_frontend_is_one_gpu_less_replica_with_the_router_mode(
    router_mode: str, expected_args: list[str] | None
) -> None:
    frontend = services(render(make_deployment(serving=make_serving(router_mode=router_mode))))[
        "Frontend"
    ]
    assert frontend["componentType"] == "frontend"
    assert frontend["replicas"] == 1
    assert "resources" not in frontend
    container = frontend["extraPodSpec"]["mainContainer"]
    assert container["command"] == ["python3", "-m", "dynamo.frontend"]
    assert container.get("args") == expected_args


# --- replicas and GPUs -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "replicas", "prefill_workers", "decode_workers", "expected"),
    [
        ("aggregated", 3, 1, 1, {"aggregated": 3}),
        ("aggregated", 0, 1, 1, {"aggregated": 0}),
        # Disaggregated worker counts are per replica; they do not apply when aggregated.
        ("aggregated", 2, 4, 4, {"aggregated": 2}),
        ("disaggregated", 1, 1, 1, {"prefill": 1, "decode": 1}),
        ("disaggregated", 3, 2, 1, {"prefill": 6, "decode": 3}),
        ("disaggregated", 2, 1, 4, {"prefill": 2, "decode": 8}),
        ("disaggregated", 0, 2, 3, {"prefill": 0, "decode": 0}),
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
def test_worker_replicas_are_deployment_replicas_times_workers_per_role(
    engine: str,
    mode: str,
    replicas: int,
    prefill_workers: int,
    decode_workers: int,
    expected: dict[str, int],
) -> None:
    spec = make_deployment(
        replicas=replicas,
        serving=make_serving(
            engine=engine,
            mode=mode,
            prefill_workers=prefill_workers,
            decode_workers=decode_workers,
        ),
    )
    by_role = {
        s.get("subComponentType", "aggregated"): s["replicas"]
        for s in workers(render(spec)).values()
    }
    assert by_role == expected


@pytest.mark.parametrize(("tp", "pp"), [(1, 1), (2, 1), (1, 2), (4, 2), (8, 1), (2, 8)])
@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_each_worker_requests_and_limits_tp_times_pp_gpus(
    engine: str, mode: str, tp: int, pp: int
) -> None:
    manifest = render(spec_for(engine, mode, tensor_parallel=tp, pipeline_parallel=pp))
    for service in workers(manifest).values():
        assert service["resources"] == {
            "requests": {"gpu": str(tp * pp)},
            "limits": {"gpu": str(tp * pp)},
        }


@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_gpus_rendered_per_replica_match_what_admission_reserved(engine: str, mode: str) -> None:
    spec = make_deployment(
        replicas=3,
        serving=make_serving(
            engine=engine, mode=mode, tensor_parallel=2, prefill_workers=2, decode_workers=3
        ),
    )
    total = sum(
        int(s["resources"]["limits"]["gpu"]) * s["replicas"] for s in workers(render(spec)).values()
    )
    assert total == spec.replicas * spec.devices_per_replica


# --- what a scale changes ----------------------------------------------------------------


@pytest.mark.parametrize(("before", "after"), [(1, 4), (4, 1), (0, 2), (2, 0)])
@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_changing_only_replicas_changes_only_worker_replicas_fields(
    engine: str, mode: str, before: int, after: int
) -> None:
    spec = spec_for(engine, mode, prefill_workers=2, decode_workers=1, router_mode="kv")
    old = render(dataclasses.replace(spec, replicas=before))
    new = render(dataclasses.replace(spec, replicas=after))
    paths = changed_paths(old, new)
    assert paths, "the replica counts should differ"
    worker_names = set(workers(old))
    for path in paths:
        assert path[:2] == ("spec", "services")
        assert path[2] in worker_names
        assert path[3:] == ("replicas",)


@pytest.mark.parametrize("replicas", [0, 1, 7])
@pytest.mark.parametrize("engine", ENGINES)
def test_the_image_does_not_depend_on_the_replica_count(engine: str, replicas: int) -> None:
    manifest = render(make_deployment(replicas=replicas, serving=make_serving(engine=engine)))
    images = {s["extraPodSpec"]["mainContainer"]["image"] for s in services(manifest).values()}
    assert images == {f"nvcr.io/nvidia/ai-dynamo/{RUNTIME[engine]}:{dgd.DEFAULT_DYNAMO_TAG}"}


# --- image -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("serving_image", "images", "expected"),
    [
        ("", None, f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{dgd.DEFAULT_DYNAMO_TAG}"),
        ("", {}, f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{dgd.DEFAULT_DYNAMO_TAG}"),
        (
            "",
            {"sglang": "mirror/sglang:1"},
            f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{dgd.DEFAULT_DYNAMO_TAG}",
        ),
        ("", {"vllm": ""}, f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{dgd.DEFAULT_DYNAMO_TAG}"),
        ("", {"vllm": "mirror.local/vllm-runtime:1.3.1"}, "mirror.local/vllm-runtime:1.3.1"),
        ("my/vllm:dev", {"vllm": "mirror.local/vllm-runtime:1.3.1"}, "my/vllm:dev"),
        ("my/vllm:dev", None, "my/vllm:dev"),
    ],
)
def test_the_image_is_the_workloads_then_the_agents_then_dynamos(
    serving_image: str, images: dict[str, str] | None, expected: str
) -> None:
    manifest = render(
        make_deployment(serving=make_serving(image=serving_image)),
        images=images,
        operator_version="1.5.0",  # for the untagged ones (tests/unit/render/test_runtime_...)
    )
    for service in services(manifest).values():
        assert service["extraPodSpec"]["mainContainer"]["image"] == expected


# --- labels --------------------------------------------------------------------------------


@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_our_labels_are_on_the_dgd_and_on_every_services_pods(engine: str, mode: str) -> None:
    spec = spec_for(engine, mode, engine_version="1.2.3")
    expected = {
        port.LABEL_DEPLOYMENT_ID: spec.deployment_id,
        port.LABEL_SERVING_DIGEST: spec.serving_digest,
        port.LABEL_WORKLOAD: spec.workload_id,
        port.LABEL_ENGINE_VERSION: "1.2.3",
        port.LABEL_MANAGED_BY: port.MANAGED_BY,
    }
    manifest = render(spec)
    assert manifest["metadata"]["labels"] == expected
    for service in services(manifest).values():
        assert service["labels"] == expected
        assert service["extraPodMetadata"]["labels"] == expected


# --- engine flags ----------------------------------------------------------------------------

ODD_ARGS = ("--max-num-seqs", "256", "--json", '{"a": "b c"}', "it's", "$HOME", "--x=1 2")


@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_engine_args_are_appended_verbatim_after_the_rendered_flags(engine: str, mode: str) -> None:
    manifest = render(spec_for(engine, mode, engine_args=ODD_ARGS))
    for service in workers(manifest).values():
        assert argv(service)[-len(ODD_ARGS) :] == list(ODD_ARGS)
    assert not has_words(argv(services(manifest)["Frontend"]), ODD_ARGS[:2])


FLAG_CASES = [
    ("vllm", {}, ("--model", "Qwen/Qwen3-0.6B")),
    ("vllm", {}, ("--tensor-parallel-size", "1", "--pipeline-parallel-size", "1")),
    ("vllm", {"tensor_parallel": 4, "pipeline_parallel": 2}, ("--tensor-parallel-size", "4")),
    ("vllm", {"tensor_parallel": 4, "pipeline_parallel": 2}, ("--pipeline-parallel-size", "2")),
    ("vllm", {"tensor_parallel": 4, "expert_parallel": 2}, ("--enable-expert-parallel",)),
    ("vllm", {"context_length": 8192}, ("--max-model-len", "8192")),
    ("vllm", {"quantization": "awq"}, ("--quantization", "awq")),
    ("vllm", {"kv_cache": KV(dtype="fp8")}, ("--kv-cache-dtype", "fp8")),
    ("vllm", {"kv_cache": KV(gpu_memory_utilization=0.9)}, ("--gpu-memory-utilization", "0.9")),
    ("vllm", {"kv_cache": KV(block_size=16)}, ("--block-size", "16")),
    ("vllm", {"kv_cache": KV(disable_prefix_caching=True)}, ("--no-enable-prefix-caching",)),
    ("sglang", {}, ("--model-path", "Qwen/Qwen3-0.6B", "--tp", "1", "--pp-size", "1")),
    ("sglang", {"tensor_parallel": 8, "expert_parallel": 4}, ("--ep-size", "4")),
    ("sglang", {"context_length": 4096}, ("--context-length", "4096")),
    ("sglang", {"quantization": "fp8"}, ("--quantization", "fp8")),
    ("sglang", {"kv_cache": KV(dtype="fp8_e4m3")}, ("--kv-cache-dtype", "fp8_e4m3")),
    ("sglang", {"kv_cache": KV(gpu_memory_utilization=0.8)}, ("--mem-fraction-static", "0.8")),
    ("sglang", {"kv_cache": KV(block_size=32)}, ("--page-size", "32")),
    ("sglang", {"kv_cache": KV(disable_prefix_caching=True)}, ("--disable-radix-cache",)),
    ("trtllm", {}, ("--model-path", "Qwen/Qwen3-0.6B", "--tensor-parallel-size", "1")),
    (
        "trtllm",
        {"kv_cache": KV(gpu_memory_utilization=0.75)},
        ("--free-gpu-memory-fraction", "0.75"),
    ),
    ("trtllm", {"kv_cache": KV(block_size=64)}, ("--kv-block-size", "64")),
]


def only_worker(engine: str, **serving: Any) -> dict[str, Any]:
    (worker,) = workers(
        render(make_deployment(serving=make_serving(engine=engine, **serving)))
    ).values()
    return worker


@pytest.mark.parametrize(("engine", "serving", "expected"), FLAG_CASES)
def test_serving_fields_become_the_engines_flags(
    engine: str, serving: dict[str, Any], expected: tuple[str, ...]
) -> None:
    words = argv(only_worker(engine, **serving))
    assert has_words(words, expected), words


@pytest.mark.parametrize(
    ("engine", "optional"),
    [
        ("vllm", ["--enable-expert-parallel", "--max-model-len", "--quantization", "--block-size"]),
        ("vllm", ["--kv-cache-dtype", "--gpu-memory-utilization", "--no-enable-prefix-caching"]),
        ("sglang", ["--ep-size", "--context-length", "--quantization", "--kv-cache-dtype"]),
        ("sglang", ["--mem-fraction-static", "--page-size", "--disable-radix-cache"]),
        ("trtllm", ["--free-gpu-memory-fraction", "--kv-block-size", "--disaggregation-mode"]),
    ],
)
def test_fields_left_at_their_default_render_no_flag(engine: str, optional: list[str]) -> None:
    words = argv(only_worker(engine))
    assert not set(optional) & set(words)


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ("vllm", ("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')),
        ("sglang", ("--disaggregation-transfer-backend", "nixl")),
        ("trtllm", ()),
    ],
)
def test_disaggregated_workers_carry_their_role_and_transfer_flags(
    engine: str, expected: tuple[str, ...]
) -> None:
    manifest = render(spec_for(engine, "disaggregated"))
    for service in workers(manifest).values():
        words = argv(service)
        assert has_words(words, ("--disaggregation-mode", service["subComponentType"]))
        assert has_words(words, expected)
    (aggregated,) = workers(render(spec_for(engine, "aggregated"))).values()
    assert "--disaggregation-mode" not in argv(aggregated)


def trtllm_engine_args(service: dict[str, Any]) -> dict[str, Any]:
    (env,) = service["extraPodSpec"]["mainContainer"]["env"]
    assert env["name"] == trtllm.ENGINE_ARGS_ENV
    parsed: dict[str, Any] = yaml.safe_load(env["value"])
    return parsed


@pytest.mark.parametrize(
    ("serving", "expected"),
    [
        ({}, {"tensor_parallel_size": 1, "pipeline_parallel_size": 1}),
        (
            {"tensor_parallel": 4, "pipeline_parallel": 2, "expert_parallel": 4},
            {"tensor_parallel_size": 4, "pipeline_parallel_size": 2, "moe_expert_parallel_size": 4},
        ),
        ({"context_length": 4096}, {"max_seq_len": 4096}),
        ({"quantization": "fp8"}, {"quant_config": {"quant_algo": "FP8"}}),
        ({"quantization": "awq"}, {"quant_config": {"quant_algo": "W4A16_AWQ"}}),
        (
            {"quantization": "w8a8_sq_per_channel"},
            {"quant_config": {"quant_algo": "W8A8_SQ_PER_CHANNEL"}},
        ),
        (
            {"kv_cache": KV(dtype="fp8", gpu_memory_utilization=0.5, disable_prefix_caching=True)},
            {
                "kv_cache_config": {
                    "dtype": "fp8",
                    "free_gpu_memory_fraction": 0.5,
                    "enable_block_reuse": False,
                }
            },
        ),
    ],
)
def test_trtllm_takes_the_rest_from_its_engine_args_yaml(
    serving: dict[str, Any], expected: dict[str, Any]
) -> None:
    worker = only_worker("trtllm", **serving)
    config = trtllm_engine_args(worker)
    assert config.items() >= expected.items()
    assert has_words(argv(worker), ("--extra-engine-args", trtllm.ENGINE_ARGS_PATH))


def test_trtllm_disaggregated_roles_get_the_cache_transceiver() -> None:
    by_role = {
        s["subComponentType"]: trtllm_engine_args(s)
        for s in workers(render(spec_for("trtllm", "disaggregated"))).values()
    }
    assert by_role["prefill"]["cache_transceiver_config"] == {"backend": "DEFAULT"}
    assert by_role["decode"]["cache_transceiver_config"] == {"backend": "DEFAULT"}
    assert by_role["prefill"]["disable_overlap_scheduler"] is True
    assert "disable_overlap_scheduler" not in by_role["decode"]


def test_the_trtllm_wrapper_writes_the_yaml_then_runs_the_argv_untouched(tmp_path: Any) -> None:
    container = only_worker("trtllm")["extraPodSpec"]["mainContainer"]
    target = tmp_path / "engine-args.yaml"
    # The real path is a fixed /tmp file inside the pod; aim it at this test's own directory.
    command = [word.replace(trtllm.ENGINE_ARGS_PATH, str(target)) for word in container["command"]]
    # Stand-in for the engine: print each argv word, so quoting damage would show.
    engine = ["printf", "%s|", *ODD_ARGS]
    (env,) = container["env"]
    result = subprocess.run(
        [*command, *engine],
        env={"PATH": "/usr/bin:/bin", env["name"]: env["value"]},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    assert result.stdout == "".join(f"{word}|" for word in ODD_ARGS)
    assert target.read_text() == env["value"]


# --- refusals ------------------------------------------------------------------------------


def served(**serving: Any) -> DeploymentSpec:
    return make_deployment(serving=make_serving(**serving))


REFUSALS = [
    ("expert parallel not dividing tp", served(tensor_parallel=4, expert_parallel=3),
     "serving.expert_parallel"),
    ("unknown mode", served(mode="hybrid"), "serving.mode"),
    ("unknown router mode", served(router_mode="random"), "serving.router_mode"),
    ("disaggregated without prefill workers", served(mode="disaggregated", prefill_workers=0),
     "serving.disaggregation.prefill_workers"),
    ("disaggregated without decode workers", served(mode="disaggregated", decode_workers=0),
     "serving.disaggregation.decode_workers"),
    ("zero tensor parallel", served(tensor_parallel=0), "serving.tensor_parallel"),
    ("negative pipeline parallel", served(pipeline_parallel=-1), "serving.pipeline_parallel"),
    ("no model", served(model=""), "serving.model"),
    ("negative context length", served(context_length=-1), "serving.context_length"),
    ("memory utilization above 1", served(kv_cache=KV(gpu_memory_utilization=1.5)),
     "serving.kv_cache.gpu_memory_utilization"),
    ("memory utilization nan", served(kv_cache=KV(gpu_memory_utilization=math.nan)),
     "serving.kv_cache.gpu_memory_utilization"),
    ("negative block size", served(kv_cache=KV(block_size=-16)), "serving.kv_cache.block_size"),
    ("nul in engine args", served(engine_args=("--x", "a\x00b")), "serving.engine_args[1]"),
    ("negative replicas", make_deployment(replicas=-1), "replicas"),
    ("workload name not a dns label", make_deployment(workload_name="Qwen_Chat"),
     "workload_name"),
    ("workload name too long", make_deployment(workload_name="q" * 41), "workload_name"),
    ("engine version not a label value", served(engine_version="0.11.0+cu128"),
     "serving.engine_version"),
    ("digest longer than a label value", make_deployment(serving_digest="svg_" + "0" * 64),
     "serving_digest"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "field"), [pytest.param(s, f, id=i) for i, s, f in REFUSALS])
def test_what_a_dgd_cannot_express_is_refused_naming_the_field(
    spec: DeploymentSpec, field: str
) -> None:
    with pytest.raises(InvalidField) as raised:
        render(spec)
    assert isinstance(raised.value, RenderError)
    assert raised.value.field == field


@pytest.mark.parametrize("namespace", ["Serving", "", "a" * 64, "team_a"])
def test_a_namespace_that_is_not_a_dns_label_is_refused(namespace: str) -> None:
    with pytest.raises(InvalidField) as raised:
        render(make_deployment(), namespace=namespace)
    assert raised.value.field == "namespace"


@pytest.mark.parametrize("images", [None, {"llamacpp": "mirror/llamacpp:1"}])
def test_an_unknown_engine_is_refused_even_with_an_image_configured_for_it(
    images: dict[str, str] | None,
) -> None:
    with pytest.raises(UnsupportedEngine) as raised:
        render(served(engine="llamacpp"), images=images)
    assert isinstance(raised.value, RenderError)
    assert raised.value.engine == "llamacpp"


# --- determinism ---------------------------------------------------------------------------


@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
def test_the_same_spec_renders_to_byte_identical_yaml(engine: str, mode: str) -> None:
    tuned = dict(
        tensor_parallel=4,
        expert_parallel=2,
        context_length=4096,
        quantization="fp8",
        kv_cache=KV(dtype="fp8", gpu_memory_utilization=0.9, block_size=32),
        router_mode="kv",
        engine_args=("--a", "b"),
    )
    first = to_yaml(render(spec_for(engine, mode, **tuned)))
    second = to_yaml(render(spec_for(engine, mode, **tuned)))
    assert first == second
    # Shared sub-objects would dump as &anchors/*aliases, which Kubernetes tooling mangles.
    assert "&id" not in first and "*id" not in first


def test_callers_may_mutate_a_manifest_without_affecting_the_next_one() -> None:
    spec = with_serving(make_deployment(), router_mode="kv", engine_args=("--a", "b"))
    first = render(spec)
    pristine = copy.deepcopy(first)
    first["metadata"]["labels"]["extra"] = "x"
    frontend = services(first)["Frontend"]["extraPodSpec"]["mainContainer"]
    frontend["args"].append("--y")
    worker = services(first)["VllmDecodeWorker"]
    worker["extraPodSpec"]["mainContainer"]["args"].append("--z")
    worker["extraPodMetadata"]["labels"].clear()
    assert render(spec) == pristine
