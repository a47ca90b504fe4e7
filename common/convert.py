"""The one record <-> protobuf message converter, for the hub's edges and the agent's sync.

The rule, both directions, driven by the message's descriptor and the dataclass's fields
(docs/architecture.md "One converter"):

- A field the message and the record name alike is copied; a field only one side has is left
  to its default, unless the caller gives it (`given` keyword arguments always win).
- Scalars as they are. Enums as the design's lower-case words: the enum type's prefix is
  stripped (Engine ENGINE_VLLM <-> "vllm", AdmissionPhase ADMISSION_PHASE_PENDING <->
  "pending"), UNSPECIFIED <-> "", a number the enum lacks -> "unknown(N)" (validators reject
  it naming the field).
- Repeated fields <-> tuples; map fields <-> dicts; each element converted by the same rule.
- Nested messages <-> nested dataclasses (the record's type hint names the type; `X | None`
  reads an unset message as None). A nested record equal to its type's default is left unset,
  which reads back as that default (unless optional: then it is set, as unset reads None).
- google.protobuf.Timestamp <-> float seconds since the epoch (None: unset).
- A record type whose wire form is not its fields one to one (Serving: the worker counts
  travel in a nested message) registers its two functions (`register`); they are used wherever
  that type is nested.

Imports neither hub nor agent: both use it (.importlinter).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any

from google.protobuf import message_factory, timestamp_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

TIMESTAMP = "google.protobuf.Timestamp"

# A generated enum wrapper (pb.Engine) or its descriptor: both name the enum.
EnumType = Any


def enum_word(enum: EnumType, number: int) -> str:
    """ENGINE_VLLM -> "vllm"; the UNSPECIFIED value -> ""; a number not defined ->
    "unknown(N)" (a newer peer, or a bad one), which every validator rejects."""
    descriptor = _enum_descriptor(enum)
    value = descriptor.values_by_number.get(number)
    if value is None:
        return f"unknown({number})"
    prefix = _prefix_of(descriptor.name)
    word = value.name[len(prefix) :] if value.name.startswith(prefix) else value.name
    return "" if word == "UNSPECIFIED" else word.lower()


def enum_number(enum: EnumType, word: str) -> int:
    """ "vllm" -> ENGINE_VLLM's number; "" -> 0. A word the enum lacks raises ValueError."""
    if not word:
        return 0
    descriptor = _enum_descriptor(enum)
    value = descriptor.values_by_name.get(_prefix_of(descriptor.name) + word.upper())
    if value is None:
        raise ValueError(f"{descriptor.name} has no value {word!r}")
    return int(value.number)


def _enum_descriptor(enum: EnumType) -> EnumDescriptor:
    descriptor: EnumDescriptor = enum.DESCRIPTOR if hasattr(enum, "DESCRIPTOR") else enum
    return descriptor


@functools.cache
def _prefix_of(name: str) -> str:
    # AdmissionPhase -> ADMISSION_PHASE_ (cached: every converted record names a few enums)
    snake = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name))
    return snake.upper() + "_"


def timestamp(seconds: float | None) -> timestamp_pb2.Timestamp | None:
    if seconds is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


# record type -> (record -> message, message -> record), for the types `register` names.
_CUSTOM: dict[Any, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {}


def register(
    record_type: Any, to_wire: Callable[[Any], Any], from_wire: Callable[[Any], Any]
) -> None:
    """Convert `record_type` with these two functions wherever it is nested."""
    _CUSTOM[record_type] = (to_wire, from_wire)


def to_message(message_type: Any, record: Any, **given: Any) -> Any:
    """A `message_type` message from the dataclass `record` by the module's rule; `given`
    fields as given (None: left unset)."""
    values = {name: value for name, value in given.items() if value is not None}
    record_type: Any = type(record)
    for field, hint in _pairs(record_type, message_type.DESCRIPTOR):
        if field.name in given:
            continue
        value = _to_field(field, hint, getattr(record, field.name))
        if value is not None:
            values[field.name] = value
    return message_type(**values)


def from_message(record_type: Any, message: Any, **given: Any) -> Any:
    """A `record_type` dataclass from `message` by the module's rule; `given` fields win."""
    values = dict(given)
    for field, hint in _pairs(record_type, message.DESCRIPTOR):
        if field.name not in values:
            values[field.name] = _from_field(field, hint, message)
    return record_type(**values)


@functools.cache
def _pairs(record_type: Any, descriptor: Descriptor) -> tuple[tuple[FieldDescriptor, Any], ...]:
    """(message field, the record field's type hint) for the fields both name alike: computed
    once per pair."""
    hints = typing.get_type_hints(record_type)
    names = {f.name for f in dataclasses.fields(record_type)}
    return tuple((f, hints[f.name]) for f in descriptor.fields if f.name in names)


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)


def _to_field(field: Any, hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if _is_map(field):
        entry = field.message_type.fields_by_name["value"]
        return {key: _to_single(entry, item) for key, item in value.items()}
    if field.is_repeated:
        return [_to_single(field, item) for item in value]
    # An optional one (`X | None`) is sent even at its default: unset reads as None there.
    nested = field.message_type is not None and field.message_type.full_name != TIMESTAMP
    value_type: Any = type(value)
    if nested and _required(hint) is hint and value == _default_of(value_type):
        return None
    return _to_single(field, value)


def _to_single(field: Any, value: Any) -> Any:
    if field.enum_type is not None:
        return enum_number(field.enum_type, value)
    if field.message_type is None:
        return value
    if field.message_type.full_name == TIMESTAMP:
        return timestamp(value)
    if type(value) in _CUSTOM:
        return _CUSTOM[type(value)][0](value)
    if not dataclasses.is_dataclass(value):
        # Same name, different shape (a word on the record, a message on the wire): the
        # caller must give this field.
        raise TypeError(f"{field.full_name}: give it, {type(value).__name__} is no record")
    _check_related(field, type(value))
    return to_message(_message_class(field.message_type), value)


def _from_field(field: Any, hint: Any, message: Any) -> Any:
    value = getattr(message, field.name)
    if _is_map(field):
        entry = field.message_type.fields_by_name["value"]
        item_hint = typing.get_args(_required(hint))[1]
        return {key: _from_single(entry, item_hint, item) for key, item in value.items()}
    if field.is_repeated:
        item_hint = typing.get_args(_required(hint))[0]
        return tuple(_from_single(field, item_hint, item) for item in value)
    unset = field.message_type is not None and not message.HasField(field.name)
    if unset and (_required(hint) is not hint or field.message_type.full_name == TIMESTAMP):
        return None
    return _from_single(field, _required(hint), value)


def _from_single(field: Any, hint: Any, value: Any) -> Any:
    if field.enum_type is not None:
        return enum_word(field.enum_type, value)
    if field.message_type is None:
        return value
    if field.message_type.full_name == TIMESTAMP:
        return value.ToNanoseconds() / 1e9
    if hint in _CUSTOM:
        return _CUSTOM[hint][1](value)
    if not dataclasses.is_dataclass(hint):
        raise TypeError(f"{field.full_name}: give it, {hint!r} is no record")
    _check_related(field, hint)
    return from_message(hint, value)


def _check_related(field: Any, record_type: Any) -> None:
    """A nested record sharing no field name with its message is another thing of the same
    name (Workload's `rollout`: the rollout's state on the hub, its policy on the wire): the
    caller must give it, rather than the converter sending an empty message."""
    if not _pairs(record_type, field.message_type):
        raise TypeError(
            f"{field.full_name}: give it, {record_type.__name__} shares no field with"
            f" {field.message_type.name}"
        )


def _required(hint: Any) -> Any:
    """X for `X | None`; any other hint as it is."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


@functools.cache
def _message_class(descriptor: Descriptor) -> Callable[..., Any]:
    return message_factory.GetMessageClass(descriptor)


@functools.cache
def _default_of(record_type: Any) -> Any:
    """The record with every field at its default, or None when some field has none."""
    try:
        return record_type()
    except TypeError:
        return None
