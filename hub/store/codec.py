"""JSON text columns: canonical encoding shared by the store modules, and the stored form of a
record's fields derived from its dataclass (`Fields`): no field is listed by hand or by
position, so a new field with a default is stored and read back with no change here."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def loads(text: str) -> Any:
    return json.loads(text)


_Convert = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _converters(kind: Any, where: str) -> tuple[_Convert, _Convert]:
    """(to JSON, from JSON) for a field of type `kind`; TypeError names a field of a type
    with no stored form, when the record type is first used (not at the first row)."""
    if kind in (str, int):
        return _same, _same
    if kind is float:
        return _same, float  # a float that happens to be whole reads back as an int
    if kind is bool:
        return _same, bool
    if typing.get_origin(kind) is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            dump_item, load_item = _converters(args[0], where)
            if dump_item is _same and load_item is _same:
                return list, tuple
            return (
                lambda values: [dump_item(v) for v in values],
                lambda values: tuple(load_item(v) for v in values),
            )
    if typing.get_origin(kind) in (dict, Mapping) and typing.get_args(kind)[0] is str:
        # A map with string keys (as a proto map field): a JSON object, each value by its type.
        dump_value, load_value = _converters(typing.get_args(kind)[1], where)
        return (
            lambda items: {key: dump_value(v) for key, v in items.items()},
            lambda items: {key: load_value(v) for key, v in items.items()},
        )
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        nested = Fields(kind)
        return nested.document, nested.record
    raise TypeError(f"{where}: no stored form for type {kind!r}; add one in hub/store/codec.py")


class Fields:
    """The stored form of (some of) a frozen dataclass's fields: a JSON document keyed by field
    name. Reading fills a field missing from the document with its default, so rows written
    before a field existed read back as if it had been left at its default."""

    def __init__(self, cls: type, names: Sequence[str] | None = None) -> None:
        hints = typing.get_type_hints(cls)
        chosen = [f for f in dataclasses.fields(cls) if names is None or f.name in names]
        unknown = set(names or ()) - {f.name for f in chosen}
        if unknown:
            raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
        self.cls = cls
        self.names = tuple(f.name for f in chosen)
        self._dump = tuple(
            (f.name, _converters(hints[f.name], f"{cls.__name__}.{f.name}")[0]) for f in chosen
        )
        loads = [
            (f.name, _converters(hints[f.name], f"{cls.__name__}.{f.name}")[1]) for f in chosen
        ]
        # Read on every row of a list: the fields stored as they are skip the call.
        self._load_as_is = tuple(name for name, load in loads if load is _same)
        self._load = tuple((name, load) for name, load in loads if load is not _same)

    def document(self, record: Any) -> dict[str, Any]:
        return {name: dump(getattr(record, name)) for name, dump in self._dump}

    def dumps(self, record: Any) -> str:
        return dumps(self.document(record))

    def values(self, document: dict[str, Any]) -> dict[str, Any]:
        """The fields present in `document`, as the dataclass holds them (a missing one is
        left out: the dataclass's default applies)."""
        values = {name: document[name] for name in self._load_as_is if name in document}
        for name, load in self._load:
            if name in document:
                values[name] = load(document[name])
        return values

    def record(self, document: dict[str, Any]) -> Any:
        return self.cls(**self.values(document))
