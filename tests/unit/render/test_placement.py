"""Workers get node affinity for the nodes of their device class, as GPU feature discovery
labels them, MIG profiles included; the frontend, which holds no GPU, gets none."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.cluster.port import Node
from agent.cluster.simulated.node_selection import parse
from agent.devices.node_labels import gfd_labels, node_class, product_label
from agent.render import dgd
from agent.render.errors import InvalidField
from agent.render.placement import node_affinity
from tests.unit.render.builders import make_deployment, make_serving

GIB = 2**30


def _node(name: str, product: str, memory_gib: float, count: int = 8) -> Node:
    labels = gfd_labels(product_name=product, memory_bytes=int(memory_gib * GIB), count=count)
    return Node(name, labels=labels)


H100 = _node("h100", "NVIDIA H100 80GB HBM3", 79.6)
H100_PCIE = _node("h100-pcie", "NVIDIA H100 PCIe", 79.6)
A100_40 = _node("a100-40", "NVIDIA A100-SXM4-40GB", 39.4)
A100_MIG = _node("a100-mig", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", 4.75, count=56)
# One product label, two memory sizes: only the memory tells them apart.
PLAIN_80 = _node("plain-80", "NVIDIA A100 PCIe", 79.2)
PLAIN_40 = _node("plain-40", "NVIDIA A100 PCIe", 39.4)
CPU = Node("cpu", labels={"kubernetes.io/hostname": "cpu"})
CLUSTER = (H100, H100_PCIE, A100_40, A100_MIG, PLAIN_80, PLAIN_40, CPU)


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (H100, "H100-80GB"),
        (H100_PCIE, "H100-80GB"),
        (A100_40, "A100-40GB"),
        (A100_MIG, "A100-40GB-MIG-1g.5gb"),
        (PLAIN_80, "A100-80GB"),
        (CPU, ""),
    ],
)
def test_a_nodes_gfd_labels_give_the_class_its_devices_have(node: Node, expected: str) -> None:
    assert node_class(node.labels) == expected


def test_gfd_labels_are_what_gfd_writes() -> None:
    assert A100_MIG.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert A100_MIG.labels["nvidia.com/mig.strategy"] == "single"
    assert H100.labels["nvidia.com/gpu.memory"] == str(int(79.6 * GIB) // 2**20)
    assert product_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


def _admitted(device_class: str, nodes: tuple[Node, ...] = CLUSTER) -> list[str]:
    selection = parse({"affinity": node_affinity(device_class, nodes)}, "spec")
    return [n.name for n in nodes if selection.matches(n.name, n.labels)]


@pytest.mark.parametrize(
    ("device_class", "nodes"),
    [
        ("H100-80GB", ["h100", "h100-pcie"]),
        ("A100-40GB", ["a100-40", "plain-40"]),
        ("A100-80GB", ["plain-80"]),
        ("A100-40GB-MIG-1g.5gb", ["a100-mig"]),
        ("B200-180GB", []),
    ],
)
def test_the_affinity_admits_exactly_the_nodes_of_the_class(
    device_class: str, nodes: list[str]
) -> None:
    assert _admitted(device_class) == nodes


def test_our_own_label_admits_a_node_gfd_does_not_label() -> None:
    hand = Node("hand", labels={"wingsmith.dev/device-class": "B200-180GB"})
    assert _admitted("B200-180GB", (*CLUSTER, hand)) == ["hand"]


def test_class_overrides_apply_to_the_product_label() -> None:
    overrides = {"NVIDIA H100 PCIe": "H100-PCIE"}
    affinity = node_affinity("H100-PCIE", CLUSTER, overrides=overrides)
    selection = parse({"affinity": affinity}, "spec")
    assert [n.name for n in CLUSTER if selection.matches(n.name, n.labels)] == ["h100-pcie"]


def test_a_class_no_term_can_express_is_a_render_error() -> None:
    with pytest.raises(InvalidField, match="device_class"):
        node_affinity("odd-class-", CLUSTER)


def test_every_worker_and_no_frontend_carries_the_affinity() -> None:
    spec = make_deployment(
        serving=make_serving(engine="vllm", mode="disaggregated", tensor_parallel=2)
    )
    services = dgd.render_dgd(spec, namespace="serving", nodes=CLUSTER)["spec"]["services"]
    expected = node_affinity("H100-80GB", CLUSTER)
    for name, service in services.items():
        if service["componentType"] == "worker":
            assert service["extraPodSpec"]["affinity"] == expected, name
        else:
            assert "affinity" not in service["extraPodSpec"], name


def test_the_affinity_names_no_node_so_nodes_coming_and_going_change_nothing() -> None:
    spec = make_deployment(serving=make_serving(engine="vllm"))
    more = (*CLUSTER, replace(H100, name="h100-2"), replace(A100_40, name="a100-2"))
    assert dgd.render_dgd(spec, namespace="s", nodes=CLUSTER) == dgd.render_dgd(
        spec, namespace="s", nodes=more
    )
