"""The DGD's name: the workload's, shortened where Dynamo's derived labels would not fit. Pure.

Dynamo's operator labels every pod it makes from a DGD with values built from the DGD's name
(shared/reference/dynamo-crds/README.md, facts from the operator's code):
- `nvidia.com/selector=<dgd>-<lower(component)>-<8 hex>`
- `nvidia.com/dynamo-namespace=<k8s namespace>-<dgd>`
and a label value is at most 63 characters: a longer one makes the pods' creation fail, so the
DGD is admitted and then never serves. The name is therefore the longest that keeps both within
63 for every component of the DGD: the workload's name when it fits (the usual case), else a
prefix of it, "-" and 8 hex digits of SHA-256 over the whole workload name, so two long names
sharing a prefix still get different DGDs, and the same workload always gets the same name on
every agent. Adopted DGDs keep the name they were found with (the reconciler never renames one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

MAX_LABEL_VALUE = 63
# "<dgd>-<component>-<8 hex>": the two dashes and the operator's hash.
_SELECTOR_EXTRA = 1 + 1 + 8
# A shortened name: at least one character of the workload's name, "-", 8 hex digits.
_HASH = 8
MIN_SHORT = 1 + 1 + _HASH


def budget(namespace: str, components: Iterable[str]) -> int:
    """The longest DGD name whose derived labels fit, in `namespace`, for these components."""
    longest = max((len(c) for c in components), default=0)
    return min(
        MAX_LABEL_VALUE - _SELECTOR_EXTRA - longest,
        MAX_LABEL_VALUE - 1 - len(namespace),
        MAX_LABEL_VALUE,  # the name itself is a DNS label
    )


def dgd_name(workload_name: str, *, namespace: str, components: Iterable[str]) -> str:
    """The DGD name for a workload ("" when no name can fit: the namespace is too long)."""
    limit = budget(namespace, components)
    if len(workload_name) <= limit:
        return workload_name
    if limit < MIN_SHORT:
        return ""
    digest = hashlib.sha256(workload_name.encode()).hexdigest()[:_HASH]
    # A DNS label cannot end in "-" before ours: strip the prefix's trailing dashes.
    prefix = workload_name[: limit - 1 - _HASH].rstrip("-") or workload_name[0]
    return f"{prefix}-{digest}"


def max_namespace(components: Iterable[str]) -> int:
    """The longest Kubernetes namespace in which some DGD name still fits (for the agent's
    configuration check): a shortened name needs MIN_SHORT characters."""
    longest = max((len(c) for c in components), default=0)
    if MAX_LABEL_VALUE - _SELECTOR_EXTRA - longest < MIN_SHORT:
        return -1
    return MAX_LABEL_VALUE - 1 - MIN_SHORT
