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
  travel in a nested message, registered at the end of this module) registers its two
  functions (`register`); they are used wherever that type is nested.

Imports neither hub nor agent: both use it (.importlinter).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

from google.protobuf import message_factory, timestamp_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from common.serving import Serving
from wingsmith.v1 import resources_pb2 as pb

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
    descriptor = _enum_descriptor(enum)
    number = _numbers_by_word(descriptor).get(word)
    if number is not None:
        return number
    value = descriptor.values_by_name.get(_prefix_of(descriptor.name) + word.upper())
    if value is None:
        raise ValueError(f"{descriptor.name} has no value {word!r}")
    return int(value.number)


def _enum_descriptor(enum: EnumType) -> EnumDescriptor:
    descriptor: EnumDescriptor = enum.DESCRIPTOR if hasattr(enum, "DESCRIPTOR") else enum
    return descriptor


@functools.cache
def _numbers_by_word(enum: EnumDescriptor) -> dict[str, int]:
    """The enum's own words (and "") -> numbers: one dict lookup for them (a list page converts
    ~9 enums per deployment); any other spelling ("VLLM") goes the long way in enum_number."""
    prefix = _prefix_of(enum.name)
    numbers = {"": 0}
    for value in enum.values:
        word = value.name[len(prefix) :].lower()
        if value.name.startswith(prefix) and prefix + word.upper() == value.name:
            numbers.setdefault(word, int(value.number))
    return numbers


def _word_to_number(enum: EnumDescriptor) -> _Convert:
    numbers = _numbers_by_word(enum)

    def to_number(word: str) -> int:
        number = numbers.get(word)
        return enum_number(enum, word) if number is None else number

    return to_number


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
    record_type: Any = type(record)
    build = _to_builder(record_type, message_type.DESCRIPTOR, tuple(given))
    return build(message_type, record, given)


def from_message(record_type: Any, message: Any, **given: Any) -> Any:
    """A `record_type` dataclass from `message` by the module's rule; `given` fields win."""
    values = dict(given)
    for name, convert in _from_plan(record_type, message.DESCRIPTOR):
        if name not in values:
            values[name] = convert(message)
    return record_type(**values)


_Convert = Callable[[Any], Any]


@functools.cache
def _pairs(record_type: Any, descriptor: Descriptor) -> tuple[tuple[FieldDescriptor, Any], ...]:
    """(message field, the record field's type hint) for the fields both name alike."""
    hints = typing.get_type_hints(record_type)
    names = {f.name for f in dataclasses.fields(record_type)}
    return tuple((f, hints[f.name]) for f in descriptor.fields if f.name in names)


@functools.cache
def _to_plan(record_type: Any, descriptor: Descriptor) -> tuple[tuple[str, _Convert], ...]:
    """(field name, record value -> message value) per field both name alike: the rule worked
    out once per pair, so converting a record is a loop of plain calls."""
    return tuple((f.name, _to_field(f, hint)) for f, hint in _pairs(record_type, descriptor))


@functools.cache
def _to_builder(
    record_type: Any, descriptor: Descriptor, given: tuple[str, ...]
) -> Callable[[Any, Any, dict[str, Any]], Any]:
    """`to_message` for one record type, message type and set of given fields, as one
    generated function over `_to_plan`: each field a plain statement, no loop, no lookup
    of `given` (a list page of 100 deployments converts ~3,000 fields; the loop was most of
    the time). `given` names come from the callers' code, so there are few such sets."""
    env: dict[str, Any] = {}
    lines = [
        "def build(message_type, r, given):",
        "    values = {k: v for k, v in given.items() if v is not None}",
    ]
    for i, (name, convert) in enumerate(_to_plan(record_type, descriptor)):
        if name in given:
            continue
        if convert is _same:
            lines.append(f"    v = r.{name}")
        else:
            env[f"c{i}"] = convert
            lines.append(f"    v = c{i}(r.{name})")
        lines.append(f"    if v is not None: values[{name!r}] = v")
    lines.append("    return message_type(**values)")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<to_message {descriptor.full_name}>", "exec"), env)
    build: Callable[[Any, Any, dict[str, Any]], Any] = env["build"]
    return build


@functools.cache
def _from_plan(record_type: Any, descriptor: Descriptor) -> tuple[tuple[str, _Convert], ...]:
    """(field name, message -> record value) per field both name alike."""
    return tuple((f.name, _from_field(f, hint)) for f, hint in _pairs(record_type, descriptor))


def _is_map(field: Any) -> bool:
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)


def _is_nested(field: Any) -> bool:
    return field.message_type is not None and field.message_type.full_name != TIMESTAMP


def _to_field(field: Any, hint: Any) -> _Convert:
    if _is_map(field):
        item = _to_single(field.message_type.fields_by_name["value"])
        return lambda value: None if value is None else {k: item(v) for k, v in value.items()}
    single = _to_single(field)
    if field.is_repeated:
        if single is _same:
            return lambda value: None if value is None else list(value)
        return lambda value: None if value is None else [single(v) for v in value]
    if single is _same:
        return _same  # a scalar (None, for an optional one, leaves it unset)
    if not _is_nested(field):
        return lambda value: None if value is None else single(value)
    # A nested record at its type's default is left unset (it reads back as that default),
    # but an optional one (`X | None`) is sent: unset reads as None there.
    optional = _required(hint) is not hint

    def nested(value: Any) -> Any:
        value_type: Any = type(value)
        if value is None or (not optional and value == _default_of(value_type)):
            return None
        return single(value)

    return nested


def _to_single(field: Any) -> _Convert:
    if field.enum_type is not None:
        return _word_to_number(field.enum_type)
    if field.message_type is None:
        return _same
    if field.message_type.full_name == TIMESTAMP:
        return timestamp
    message_class = _message_class(field.message_type)

    def nested(value: Any) -> Any:
        value_type: Any = type(value)
        custom = _CUSTOM.get(value_type)
        if custom is not None:
            return custom[0](value)
        if not _is_record(value_type):
            # Same name, different shape (a word on the record, a message on the wire): the
            # caller must give this field.
            raise TypeError(f"{field.full_name}: give it, {value_type.__name__} is no record")
        if not _pairs(value_type, field.message_type):
            raise TypeError(_unrelated(field, value_type))
        return to_message(message_class, value)

    return nested


def _from_field(field: Any, hint: Any) -> _Convert:
    name = field.name
    if _is_map(field):
        item = _from_single(field.message_type.fields_by_name["value"], _item_hint(hint, 1))
        return lambda message: {k: item(v) for k, v in getattr(message, name).items()}
    if field.is_repeated:
        item = _from_single(field, _item_hint(hint, 0))
        return lambda message: tuple(item(v) for v in getattr(message, name))
    single = _from_single(field, _required(hint))
    if single is _same:
        # A scalar, read as it is: one C call per field (ingest reads every device this way).
        return operator.attrgetter(name)
    if field.message_type is None:
        return lambda message: single(getattr(message, name))
    # An unset timestamp, or an unset message of an optional field, reads as None.
    none_when_unset = _required(hint) is not hint or not _is_nested(field)

    def nested(message: Any) -> Any:
        if none_when_unset and not message.HasField(name):
            return None
        return single(getattr(message, name))

    return nested


def _from_single(field: Any, record_type: Any) -> _Convert:
    if field.enum_type is not None:
        return functools.partial(enum_word, field.enum_type)
    if field.message_type is None:
        return _same
    if field.message_type.full_name == TIMESTAMP:
        return lambda value: value.ToNanoseconds() / 1e9
    if record_type in _CUSTOM:
        return _CUSTOM[record_type][1]
    if not _is_record(record_type):
        problem = f"{field.full_name}: give it, {record_type!r} is no record"
        return functools.partial(_refuse, problem)
    if not _pairs(record_type, field.message_type):
        return functools.partial(_refuse, _unrelated(field, record_type))
    return functools.partial(from_message, record_type)


def _is_record(kind: Any) -> bool:
    # A plain bool: dataclasses.is_dataclass narrows to a type the caches cannot take.
    return dataclasses.is_dataclass(kind)


def _item_hint(hint: Any, index: int) -> Any:
    """X of `tuple[X, ...]` (index 0) or of `Mapping[str, X]` (index 1)."""
    return typing.get_args(_required(hint))[index]


def _same(value: Any) -> Any:
    return value


def _unrelated(field: Any, record_type: Any) -> str:
    """A nested record sharing no field name with its message is another thing of the same
    name (Workload's `rollout`: the rollout's state on the hub, its policy on the wire): the
    caller must give it, rather than the converter sending an empty message."""
    return (
        f"{field.full_name}: give it, {record_type.__name__} shares no field with"
        f" {field.message_type.name}"
    )


def _refuse(problem: str, value: Any) -> Any:
    # Raised when such a field is converted, not when the plan is made: a caller giving the
    # field never meets it.
    raise TypeError(problem)


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


# -- The rule's parts, for an encoder that composes it with another (hub/api/jsonview.py: the
# REST JSON straight from records, which must answer what to_message then to_json would).


@functools.cache
def field_hints(record_type: Any, descriptor: Descriptor) -> dict[str, Any]:
    """Message field name -> the record field's type hint, for the fields both name alike."""
    return {f.name: hint for f, hint in _pairs(record_type, descriptor)}


def message_builder(
    record_type: Any, descriptor: Descriptor, given: tuple[str, ...]
) -> Callable[[Any, Any, dict[str, Any]], Any]:
    """to_message's generated function, `(message_type, record, given) -> message`: for a
    caller that has the given fields as a dict already (no second unpacking)."""
    return _to_builder(record_type, descriptor, given)


def is_optional(hint: Any) -> bool:
    """Whether the hint is `X | None` (an unset nested message reads None, not the default)."""
    return _required(hint) is not hint


def default_of(record_type: Any) -> Any:
    """The record with every field at its default, or None when some field has none."""
    return _default_of(record_type)


def message_class(descriptor: Descriptor) -> Callable[..., Any]:
    return _message_class(descriptor)


def custom_to_wire(record_type: Any) -> Callable[[Any], Any] | None:
    """The record -> message function `register`ed for the type, or None."""
    custom = _CUSTOM.get(record_type)
    return None if custom is None else custom[0]


def check_nested(field: Any, record_type: Any) -> None:
    """Raise the TypeError to_message raises for a nested value it cannot convert."""
    if not _is_record(record_type):
        raise TypeError(f"{field.full_name}: give it, {record_type.__name__} is no record")
    if not _pairs(record_type, field.message_type):
        raise TypeError(_unrelated(field, record_type))


def word_to_number(enum: EnumDescriptor) -> Callable[[str], int]:
    """A word -> its number, as to_message converts an enum field (ValueError if none)."""
    return _word_to_number(enum)


def enum_words(enum: EnumDescriptor) -> dict[str, int]:
    """The enum's own words (and "") -> numbers."""
    return dict(_numbers_by_word(enum))


# -- Serving: its worker counts travel in a nested message; registered here, with the rule, so
# a Serving nested anywhere (Deployment, DeploymentSpec, Workload) converts the same way.


def serving_to_message(serving: Serving) -> pb.ServingConfig:
    """The fields of the same name by the converter's rule; the worker counts travel in the
    `disaggregation` message, set only for a disaggregated config."""
    disaggregation = None
    if serving.mode == "disaggregated":
        disaggregation = pb.Disaggregation(
            prefill_workers=serving.prefill_workers, decode_workers=serving.decode_workers
        )
    message: pb.ServingConfig = to_message(pb.ServingConfig, serving, disaggregation=disaggregation)
    return message


def serving_from_message(message: pb.ServingConfig, **given: Any) -> Serving:
    """Raw values, not validated (the hub's hub/serving.py checks them); an unset mode reads as
    aggregated. `given` fields win (the agent resolves unset parallelism to 1)."""
    values: dict[str, Any] = {
        "mode": enum_word(pb.ServingMode, message.mode) or "aggregated",
        "prefill_workers": message.disaggregation.prefill_workers,
        "decode_workers": message.disaggregation.decode_workers,
    }
    values.update(given)
    serving: Serving = from_message(Serving, message, **values)
    return serving


register(Serving, serving_to_message, serving_from_message)
