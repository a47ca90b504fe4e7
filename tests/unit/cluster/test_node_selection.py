"""The simulated scheduler honours nodeSelector and required node affinity as kube-scheduler
does, and a pod no node takes waits with kube-scheduler's message."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agent.cluster.port import ClusterError
from agent.cluster.simulated.node_selection import (
    InvalidSelection,
    NodeSelection,
    Requirement,
    Term,
    fit_error,
    parse,
)
from tests.unit.cluster import builders
from tests.unit.cluster.conftest import MakeCluster

LABELS = {"zone": "a", "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.product": "H100"}


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
            }
        }
    }


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("requirement", "value", "matches"),
    [
        (Requirement("k", "In", ("a", "b")), "a", True),
        (Requirement("k", "In", ("a", "b")), "c", False),
        (Requirement("k", "In", ("a",)), None, False),
        (Requirement("k", "NotIn", ("a",)), "b", True),
        (Requirement("k", "NotIn", ("a",)), None, True),
        (Requirement("k", "NotIn", ("a",)), "a", False),
        (Requirement("k", "Exists"), "", True),
        (Requirement("k", "Exists"), None, False),
        (Requirement("k", "DoesNotExist"), None, True),
        (Requirement("k", "DoesNotExist"), "x", False),
        (Requirement("k", "Gt", ("40000",)), "81920", True),
        (Requirement("k", "Gt", ("81920",)), "81920", False),
        (Requirement("k", "Lt", ("90000",)), "81920", True),
        (Requirement("k", "Lt", ("90000",)), "lots", False),
        (Requirement("k", "Gt", ("1",)), None, False),
        (Requirement("k", "Gt", ("1",)), "1_000", False),
    ],
)
def test_each_operator_reads_a_label_as_kubernetes_does(
    requirement: Requirement, value: str | None, matches: bool
) -> None:
    assert requirement.matches(value) is matches


def test_terms_are_ored_and_expressions_anded() -> None:
    both = Term(
        (Requirement("zone", "In", ("a",)), Requirement("nvidia.com/gpu.product", "In", ("A100",)))
    )
    either = NodeSelection(terms=(both, Term((Requirement("zone", "In", ("a",)),))))
    assert not NodeSelection(terms=(both,)).matches("n", LABELS)
    assert either.matches("n", LABELS)
    # An empty term matches no node, and a selector and affinity must both hold.
    assert not NodeSelection(terms=(Term(),)).matches("n", LABELS)
    assert not NodeSelection(node_selector={"zone": "b"}, terms=either.terms).matches("n", LABELS)
    assert NodeSelection(node_selector={"zone": "a"}).matches("n", LABELS)
    by_name = Term(fields=(Requirement("metadata.name", "In", ("n",)),))
    assert NodeSelection(terms=(by_name,)).matches("n", {})
    assert not NodeSelection(terms=(by_name,)).matches("m", {})


@pytest.mark.parametrize(
    ("pod_spec", "field", "problem"),
    [
        ({"affinity": _affinity()}, "nodeSelectorTerms", "at least one node selector term"),
        ({"affinity": _affinity([_expr("k", "In")])}, "values", "must be specified"),
        ({"affinity": _affinity([_expr("k", "Exists", "x")])}, "values", "may not be specified"),
        ({"affinity": _affinity([_expr("k", "Gt", "1", "2")])}, "values", "single value"),
        ({"affinity": _affinity([_expr("k", "Lt", "x")])}, "values[0]", "must be an integer"),
        ({"affinity": _affinity([_expr("k", "Near", "x")])}, "operator", "not a valid"),
        ({"nodeSelector": {"zone": 1}}, "nodeSelector.zone", "must be a string"),
    ],
)
def test_what_the_api_server_refuses_is_refused(
    pod_spec: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(InvalidSelection) as error:
        parse(pod_spec, "spec")
    assert error.value.field.endswith(field) and problem in error.value.problem


def test_the_fit_error_is_kube_schedulers() -> None:
    message = fit_error(
        5,
        {"node(s) didn't match Pod's node affinity/selector": 3, "Insufficient nvidia.com/gpu": 2},
    )
    assert message == (
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's"
        " node affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims"
        " found for incoming pod, 3 Preemption is not helpful for scheduling."
    )
    assert fit_error(0, {}) == "no nodes available to schedule pods"


def _on(
    manifest: dict[str, Any],
    *,
    selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    manifest = copy.deepcopy(manifest)
    for service in manifest["spec"]["services"].values():
        if service.get("componentType") == "worker":
            if selector:
                service["extraPodSpec"]["nodeSelector"] = selector
            if affinity:
                service["extraPodSpec"]["affinity"] = affinity
    return manifest


def _workers(cluster: Any) -> list[Any]:
    return [p for p in cluster.list_pods() if p.gpu_request]


def test_a_pod_lands_only_on_a_node_its_affinity_admits(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8,class=H100-80GB;nodes=2,gpus=8,class=A100-40GB")
    a100 = _affinity([_expr("nvidia.com/gpu.product", "In", "NVIDIA-A100-SXM4-40GB")])
    cluster.apply_dgd(_on(builders.aggregated(replicas=3, gpus=4), affinity=a100))

    placed = sorted(p.node_name for p in _workers(cluster))
    assert placed == ["sim-a-node-1", "sim-a-node-1", "sim-a-node-2"]


def test_a_pod_no_node_admits_waits_with_the_schedulers_reason(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=1,gpus=8,class=H100-80GB;nodes=1,gpus=8,class=A100-40GB")
    a100 = _affinity([_expr("nvidia.com/gpu.product", "In", "NVIDIA-A100-SXM4-40GB")])
    cluster.apply_dgd(_on(builders.aggregated(replicas=3, gpus=4), affinity=a100))

    waiting = [p for p in _workers(cluster) if p.phase == "Pending"]
    assert [p.reason for p in waiting] == [
        "Unschedulable: 0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s)"
        " didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 1 No"
        " preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    ]
    # The free H100 node stays free.
    assert {p.node_name for p in _workers(cluster) if p.node_name} == {"sim-a-node-1"}


def test_a_node_selector_is_honoured(make_cluster: MakeCluster) -> None:
    cluster = make_cluster("nodes=2,gpus=8,class=H100-80GB")
    cluster.apply_dgd(
        _on(
            builders.aggregated(replicas=1, gpus=4),
            selector={"kubernetes.io/hostname": "sim-a-node-1"},
        )
    )
    assert [p.node_name for p in _workers(cluster)] == ["sim-a-node-1"]


def test_a_malformed_affinity_is_refused_like_the_api_server_would(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    bad = _affinity([_expr("nvidia.com/gpu.memory", "Gt", "eighty")])
    with pytest.raises(ClusterError, match="must be an integer"):
        cluster.apply_dgd(_on(builders.aggregated(replicas=1, gpus=4), affinity=bad))
