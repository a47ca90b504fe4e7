"""DGD names fit every label Dynamo's operator derives from them (agent/render/names.py).

The operator labels worker pods `nvidia.com/selector=<dgd>-<lower(component)>-<8 hex>` and
`nvidia.com/dynamo-namespace=<namespace>-<dgd>`; a label value is at most 63 characters.
Tested at the limits: the longest workload names the hub allows (40), the longest service
names the renderer writes (19), and namespaces up to the longest where a name still fits.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent.render import dgd, names
from agent.render.errors import InvalidField
from agent.render.validation import MAX_WORKLOAD_NAME
from tests.unit.render.builders import make_deployment, make_serving

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
ENGINE_MODES = [
    (e, m) for e in ("vllm", "sglang", "trtllm") for m in ("aggregated", "disaggregated")
]


def operator_labels(manifest: dict[str, Any]) -> list[str]:
    """Every label value Dynamo's operator derives from the DGD's name (8 hex: the worst case)."""
    dgd_name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    values = [f"{namespace}-{dgd_name}"]
    values += [f"{dgd_name}-{c.lower()}-0123abcd" for c in manifest["spec"]["services"]]
    return values


def render(workload: str, namespace: str, engine: str, mode: str) -> dict[str, Any]:
    spec = make_deployment(workload_name=workload, serving=make_serving(engine=engine, mode=mode))
    return dgd.render_dgd(spec, namespace=namespace)


@pytest.mark.parametrize(("engine", "mode"), ENGINE_MODES)
@pytest.mark.parametrize("namespace", ["s", "wingsmith", "n" * 40, "n" * 52])
@pytest.mark.parametrize("length", [1, 20, 33, 34, 35, 39, MAX_WORKLOAD_NAME])
def test_every_derived_label_fits_63(engine: str, mode: str, namespace: str, length: int) -> None:
    workload = ("w" + "a-b" * 20)[:length].rstrip("-")
    manifest = render(workload, namespace, engine, mode)
    name = manifest["metadata"]["name"]
    assert DNS_LABEL.match(name), name
    for value in operator_labels(manifest):
        assert len(value) <= 63 and LABEL_VALUE.match(value), value


def test_the_issues_case_a_40_character_prefill_worker_gave_69() -> None:
    workload = "a" * MAX_WORKLOAD_NAME
    manifest = render(workload, "wingsmith", "trtllm", "disaggregated")
    # The old name: 40 + 1 + len("trtllmprefillworker") + 1 + 8 = 69.
    assert len(f"{workload}-trtllmprefillworker-0123abcd") == 69
    name = manifest["metadata"]["name"]
    assert name != workload and len(name) == 63 - 1 - 19 - 1 - 8
    assert re.fullmatch(r"a+-[0-9a-f]{8}", name)


def test_a_name_that_fits_is_the_workloads_own() -> None:
    # vllm aggregated: services Frontend and VllmDecodeWorker (16): 63 - 10 - 16 = 37 fit.
    workload = "q" * 37
    assert render(workload, "wingsmith", "vllm", "aggregated")["metadata"]["name"] == workload
    assert render("q" * 38, "wingsmith", "vllm", "aggregated")["metadata"]["name"] != "q" * 38


def test_shortening_is_deterministic_and_keeps_long_names_apart() -> None:
    one = names.dgd_name("x" * 39 + "1", namespace="ns", components=["TRTLLMPrefillWorker"])
    two = names.dgd_name("x" * 39 + "2", namespace="ns", components=["TRTLLMPrefillWorker"])
    again = names.dgd_name("x" * 39 + "1", namespace="ns", components=["TRTLLMPrefillWorker"])
    assert one == again and one != two
    assert one.startswith("x") and two.startswith("x")


def test_a_dash_at_the_cut_does_not_make_a_double_dash() -> None:
    name = names.dgd_name("a" * 24 + "-" * 5 + "b" * 11, namespace="ns", components=["c" * 19])
    assert "--" not in name and DNS_LABEL.match(name)


def test_the_namespace_shortens_the_name_too() -> None:
    namespace = "n" * 50  # <namespace>-<dgd> <= 63: 12 characters left
    manifest = render("qwen-chat-production", namespace, "vllm", "aggregated")
    assert len(manifest["metadata"]["name"]) == 12
    assert all(len(v) <= 63 for v in operator_labels(manifest))


def test_a_namespace_too_long_for_any_name_is_refused_naming_it() -> None:
    with pytest.raises(InvalidField) as refused:
        render("qwen-chat-production", "n" * 53, "vllm", "aggregated")
    assert refused.value.field == "namespace"
    assert "at most 52" in refused.value.problem
    # At 52 a shortened name still fits.
    assert render("qwen-chat-production", "n" * 52, "vllm", "aggregated")["metadata"]["name"]
    assert names.max_namespace(["TRTLLMPrefillWorker"]) == 52
