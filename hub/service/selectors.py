"""Kubernetes' equality-based label selectors: parse once, then match labels. Pure.

`k=v` and `k==v` (equal), `k!=v` (absent or another value), `k` (present), `!k` (absent);
a comma joins requirements, all of which must hold. Set-based forms (`in`, `notin`) are not
accepted: the error says so rather than match nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from hub import errors
from hub.service import validate

T = TypeVar("T")


@dataclass(frozen=True)
class Requirement:
    key: str
    # One of "=", "!=", "exists", "!exists".
    op: str
    value: str = ""

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.op == "=":
            return labels.get(self.key) == self.value
        if self.op == "!=":
            return labels.get(self.key) != self.value
        if self.op == "exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.holds(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def page(
    read: Callable[[str], list[T]],
    *,
    after: str,
    limit: int,
    selector: Selector,
    key: Callable[[T], str],
    labels: Callable[[T], Mapping[str, str]],
) -> list[T]:
    """Up to `limit` records `selector` matches, in key order after `after`: store pages of
    `limit` read (`read(after)`) until enough match or the store runs out, so the selector
    is applied before the page is cut and the next page token (the last key returned) skips
    nothing. Without a selector, one read, as before."""
    if not selector:
        return read(after)
    found: list[T] = []
    start = after
    while len(found) < limit:
        batch = read(start)
        for record in batch:
            if selector.matches(labels(record)):
                found.append(record)
                if len(found) == limit:
                    break
        if len(batch) < limit:
            break
        start = key(batch[-1])
    return found


def parse(text: str, field: str = "label_selector") -> Selector:
    """The selector `text` (empty: everything matches); INVALID_ARGUMENT naming `field`."""
    requirements: list[Requirement] = []
    if not text.strip():
        return Selector()
    for part in text.split(","):
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
