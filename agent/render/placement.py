"""Where a worker pod may run: node affinity that means "a node of the deployment's class". Pure.

Caller: agent/render/dgd.py, for every worker service (the frontend holds no GPU and runs
anywhere). The hub admitted the deployment against the cluster's free devices *of its class*;
without a constraint the Kubernetes scheduler would put the pods on any node with free
`nvidia.com/gpu`, charging an A100 workload's devices to H100 nodes and leaving a later H100
workload waiting for devices that are really free.

The affinity is `requiredDuringSchedulingIgnoredDuringExecution` with these OR-ed terms:
1. `nvidia.com/gpu.product In [...]`: the GPU feature discovery product labels of the
   cluster's nodes whose labels mean this class (agent/devices/node_labels.py). A product
   label that some nodes of another class share (same name, other memory) is narrowed to the
   memory values (`nvidia.com/gpu.memory In [...]`) of this class's nodes, in a term of its own;
2. `wingsmith.dev/device-class In [<class>]`: ours, for nodes GFD does not label (an operator
   sets it by hand), and a term that stays valid when no node of the class is present (the pods
   then wait, Pending, saying no node matched).

Only product and memory values enter the manifest, never node names: nodes coming and going
leave the pod template (and so Dynamo's worker hash) unchanged unless a product appears or
disappears for the class. Values are sorted: the same cluster gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent.cluster.port import Node
from agent.devices import node_labels
from agent.devices.classes import NO_OVERRIDES
from agent.render.errors import InvalidField


def node_affinity(
    device_class: str,
    nodes: Iterable[Node],
    *,
    overrides: Mapping[str, str] = NO_OVERRIDES,
) -> dict[str, Any]:
    """The pod `affinity` that admits only nodes of `device_class`; raises InvalidField when
    no term can be written (no node of the class, and the class is no label value)."""
    terms = _product_terms(device_class, nodes, overrides)
    if node_labels.is_label_value(device_class):
        terms.append(_term((node_labels.LABEL_DEVICE_CLASS, [device_class])))
    if not terms:
        raise InvalidField(
            "device_class",
            f"{device_class!r}: no node of the cluster has GPUs of this class (label"
            f" {node_labels.GFD_PRODUCT}), and the class cannot be a node label value to match"
            f" {node_labels.LABEL_DEVICE_CLASS}; use a class the cluster's nodes report",
        )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def _product_terms(
    device_class: str, nodes: Iterable[Node], overrides: Mapping[str, str]
) -> list[dict[str, Any]]:
    # product -> memory values of this class's nodes; products some other class shares.
    ours: dict[str, set[str]] = {}
    shared: set[str] = set()
    for node in nodes:
        product = node.labels.get(node_labels.GFD_PRODUCT, "")
        if not product:
            continue
        if node_labels.node_class(node.labels, overrides=overrides) == device_class:
            ours.setdefault(product, set()).add(node.labels.get(node_labels.GFD_MEMORY, ""))
        else:
            shared.add(product)
    whole = sorted(p for p in ours if p not in shared)
    terms = [_term((node_labels.GFD_PRODUCT, whole))] if whole else []
    for product in sorted(p for p in ours if p in shared):
        memories = sorted(m for m in ours[product] if m)
        if memories:
            terms.append(
                _term((node_labels.GFD_PRODUCT, [product]), (node_labels.GFD_MEMORY, memories))
            )
    return terms


def _term(*requirements: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": key, "operator": "In", "values": list(values)} for key, values in requirements
        ]
    }
