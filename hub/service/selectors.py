"""Kubernetes' equality-based label selectors: parse once, then match labels. Pure.

`k=v` and `k==v` (equal), `k!=v` (absent or another value), `k` (present), `!k` (absent);
a comma joins requirements, all of which must hold. Set-based forms (`in`, `notin`) are not
accepted: the error says so rather than match nothing.

The parsed value (hub/filters.py) goes to the store, which selects in its query
(hub/store/labels.py) so each page is cut after selecting. What a label means per kind is
there too: a resource's own labels, or, for deployments, replicas, allocations and promoted
discovered workloads, their workload's.
"""

from __future__ import annotations

from hub import errors
from hub.filters import LabelRequirement as Requirement
from hub.filters import LabelSelector as Selector
from hub.service import validate

__all__ = ["MAX_REQUIREMENTS", "Requirement", "Selector", "parse"]


# Each requirement is one EXISTS in the store's query (and up to two bound parameters): a bound
# keeps a selector from growing a statement without limit. Twice the labels an object may hold.
MAX_REQUIREMENTS = 2 * validate.MAX_LABELS


def parse(text: str, field: str = "label_selector") -> Selector:
    """The selector `text` (empty: everything matches); INVALID_ARGUMENT naming `field`."""
    requirements: list[Requirement] = []
    if not text.strip():
        return Selector()
    parts = text.split(",")
    if len(parts) > MAX_REQUIREMENTS:
        raise errors.InvalidArgument(
            field, f"{len(parts)} requirements; at most {MAX_REQUIREMENTS}"
        )
    for part in parts:
        term = part.strip()
        if not term:
            raise errors.InvalidArgument(field, f"empty requirement in {text!r}")
        requirements.append(_requirement(term, field))
    return Selector(tuple(requirements))


def _requirement(term: str, field: str) -> Requirement:
    # A set-based requirement is `key in (a,b)` / `key notin (a)`: a word after the key, or a
    # parenthesis (the comma split cuts the list). A key named `in` is a key like any other.
    words = term.split()
    if "(" in term or ")" in term or (len(words) > 1 and words[1] in ("in", "notin")):
        raise errors.InvalidArgument(
            field, f"{term!r}: only equality-based requirements (k=v, k==v, k!=v, k, !k)"
        )
    for op, word in (("!=", "!="), ("==", "="), ("=", "=")):
        if op in term:
            key, value = (s.strip() for s in term.split(op, 1))
            _check(key, value, field, term)
            return Requirement(key, word, value)
    if term.startswith("!"):
        key = term[1:].strip()
        _check(key, "", field, term)
        return Requirement(key, "!exists")
    _check(term, "", field, term)
    return Requirement(term, "exists")


def _check(key: str, value: str, field: str, term: str) -> None:
    if not validate.label_key_ok(key):
        raise errors.InvalidArgument(
            field, f"{term!r}: {key!r} is not a label key (Kubernetes syntax)"
        )
    if not validate.LABEL_VALUE.match(value):
        raise errors.InvalidArgument(
            field, f"{term!r}: {value!r} is not a label value (Kubernetes syntax, <= 63)"
        )
