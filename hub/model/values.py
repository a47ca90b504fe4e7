"""`evolve`: a cheap `dataclasses.replace` for hub.model's records."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

_Value = TypeVar("_Value")


def evolve(value: _Value, **changes: Any) -> _Value:
    """`dataclasses.replace` for these values, without re-running `__init__`: a copy of the
    instance's fields with `changes` applied. None of them has a `__post_init__`, so the
    result is the same, at a twentieth of the cost; a fleet-wide change evolves every one of
    its 10,000 deployments twice in one transaction."""
    unknown = changes.keys() - _field_names(type(value))
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field(s) {sorted(unknown)}")
    copy = object.__new__(type(value))
    copy.__dict__.update(value.__dict__)
    copy.__dict__.update(changes)
    return copy


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(kind: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = frozenset(f.name for f in fields(kind))
    return names
