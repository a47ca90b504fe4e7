"""The node labels NVIDIA GPU feature discovery (GFD) writes,: which device class they mean.

Callers: the renderer (agent/render/placement.py), which turns a device class into node affinity
on these labels, and the simulated cluster, whose nodes carry the labels GFD would write
(`gfd_labels`). This module reads label mappings and strings; it must not import pynvml.

Why GFD's labels: GFD runs on every GPU node (the GPU Operator and the device plugin's chart
deploy it), reads the same NVML the agent's node loop reads, and writes what it finds on the
Node, where the Kubernetes scheduler can match it. The ones used here
(github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery/README.md):

- `nvidia.com/gpu.product`: the NVML product name, spaces as `-` (`NVIDIA-H100-80GB-HBM3`);
  with the MIG *single* strategy the profile is appended (`NVIDIA-A100-SXM4-40GB-MIG-1g.5gb`);
- `nvidia.com/gpu.memory`: memory per device in MiB as NVML reports it (`81559`); a MIG
  device's own with the single strategy;
- `nvidia.com/gpu.count`: devices on the node;
- `nvidia.com/mig.strategy`: `single` or `mixed` when MIG is on.

A node's class is computed from these with the same function that classifies an NVML device
(agent/devices/classes.py), so a node labelled `NVIDIA-H100-80GB-HBM3` / `81559` is
`H100-80GB` exactly as its devices are. Class overrides (NVML name -> class) apply to the
product label the NVML name becomes.

The MIG *mixed* strategy exposes slices as their own resources (`nvidia.com/mig-1g.10gb`)
rather than `nvidia.com/gpu`; a rendered worker requests `nvidia.com/gpu`, so such slices
are not a class a node offers here (docs/rendering.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent.devices import classes

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_PRESENT = "nvidia.com/gpu.present"
GFD_MIG_STRATEGY = "nvidia.com/mig.strategy"
# Ours: an operator may put it on nodes GFD does not label; the renderer matches it too.
LABEL_DEVICE_CLASS = "wingsmith.dev/device-class"

MIB = 1024**2
# "<product>-MIG-<profile>": the single strategy's product label.
_MIG_PRODUCT = re.compile(
    r"^(?P<parent>.+)-MIG-(?P<profile>(?:\d+c\.)?\d+g\.\d+gb(?:\+[a-z0-9]+(?:,[a-z0-9]+)*)?)\Z",
    re.IGNORECASE,
)
_NOT_IN_LABEL = re.compile(r"[^A-Za-z0-9._-]+")
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?\Z")


def product_label(nvml_name: str) -> str:
    """The `nvidia.com/gpu.product` value GFD writes for a device of this NVML name."""
    return _NOT_IN_LABEL.sub("-", nvml_name.strip()).strip("-._")


def is_label_value(value: str) -> bool:
    """Can `value` be a Kubernetes label value (63 characters, alphanumeric at both ends)?"""
    return bool(_LABEL_VALUE.match(value))


def gfd_labels(*, product_name: str, memory_bytes: int, count: int) -> dict[str, str]:
    """The labels GFD puts on a node of `count` devices named `product_name` (NVML name; a MIG
    device's name, "... MIG 1g.10gb", gives the single strategy's labels)."""
    if count <= 0:
        return {}
    labels = {
        GFD_PRESENT: "true",
        GFD_PRODUCT: product_label(product_name),
        GFD_COUNT: str(count),
        GFD_MEMORY: str(memory_bytes // MIB),
    }
    if classes.mig_profile_from_name(product_name):
        labels[GFD_MIG_STRATEGY] = "single"
    return labels


def node_class(
    labels: Mapping[str, str], *, overrides: Mapping[str, str] = classes.NO_OVERRIDES
) -> str:
    """The device class a node's GFD labels say its `nvidia.com/gpu` devices are; "" for none.

    `overrides` maps NVML names to classes, as for devices (agent/devices/classes.py).
    """
    product = labels.get(GFD_PRODUCT, "").strip()
    if not product:
        return ""
    by_label = {product_label(name): cls for name, cls in overrides.items()}
    if product in by_label:
        return by_label[product]
    mig = _MIG_PRODUCT.match(product)
    if mig:
        # The memory label is the slice's here: the parent's size comes from its name.
        parent = mig.group("parent")
        parent_class = by_label.get(parent) or classes.device_class(_as_name(parent), 0)
        return classes.mig_device_class(parent_class, mig.group("profile").lower())
    return classes.device_class(_as_name(product), _memory_bytes(labels))


def _as_name(product: str) -> str:
    # GFD turned the name's spaces into '-'; the class table matches words.
    return product.replace("-", " ")


def _memory_bytes(labels: Mapping[str, str]) -> int:
    text = labels.get(GFD_MEMORY, "").strip()
    return int(text) * MIB if text.isdigit() else 0
