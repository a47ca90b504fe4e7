"""Which nodes a pod may run on: `nodeSelector` and required node affinity, as kube-scheduler
reads them, and the message it gives when no node fits. Pure.

Caller: the simulated cluster (agent/cluster/simulated/manifest.py parses a service's pod spec
with `parse`; agent/cluster/simulated/dynamo.py schedules with `NodeSelection.matches` and
explains with `fit_error`). It is the ground truth of every test and of the demo, so it
follows Kubernetes' rules (k8s.io/component-helpers/scheduling/corev1/nodeaffinity, and the
API server's validation of NodeSelectorRequirement):
- `nodeSelector`: every key=value must be a label of the node;
- `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`: OR of the terms; a term
  is the AND of its `matchExpressions` and `matchFields`; an empty term matches no node;
- operators In, NotIn, Exists, DoesNotExist, Gt, Lt; NotIn and DoesNotExist match a node
  without the label; Gt and Lt compare integers and fail on a value that is not one;
- `matchFields` takes only `metadata.name`, with In or NotIn and one value;
- both must hold when both are given. `preferredDuringScheduling...` only ranks nodes: ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_NAME_FIELD = "metadata.name"
# kube-scheduler's reasons (NodeAffinity and NodeResourcesFit filter plugins) and its
# preemption post-filter's verdicts on them.
NOT_MATCHED = "node(s) didn't match Pod's node affinity/selector"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_INTEGER = re.compile(r"^[+-]?[0-9]+\Z")


class InvalidSelection(ValueError):
    """A node selector or affinity the API server would refuse; `field` is its path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Does a node whose label (or field) `key` is `value` (None: absent) satisfy it?"""
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        number = _integer(value)
        if number is None:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "Gt" else number < bound


@dataclass(frozen=True)
class Term:
    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        return all(r.matches(labels.get(r.key)) for r in self.expressions) and all(
            r.matches(name) for r in self.fields
        )


@dataclass(frozen=True)
class NodeSelection:
    """What a pod asks of its node; the default asks nothing."""

    node_selector: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # None: no required node affinity (every node passes it).
    terms: tuple[Term, ...] | None = None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.terms is None or any(term.matches(name, labels) for term in self.terms)


ANYWHERE = NodeSelection()


def parse(pod_spec: Mapping[str, Any], where: str) -> NodeSelection:
    """The selection in a pod spec (`where` is its path, for errors)."""
    selector = _mapping(pod_spec.get("nodeSelector"), f"{where}.nodeSelector")
    for key, value in selector.items():
        if not isinstance(value, str):
            raise InvalidSelection(f"{where}.nodeSelector.{key}", f"must be a string: {value!r}")
    affinity = _mapping(pod_spec.get("affinity"), f"{where}.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), f"{where}.affinity.nodeAffinity")
    required_at = f"{where}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if required is not None:
        terms = _terms(_mapping(required, required_at), f"{required_at}.nodeSelectorTerms")
    return NodeSelection(node_selector=MappingProxyType(dict(selector)), terms=terms)


def fit_error(total_nodes: int, reasons: Mapping[str, int]) -> str:
    """kube-scheduler's FitError message: each reason with its node count, sorted as strings,
    then what preemption could do (nothing here: the simulated cluster has no priorities)."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    counted = sorted(f"{count} {reason}" for reason, count in reasons.items())
    verdicts: dict[str, int] = {}
    for reason, count in reasons.items():
        verdict = PREEMPTION_NOT_HELPFUL if reason == NOT_MATCHED else NO_VICTIMS
        verdicts[verdict] = verdicts.get(verdict, 0) + count
    preemption = sorted(f"{count} {verdict}" for verdict, count in verdicts.items())
    return (
        f"0/{total_nodes} nodes are available: {', '.join(counted)}. preemption: 0/{total_nodes}"
        f" nodes are available: {', '.join(preemption)}."
    )


def _terms(required: Mapping[str, Any], where: str) -> tuple[Term, ...]:
    raw = required.get("nodeSelectorTerms")
    if not isinstance(raw, list) or not raw:
        raise InvalidSelection(where, "must have at least one node selector term")
    terms = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        term = _mapping(item, at)
        expressions = tuple(
            _requirement(r, f"{at}.matchExpressions[{j}]", is_field=False)
            for j, r in enumerate(_list(term.get("matchExpressions"), f"{at}.matchExpressions"))
        )
        fields = tuple(
            _requirement(r, f"{at}.matchFields[{j}]", is_field=True)
            for j, r in enumerate(_list(term.get("matchFields"), f"{at}.matchFields"))
        )
        terms.append(Term(expressions=expressions, fields=fields))
    return tuple(terms)


def _requirement(raw: object, where: str, *, is_field: bool) -> Requirement:
    item = _mapping(raw, where)
    key, operator = item.get("key"), item.get("operator")
    values = _list(item.get("values"), f"{where}.values")
    if not isinstance(key, str) or not key:
        raise InvalidSelection(f"{where}.key", "must be a non-empty string")
    if operator not in OPERATORS:
        raise InvalidSelection(
            f"{where}.operator", f"{operator!r} is not a valid selector operator: {OPERATORS}"
        )
    if not all(isinstance(v, str) for v in values):
        raise InvalidSelection(f"{where}.values", "must be strings")
    if is_field:
        if key != NODE_NAME_FIELD:
            raise InvalidSelection(f"{where}.key", f"not a valid field selector key: {key!r}")
        if operator not in ("In", "NotIn") or len(values) != 1:
            raise InvalidSelection(where, "metadata.name takes one value with operator In or NotIn")
    if operator in ("In", "NotIn") and not values:
        raise InvalidSelection(
            f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"
        )
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidSelection(
            f"{where}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise InvalidSelection(
                f"{where}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        if _integer(values[0]) is None:
            raise InvalidSelection(f"{where}.values[0]", f"must be an integer: {values[0]!r}")
    return Requirement(key=key, operator=operator, values=tuple(values))


def _integer(value: str | None) -> int | None:
    # Go's strconv.ParseInt: an optional sign and decimal digits, nothing else.
    if value is None or not _INTEGER.match(value):
        return None
    return int(value)


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidSelection(field, f"must be a mapping, got {type(value).__name__}")
    return value


def _list(value: object, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidSelection(field, f"must be a list, got {type(value).__name__}")
    return value
