"""Golden files: the whole rendered DGD for each engine and mode, byte for byte.

A rendering change shows up here as a diff a reviewer can read. To accept an intended
change, rerun with WINGSMITH_UPDATE_GOLDEN=1 and review the rewritten files in
tests/unit/render/golden/.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from agent.cluster.port import Node
from agent.devices.node_labels import gfd_labels
from agent.model import DeploymentSpec
from agent.render import dgd
from tests.fake_kube.dynamo import DynamoCrd, validate
from tests.unit.render.builders import make_deployment, make_kv_cache, make_serving, to_yaml

GOLDEN = Path(__file__).parent / "golden"
NAMESPACE = "serving"
# A mixed cluster as GPU feature discovery labels it: workers must get node affinity for
# the H100 nodes only (agent/render/placement.py).
NODES = (
    Node(
        "h100-a",
        labels=gfd_labels(
            product_name="NVIDIA H100 80GB HBM3", memory_bytes=81559 * 2**20, count=8
        ),
    ),
    Node(
        "h100-b",
        labels=gfd_labels(
            product_name="NVIDIA H100 80GB HBM3", memory_bytes=81559 * 2**20, count=8
        ),
    ),
    Node(
        "a100-a",
        labels=gfd_labels(
            product_name="NVIDIA A100-SXM4-40GB", memory_bytes=40960 * 2**20, count=8
        ),
    ),
    Node("cpu-a"),
)

CASES: dict[str, DeploymentSpec] = {
    "vllm-aggregated": make_deployment(serving=make_serving(engine="vllm")),
    "vllm-disaggregated": make_deployment(
        serving=make_serving(engine="vllm", mode="disaggregated", tensor_parallel=2)
    ),
    "sglang-aggregated": make_deployment(
        serving=make_serving(engine="sglang", engine_version="0.5.3")
    ),
    "sglang-disaggregated": make_deployment(
        serving=make_serving(
            engine="sglang",
            engine_version="0.5.3",
            mode="disaggregated",
            prefill_workers=2,
            decode_workers=1,
        )
    ),
    "trtllm-aggregated": make_deployment(
        serving=make_serving(engine="trtllm", engine_version="1.1.0")
    ),
    "trtllm-disaggregated": make_deployment(
        serving=make_serving(engine="trtllm", engine_version="1.1.0", mode="disaggregated")
    ),
    # Every serving knob set, once per engine: the flag mapping in one readable file each.
    "vllm-tuned": make_deployment(
        replicas=3,
        serving=make_serving(
            engine="vllm",
            model="Qwen/Qwen3-30B-A3B",
            tensor_parallel=4,
            pipeline_parallel=2,
            expert_parallel=4,
            context_length=32768,
            quantization="fp8",
            kv_cache=make_kv_cache(
                dtype="fp8", gpu_memory_utilization=0.92, block_size=32, disable_prefix_caching=True
            ),
            router_mode="kv",
            engine_args=("--max-num-seqs", "256", "--enable-chunked-prefill"),
        ),
    ),
    "sglang-tuned": make_deployment(
        serving=make_serving(
            engine="sglang",
            engine_version="0.5.3",
            model="Qwen/Qwen3-30B-A3B",
            tensor_parallel=4,
            expert_parallel=2,
            context_length=16384,
            quantization="fp8",
            kv_cache=make_kv_cache(
                dtype="fp8_e5m2",
                gpu_memory_utilization=0.85,
                block_size=64,
                disable_prefix_caching=True,
            ),
            mode="disaggregated",
            prefill_workers=1,
            decode_workers=2,
            router_mode="round_robin",
            engine_args=("--disaggregation-bootstrap-port", "12345"),
        ),
    ),
    "trtllm-tuned": make_deployment(
        serving=make_serving(
            engine="trtllm",
            engine_version="1.1.0",
            model="nvidia/Qwen3-30B-A3B-FP8",
            tensor_parallel=4,
            pipeline_parallel=2,
            expert_parallel=4,
            context_length=8192,
            quantization="fp8",
            kv_cache=make_kv_cache(
                dtype="fp8", gpu_memory_utilization=0.8, block_size=64, disable_prefix_caching=True
            ),
            router_mode="kv",
            engine_args=("--max-batch-size", "64"),
            image="registry.example.com/serving/trtllm-runtime:1.3.1-patched",
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_manifest_matches_its_golden_file(case: str) -> None:
    rendered = to_yaml(dgd.render_dgd(CASES[case], namespace=NAMESPACE, nodes=NODES))
    _compare(rendered, GOLDEN / f"{case}.yaml")


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_v1beta1_manifest_matches_its_golden_file(case: str) -> None:
    rendered = to_yaml(dgd.render_dgd_as("v1beta1", CASES[case], namespace=NAMESPACE, nodes=NODES))
    _compare(rendered, GOLDEN / "v1beta1" / f"{case}.yaml")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_v1beta1_render_is_what_dynamos_conversion_makes_of_the_v1alpha1_one(
    case: str,
) -> None:
    """Our conversion agrees with the operator's (as the emulator plays it, from the
    reference), and the operator's webhook accepts the result."""
    alpha = dgd.render_dgd(CASES[case], namespace=NAMESPACE, nodes=NODES)
    beta = dgd.render_dgd_as("v1beta1", CASES[case], namespace=NAMESPACE, nodes=NODES)
    assert DynamoCrd(("v1alpha1", "v1beta1")).convert(alpha, "v1beta1")["spec"] == beta["spec"]
    validate(None, beta)


def _compare(rendered: str, path: Path) -> None:
    case = path.relative_to(GOLDEN)
    if os.environ.get("WINGSMITH_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(rendered)
        return
    if not path.exists():
        pytest.fail(f"{path} is missing; run with WINGSMITH_UPDATE_GOLDEN=1", pytrace=False)
    expected = path.read_text()
    if rendered != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            rendered.splitlines(keepends=True),
            fromfile=f"golden/{case}",
            tofile="rendered",
        )
        pytest.fail(
            f"rendered DGD differs from golden/{case} "
            "(rerun with WINGSMITH_UPDATE_GOLDEN=1 if the change is intended):\n" + "".join(diff),
            pytrace=False,
        )


def test_every_golden_file_belongs_to_a_case() -> None:
    """A renamed or removed case must not leave a stale golden file behind."""
    for folder in (GOLDEN, GOLDEN / "v1beta1"):
        on_disk = {path.stem for path in folder.glob("*.yaml")}
        assert on_disk <= set(CASES)
