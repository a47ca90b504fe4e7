"""The shape of a simulated cluster, parsed from the CLI string "nodes=2,gpus=8,class=H100-80GB".

Callers: the CLI (`--simulate SPEC`), the fleet benchmark and tests build a `SimSpec` and hand it
to `SimulatedCluster` (agent/cluster/simulated/cluster.py). Pure: parsing only, no cluster state.

Grammar: groups separated by ";", each a comma-separated list of key=value:
- `nodes`       nodes in this group (1..1000, default 1)
- `gpus`        GPUs per node (0..64, default 8)
- `class`       Wingsmith device class, e.g. H100-80GB (default H100-80GB)
- `memory`      GPU memory with a unit (80GiB, 81920MiB, 80GB); default from the class
- `name_prefix` node name prefix (DNS label; default the cluster id)
- `ready_after` how long a scheduled pod takes to become ready (500ms, 2s, 1m, or bare seconds);
                one value for the whole cluster, given in any group (default 0: ready at once)
- `nvlink`      NVLink domains per node (default 0: none reported). GPU i is in domain
                i mod nvlink, so nvlink=1 puts a node's GPUs in one domain and nvlink=2
                interleaves two (a first-fit pod of 4 GPUs then spans both: a topology test)
- `dynamo`      the DGD API version the simulated Dynamo serves and the agent writes:
                v1alpha1 (default: a Dynamo before 1.3) or v1beta1 (1.5 on: its webhook's
                immutability rules apply); one value for the whole cluster, like ready_after
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1024**3
DEFAULT_CLASS = "H100-80GB"
DEFAULT_SPEC = "nodes=1,gpus=8,class=H100-80GB"
MAX_NODES_PER_GROUP = 1000
MAX_GPUS_PER_NODE = 64

# Device class -> (NVML product name, memory). Classes not listed need `memory=` or a
# "-<N>GB" suffix; their product name is made up from the class.
CATALOG: dict[str, tuple[str, int]] = {
    "H100-80GB": ("NVIDIA H100 80GB HBM3", 80 * GIB),
    "H200-141GB": ("NVIDIA H200", 141 * GIB),
    "A100-40GB": ("NVIDIA A100-SXM4-40GB", 40 * GIB),
    "A100-80GB": ("NVIDIA A100-SXM4-80GB", 80 * GIB),
    "B200-180GB": ("NVIDIA B200", 180 * GIB),
    "L40S-48GB": ("NVIDIA L40S", 48 * GIB),
    "L4-24GB": ("NVIDIA L4", 24 * GIB),
    "A10G-24GB": ("NVIDIA A10G", 24 * GIB),
}

KEYS = ("nodes", "gpus", "class", "memory", "name_prefix", "ready_after", "nvlink", "dynamo")
DYNAMO_VERSIONS = ("v1alpha1", "v1beta1")
_CLASS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
_CLASS_MEMORY_RE = re.compile(r"-(\d+)GB\Z")
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?\Z")
_MEMORY_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]i?B)\Z")
_MEMORY_UNITS = {
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}
_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?\Z")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


@dataclass(frozen=True)
class NodeGroup:
    """`nodes` identical nodes of `gpus` devices each."""

    nodes: int = 1
    gpus: int = 8
    device_class: str = DEFAULT_CLASS
    memory_bytes: int = 80 * GIB
    product_name: str = "NVIDIA H100 80GB HBM3"
    # Empty: the cluster id.
    name_prefix: str = ""
    # NVLink domains per node; 0: the GPUs report none.
    nvlink_domains: int = 0


@dataclass(frozen=True)
class SimSpec:
    groups: tuple[NodeGroup, ...] = (NodeGroup(),)
    ready_after: float = 0.0
    dynamo: str = "v1alpha1"

    @classmethod
    def parse(cls, text: str) -> SimSpec:
        return parse(text)

    @property
    def total_nodes(self) -> int:
        return sum(g.nodes for g in self.groups)

    @property
    def total_gpus(self) -> int:
        return sum(g.nodes * g.gpus for g in self.groups)


def parse(text: str) -> SimSpec:
    """Parse a spec string; ValueError names the group and key that is wrong."""
    if not text.strip():
        raise ValueError(f"empty simulated cluster spec; expected e.g. {DEFAULT_SPEC!r}")
    groups: list[NodeGroup] = []
    ready_after: float | None = None
    dynamo: str | None = None
    for number, group_text in enumerate(text.split(";"), start=1):
        where = f"group {number} ({group_text.strip()!r})"
        fields = _split_group(group_text, where)
        if "dynamo" in fields:
            version = fields.pop("dynamo")
            if version not in DYNAMO_VERSIONS:
                raise ValueError(
                    f"{where}: dynamo={version!r}: expected one of {', '.join(DYNAMO_VERSIONS)}"
                )
            if dynamo is not None and version != dynamo:
                raise ValueError(
                    f"{where}: dynamo={version} conflicts with dynamo={dynamo} given earlier;"
                    " it applies to the whole cluster, give it once"
                )
            dynamo = version
        if "ready_after" in fields:
            value = _parse_duration(fields.pop("ready_after"), where)
            if ready_after is not None and value != ready_after:
                raise ValueError(
                    f"{where}: ready_after={value:g}s conflicts with ready_after={ready_after:g}s"
                    " given earlier; it applies to the whole cluster, give it once"
                )
            ready_after = value
        groups.append(_group(fields, where))
    return SimSpec(
        groups=tuple(groups), ready_after=ready_after or 0.0, dynamo=dynamo or "v1alpha1"
    )


def _split_group(group_text: str, where: str) -> dict[str, str]:
    if not group_text.strip():
        raise ValueError(f"{where}: empty group; expected key=value pairs like {DEFAULT_SPEC!r}")
    fields: dict[str, str] = {}
    for item in group_text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(f"{where}: {item.strip()!r} is not key=value")
        if key not in KEYS:
            raise ValueError(f"{where}: unknown key {key!r}; accepted: {', '.join(KEYS)}")
        if key in fields:
            raise ValueError(f"{where}: key {key!r} given twice")
        if not value:
            raise ValueError(f"{where}: key {key!r} has no value")
        fields[key] = value
    return fields


def _group(fields: dict[str, str], where: str) -> NodeGroup:
    device_class = fields.get("class", DEFAULT_CLASS)
    if not _CLASS_RE.match(device_class):
        raise ValueError(
            f"{where}: class={device_class!r} is not a device class name"
            " (letters, digits, '.', '_', '-'; e.g. H100-80GB)"
        )
    product, memory = _class_defaults(device_class, fields, where)
    prefix = fields.get("name_prefix", "")
    if prefix and not _PREFIX_RE.match(prefix):
        raise ValueError(
            f"{where}: name_prefix={prefix!r} must be a DNS label (lower-case letters,"
            " digits and '-', at most 42 characters)"
        )
    return NodeGroup(
        nodes=_parse_int(fields, "nodes", 1, low=1, high=MAX_NODES_PER_GROUP, where=where),
        gpus=_parse_int(fields, "gpus", 8, low=0, high=MAX_GPUS_PER_NODE, where=where),
        device_class=device_class,
        memory_bytes=memory,
        product_name=product,
        name_prefix=prefix,
        nvlink_domains=_parse_int(fields, "nvlink", 0, low=0, high=MAX_GPUS_PER_NODE, where=where),
    )


def _class_defaults(device_class: str, fields: dict[str, str], where: str) -> tuple[str, int]:
    known = CATALOG.get(device_class)
    product = known[0] if known else f"NVIDIA {device_class}"
    if "memory" in fields:
        return product, _parse_memory(fields["memory"], where)
    if known:
        return known
    suffix = _CLASS_MEMORY_RE.search(device_class)
    if suffix:
        return product, int(suffix.group(1)) * GIB
    raise ValueError(
        f"{where}: class={device_class!r} is not in the catalog ({', '.join(CATALOG)}) and its"
        " name does not end in -<N>GB; give its memory, e.g. memory=80GiB"
    )


def _parse_int(
    fields: dict[str, str], key: str, default: int, *, low: int, high: int, where: str
) -> int:
    text = fields.get(key)
    if text is None:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        raise ValueError(f"{where}: {key}={text!r}: expected a whole number {low}..{high}")
    return int(text)


def _parse_memory(text: str, where: str) -> int:
    match = _MEMORY_RE.match(text)
    if not match:
        raise ValueError(
            f"{where}: memory={text!r}: expected a size with a unit"
            f" ({', '.join(_MEMORY_UNITS)}), e.g. 80GiB"
        )
    size = int(float(match.group(1)) * _MEMORY_UNITS[match.group(2)])
    if size <= 0:
        raise ValueError(f"{where}: memory={text!r}: must be more than zero")
    return size


def _parse_duration(text: str, where: str) -> float:
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueError(
            f"{where}: ready_after={text!r}: expected a duration like 500ms, 2s, 1m"
            " or a bare number of seconds"
        )
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
