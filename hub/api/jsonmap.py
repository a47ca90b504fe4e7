"""The REST JSON mapping of any protobuf message: its conventions, the descriptor helpers
both directions share, and `to_json` (`from_json`, the reader, is hub/api/jsonread.py).

Called by the REST gateway (hub/api/rest.py) for request and response bodies, path and query
values; usable by anything else that shows our messages as JSON (the CLI). It knows no
Wingsmith message: it reads descriptors, so a new field or message needs no code here.

The mapping is ProtoJSON (google.protobuf.json_format) with the conventions of our protos'
header comments:
- proto field names (snake_case), every field present: defaults included, and `null` for an
  unset field with presence (a message field such as Deployment.status);
- enum values as the lower-case word after the type's UPPER_SNAKE prefix
  (ADMISSION_PHASE_PENDING -> "pending"); the *_UNSPECIFIED value is `null`;
- int64 and uint64 as JSON numbers (ProtoJSON quotes them; our clients are Python and Go);
- well-known types in their ProtoJSON form (Timestamp: RFC 3339, FieldMask: "a,b.c").

This module must not touch sqlite3 or the service layer.
"""

from __future__ import annotations

import base64
import functools
import keyword
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from google.protobuf import json_format, timestamp_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.internal import type_checkers
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)

_FD = FieldDescriptor

# Well-known types whose ProtoJSON form is not an object of their fields: json_format owns
# their encoding, so the descriptor walk treats them as leaves.
WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
SPECIAL_JSON_TYPES = WRAPPERS | {
    "google.protobuf.Any",
    "google.protobuf.Duration",
    "google.protobuf.FieldMask",
    "google.protobuf.ListValue",
    "google.protobuf.Struct",
    "google.protobuf.Timestamp",
    "google.protobuf.Value",
}

_INT64_CPP_TYPES = frozenset({_FD.CPPTYPE_INT64, _FD.CPPTYPE_UINT64})


# --------------------------------------------------------------------------------------------
# Descriptor helpers, shared with the REST gateway.


def message_type(field: FieldDescriptor) -> Descriptor:
    desc = field.message_type
    if desc is None:
        raise TypeError(f"{field.full_name} is not a message field")
    return desc


def enum_type(field: FieldDescriptor) -> EnumDescriptor:
    enum = field.enum_type
    if enum is None:
        raise TypeError(f"{field.full_name} is not an enum field")
    return enum


def descriptor_of(message: Message) -> Descriptor:
    return cast(Descriptor, message.DESCRIPTOR)


def is_map(field: FieldDescriptor) -> bool:
    return field.type == _FD.TYPE_MESSAGE and message_type(field).GetOptions().map_entry


def is_plain_message(field: FieldDescriptor) -> bool:
    """A singular message field whose JSON is an object of its fields (not a well-known type)."""
    return (
        field.type == _FD.TYPE_MESSAGE
        and not field.is_repeated
        and message_type(field).full_name not in SPECIAL_JSON_TYPES
    )


@functools.cache
def fields_by_json_key(desc: Descriptor) -> Mapping[str, FieldDescriptor]:
    """Every key a JSON object may use for a field: the proto name and the ProtoJSON name."""
    keys: dict[str, FieldDescriptor] = {}
    for field in desc.fields:
        keys[field.json_name] = field
    for field in desc.fields:
        keys[field.name] = field
    return keys


def join_path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# --------------------------------------------------------------------------------------------
# Enums: value name <-> word.


@dataclass(frozen=True)
class _EnumTable:
    word_by_name: Mapping[str, str | None]
    number_by_input: Mapping[str, int]
    choices: tuple[str, ...]
    unspecified: int | None


def _upper_snake(camel: str) -> str:
    # "AdmissionPhase" -> "ADMISSION_PHASE", "KVCacheMode" -> "KV_CACHE_MODE"
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", camel).upper()


def _is_unspecified(name: str) -> bool:
    return name == "UNSPECIFIED" or name.endswith("_UNSPECIFIED")


@functools.cache
def enum_table(enum: EnumDescriptor) -> _EnumTable:
    prefix = _upper_snake(enum.name) + "_"
    words: dict[str, str | None] = {}
    numbers: dict[str, int] = {}
    choices: list[str] = []
    unspecified: int | None = None
    for value in enum.values:
        numbers[value.name] = value.number
        if _is_unspecified(value.name):
            words[value.name] = None
            unspecified = value.number
            continue
        word = value.name.removeprefix(prefix).lower()
        words[value.name] = word
        # A word never shadows a full name: the full name is the unambiguous spelling.
        numbers.setdefault(word, value.number)
        choices.append(word)
    return _EnumTable(
        word_by_name=words,
        number_by_input=numbers,
        choices=tuple(choices),
        unspecified=unspecified,
    )


def enum_words(enum: EnumDescriptor) -> tuple[str, ...]:
    """The words REST writes for an enum's values, *_UNSPECIFIED (null) left out."""
    return enum_table(enum).choices


# --------------------------------------------------------------------------------------------
# Message -> JSON.


def to_json(message: Message) -> dict[str, Any]:
    """The REST JSON object of `message`: every field, enum words, nulls, int64 as numbers.

    One generated function per message type, from a plan built once (a list page of 100
    deployments: ~10 ms with json_format.MessageToDict plus a reshaping pass, ~1.5 ms with a
    loop over the plan, ~1.2 ms generated); json_format still writes the well-known types
    whose syntax it owns (FieldMask, Struct, Any, ...); Timestamp and Duration use their own
    ToJsonString (a Timestamp's text remembered by its value)."""
    desc = descriptor_of(message)
    if desc.full_name in SPECIAL_JSON_TYPES:
        raw = _well_known_json(message)
        if not isinstance(raw, dict):
            raise TypeError(f"{desc.full_name} is not a JSON object; wrap it in a message")
        return raw
    return _encode_message(message, desc)


def _well_known_json(message: Message) -> Any:
    return json_format.MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )


def _encode_message(message: Message, desc: Descriptor) -> dict[str, Any]:
    # Declaration order, every field: an unset field with presence (a message, an optional
    # scalar, a oneof member) is null, so the JSON does not depend on which fields were set.
    return _compiled(desc)(message)


Encoder = Callable[[Any], Any]


@functools.cache
def _plan(desc: Descriptor) -> tuple[tuple[str, bool, Encoder], ...]:
    """Per field of a message type, decided once: its name, whether it has presence, and
    the function that encodes its value."""
    plan = []
    for field in desc.fields:
        if is_map(field):
            plan.append((field.name, False, _map_encoder(field)))
        elif field.is_repeated:
            plan.append((field.name, False, _list_encoder(_value_encoder(field))))
        else:
            plan.append((field.name, field.has_presence, _value_encoder(field)))
    return tuple(plan)


@functools.cache
def _compiled(desc: Descriptor) -> Callable[[Message], dict[str, Any]]:
    """The plan of `desc` as one generated function returning one dict display: no loop, no
    tuple unpacking, no call for a field written as it is (the list page's deployments have
    ~90 fields each; the loop over the plan was most of to_json's time). The same plan, so
    the same document; tests/unit/api/test_jsonmap_encoder.py holds it to json_format."""
    env: dict[str, Any] = {}
    items = []
    for i, (name, presence, encode) in enumerate(_plan(desc)):
        attr = f"m.{name}" if name.isidentifier() and not keyword.iskeyword(name) else None
        attr = attr or f"getattr(m, {name!r})"
        words = getattr(encode, "enum_words", None)
        if encode is _same:
            expr = attr
        elif getattr(encode, "list_of_same", False):
            expr = f"list({attr})"
        elif words is not None:
            # An unknown number (an open enum's newer value) stays a number.
            env[f"w{i}"] = words
            expr = f"w{i}.get((v := {attr}), v)"
        else:
            env[f"e{i}"] = encode
            expr = f"e{i}({attr})"
        if presence:
            expr = f"({expr} if m.HasField({name!r}) else None)"
        items.append(f"{name!r}: {expr}")
    source = "def encode(m):\n    return {" + ", ".join(items) + "}\n"
    exec(compile(source, f"<jsonmap {desc.full_name}>", "exec"), env)
    return cast(Callable[[Message], dict[str, Any]], env["encode"])


def _nested_encoder(desc: Descriptor) -> Encoder:
    # Looked up when first used, not when the plan is made: a message type may contain
    # itself, and its function is being generated then.
    compiled: list[Callable[[Message], dict[str, Any]]] = []

    def encode(value: Message) -> dict[str, Any]:
        if not compiled:
            compiled.append(_compiled(desc))
        return compiled[0](value)

    return encode


def _list_encoder(encode: Encoder) -> Encoder:
    def encode_list(values: Any) -> list[Any]:
        return [encode(item) for item in values]

    encode_list.list_of_same = encode is _same  # type: ignore[attr-defined]
    return encode_list


def _map_encoder(field: FieldDescriptor) -> Encoder:
    entry = message_type(field)
    boolean = entry.fields_by_name["key"].cpp_type == _FD.CPPTYPE_BOOL
    encode = _value_encoder(entry.fields_by_name["value"])

    def encode_map(value: Mapping[Any, Any]) -> dict[str, Any]:
        # Sorted keys: map iteration order depends on insertion order, output must not.
        return {
            (("true" if key else "false") if boolean else str(key)): encode(value[key])
            for key in sorted(value)
        }

    return encode_map


def _same(value: Any) -> Any:
    return value  # str, bool, and every integer type (int64 as a number: see the docstring)


def value_encoder(field: FieldDescriptor) -> Encoder:
    """One value of `field` (an element, for a repeated one) -> its JSON."""
    return _value_encoder(field)


def _value_encoder(field: FieldDescriptor) -> Encoder:
    kind = field.type
    if kind == _FD.TYPE_ENUM:
        words = enum_json_words(enum_type(field))

        def encode_enum(value: int) -> Any:
            # An unknown number (an open enum's newer value) stays a number.
            return words.get(value, value)

        encode_enum.enum_words = words  # type: ignore[attr-defined]
        return encode_enum
    if kind == _FD.TYPE_MESSAGE:
        desc = message_type(field)
        if desc.full_name in WRAPPERS:
            inner = _value_encoder(desc.fields_by_name["value"])
            return lambda value: inner(value.value)
        if desc.full_name == "google.protobuf.Timestamp":
            return lambda value: timestamp_text(value.seconds, value.nanos)
        if desc.full_name == "google.protobuf.Duration":
            return lambda value: value.ToJsonString()
        if desc.full_name in SPECIAL_JSON_TYPES:
            return _well_known_json
        return _nested_encoder(desc)
    if kind == _FD.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode("ascii")
    if field.cpp_type in (_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT):
        return lambda value: encode_float(field, value)
    return _same


# A record's timestamps repeat from read to read (a list page polled: 200 per page), and
# ToJsonString builds a datetime each time: its text is remembered (an invalid one raises,
# and is not remembered).
@functools.lru_cache(maxsize=16384)
def timestamp_text(seconds: int, nanos: int) -> str:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos).ToJsonString()


def encode_float(field: FieldDescriptor, value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if field.cpp_type == _FD.CPPTYPE_FLOAT:
        return type_checkers.ToShortestFloat(value)  # float32: as json_format writes it
    return value


@functools.cache
def enum_json_words(enum: EnumDescriptor) -> Mapping[int, str | None]:
    """An enum's numbers -> the words REST writes (None for *_UNSPECIFIED)."""
    table = enum_table(enum)
    return {value.number: table.word_by_name[value.name] for value in enum.values}
