"""The REST JSON mapping of any protobuf message: `to_json` and `from_json`.

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

`from_json` accepts the word, the full enum name, or null; field names in snake_case or the
ProtoJSON lowerCamelCase; FieldMask paths in either case. It checks the whole document
against the descriptor before json_format builds the message, so every error is an
`InvalidArgument` whose `field` is the dotted path of the offending value ("workload.serving
.engine", "project.quotas[\"H100\"]", "placement.clusters[2]"); json_format's own errors are
wrapped, never passed through. This module must not touch sqlite3 or the service layer.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from google.protobuf import field_mask_pb2, json_format, message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.internal import type_checkers
from google.protobuf.message import Message

from hub.errors import InvalidArgument

M = TypeVar("M", bound=Message)

_FD = FieldDescriptor

# Well-known types whose ProtoJSON form is not an object of their fields: json_format owns
# their encoding, so the descriptor walk treats them as leaves.
_WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
SPECIAL_JSON_TYPES = _WRAPPERS | {
    "google.protobuf.Any",
    "google.protobuf.Duration",
    "google.protobuf.FieldMask",
    "google.protobuf.ListValue",
    "google.protobuf.Struct",
    "google.protobuf.Timestamp",
    "google.protobuf.Value",
}

_INT_RANGES: dict[int, tuple[str, int, int]] = {
    _FD.CPPTYPE_INT32: ("int32", -(2**31), 2**31 - 1),
    _FD.CPPTYPE_INT64: ("int64", -(2**63), 2**63 - 1),
    _FD.CPPTYPE_UINT32: ("uint32", 0, 2**32 - 1),
    _FD.CPPTYPE_UINT64: ("uint64", 0, 2**64 - 1),
}
_INT64_CPP_TYPES = frozenset({_FD.CPPTYPE_INT64, _FD.CPPTYPE_UINT64})
_FLOAT32_MAX = 3.4028234663852886e38
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
# More digits than any 64-bit integer has: out of range without converting the text (Python
# refuses to convert more than 4,300 digits at all).
_MAX_INTEGER_DIGITS = 21
_FLOAT_WORDS = frozenset({"NaN", "Infinity", "-Infinity"})


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
def _enum_table(enum: EnumDescriptor) -> _EnumTable:
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
    return _enum_table(enum).choices


def _enum_choices(enum: EnumDescriptor) -> str:
    return ", ".join(_enum_table(enum).choices)


def _enum_number(enum: EnumDescriptor, value: object, *, path: str) -> int:
    if isinstance(value, str):
        number = _enum_table(enum).number_by_input.get(value)
        if number is not None:
            return number
        problem = f"unknown value {value!r}; expected one of: {_enum_choices(enum)}"
    else:
        problem = f"expected one of: {_enum_choices(enum)} (a string), got {_json_type(value)}"
    raise InvalidArgument(field=path, problem=problem)


# --------------------------------------------------------------------------------------------
# Message -> JSON.


def to_json(message: Message) -> dict[str, Any]:
    """The REST JSON object of `message`: every field, enum words, nulls, int64 as numbers.

    One pass over the message's fields, from a plan built once per message type (a list page
    of 100 deployments: ~10 -> ~2 ms against json_format.MessageToDict plus a reshaping
    pass); json_format still writes the well-known types whose syntax it owns (FieldMask,
    Struct, Any, ...); Timestamp and Duration use their own ToJsonString."""
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
    out: dict[str, Any] = {}
    for name, presence, encode in _plan(desc):
        if presence and not message.HasField(name):
            out[name] = None
        else:
            out[name] = encode(getattr(message, name))
    return out


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


def _list_encoder(encode: Encoder) -> Encoder:
    return lambda values: [encode(item) for item in values]


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


def _value_encoder(field: FieldDescriptor) -> Encoder:
    kind = field.type
    if kind == _FD.TYPE_ENUM:
        words = _enum_words(enum_type(field))
        # An unknown number (an open enum's newer value) stays a number.
        return lambda value: words.get(value, value)
    if kind == _FD.TYPE_MESSAGE:
        desc = message_type(field)
        if desc.full_name in _WRAPPERS:
            inner = _value_encoder(desc.fields_by_name["value"])
            return lambda value: inner(value.value)
        if desc.full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            return lambda value: value.ToJsonString()
        if desc.full_name in SPECIAL_JSON_TYPES:
            return _well_known_json
        return lambda value: _encode_message(value, desc)
    if kind == _FD.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode("ascii")
    if field.cpp_type in (_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT):
        return lambda value: _encode_float(field, value)
    return _same


def _encode_float(field: FieldDescriptor, value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if field.cpp_type == _FD.CPPTYPE_FLOAT:
        return type_checkers.ToShortestFloat(value)  # float32: as json_format writes it
    return value


@functools.cache
def _enum_words(enum: EnumDescriptor) -> Mapping[int, str | None]:
    table = _enum_table(enum)
    return {value.number: table.word_by_name[value.name] for value in enum.values}


# --------------------------------------------------------------------------------------------
# JSON -> message.


def from_json(data: object, message_class_or_instance: type[M] | M, *, path: str = "") -> M:
    """Parse REST JSON into a message (a new one, or merged into the instance given).

    `path` prefixes the field paths of errors: the REST gateway passes the request field the
    JSON was bound to. Raises hub.errors.InvalidArgument, nothing else.
    """
    if isinstance(message_class_or_instance, type):
        message = message_class_or_instance()
    else:
        message = message_class_or_instance
    desc = descriptor_of(message)
    if desc.full_name in SPECIAL_JSON_TYPES:
        normalized: Any = _normalize_special(desc, data, path=path)
    elif data is None:
        normalized = {}
    else:
        normalized = _normalize_message(desc, data, path=path)
    try:
        json_format.ParseDict(normalized, message)
    except Exception as e:
        # The walk above checked everything json_format checks; reaching this is a gap in it,
        # still reported as the caller's error at the nearest path we know.
        problem = f"not a valid {desc.full_name}: {e}"
        raise InvalidArgument(field=path, problem=problem) from e
    return message


def _normalize_message(desc: Descriptor, data: object, *, path: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        problem = f"expected a JSON object ({desc.name}), got {_json_type(data)}"
        raise InvalidArgument(field=path, problem=problem)
    keys = fields_by_json_key(desc)
    out: dict[str, Any] = {}
    seen: set[str] = set()
    oneofs: dict[str, str] = {}
    for key, value in data.items():
        field = keys.get(key) if isinstance(key, str) else None
        if field is None:
            known = ", ".join(f.name for f in desc.fields)
            problem = f"unknown field of {desc.name}; known fields: {known}"
            raise InvalidArgument(field=join_path(path, str(key)), problem=problem)
        sub = join_path(path, field.name)
        if field.name in seen:
            raise InvalidArgument(field=sub, problem=f"given twice ({key!r} is the same field)")
        seen.add(field.name)
        if value is None and not _null_is_a_value(field):
            # null is "unset": what to_json writes for unset messages and unspecified enums.
            continue
        _check_oneof(field, oneofs, path=sub)
        out[field.name] = _normalize_field(field, value, path=sub)
    return out


def _check_oneof(field: FieldDescriptor, taken: dict[str, str], *, path: str) -> None:
    oneof = field.containing_oneof
    if oneof is None:
        return
    other = taken.setdefault(oneof.name, field.name)
    if other != field.name:
        problem = f"only one of {other!r} and {field.name!r} may be set (oneof {oneof.name})"
        raise InvalidArgument(field=path, problem=problem)


def _null_is_a_value(field: FieldDescriptor) -> bool:
    if field.type == _FD.TYPE_MESSAGE:
        return message_type(field).full_name == "google.protobuf.Value"
    if field.type == _FD.TYPE_ENUM:
        return enum_type(field).full_name == "google.protobuf.NullValue"
    return False


def _normalize_field(field: FieldDescriptor, value: object, *, path: str) -> Any:
    if is_map(field):
        return _normalize_map(field, value, path=path)
    if field.is_repeated:
        if not isinstance(value, list):
            raise InvalidArgument(field=path, problem=f"expected an array, got {_json_type(value)}")
        return [
            _normalize_element(field, item, path=f"{path}[{i}]") for i, item in enumerate(value)
        ]
    return _normalize_value(field, value, path=path)


def _normalize_map(field: FieldDescriptor, value: object, *, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        problem = f"expected a JSON object (a map), got {_json_type(value)}"
        raise InvalidArgument(field=path, problem=problem)
    key_field = message_type(field).fields_by_name["key"]
    value_field = message_type(field).fields_by_name["value"]
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = f"{path}[{json.dumps(key)}]"
        _check_map_key(key_field, key, path=sub)
        out[key] = _normalize_element(value_field, item, path=sub)
    return out


def _check_map_key(key_field: FieldDescriptor, key: object, *, path: str) -> None:
    if not isinstance(key, str):
        raise InvalidArgument(field=path, problem="map keys must be strings")
    if key_field.cpp_type == _FD.CPPTYPE_BOOL and key not in ("true", "false"):
        raise InvalidArgument(field=path, problem="expected a key of true or false")
    if key_field.cpp_type in _INT_RANGES:
        _integer(key_field, key, path=path)


def _normalize_element(field: FieldDescriptor, value: object, *, path: str) -> Any:
    # Inside arrays and maps null has no "unset" meaning; to_json writes it only for an
    # unspecified enum, so that is the one null we read back.
    if value is None:
        unspecified = (
            _enum_table(enum_type(field)).unspecified if field.type == _FD.TYPE_ENUM else None
        )
        if unspecified is not None:
            return unspecified
        if _null_is_a_value(field):
            return None
        raise InvalidArgument(field=path, problem="null is not allowed here")
    return _normalize_value(field, value, path=path)


def _normalize_value(field: FieldDescriptor, value: object, *, path: str) -> Any:
    if field.type == _FD.TYPE_ENUM:
        return _enum_number(enum_type(field), value, path=path)
    if field.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
        desc = message_type(field)
        if desc.full_name in SPECIAL_JSON_TYPES:
            return _normalize_special(desc, value, path=path)
        return _normalize_message(desc, value, path=path)
    return _normalize_scalar(field, value, path=path)


def _normalize_scalar(field: FieldDescriptor, value: object, *, path: str) -> Any:
    cpp = field.cpp_type
    if cpp == _FD.CPPTYPE_BOOL:
        if isinstance(value, bool):
            return value
        raise InvalidArgument(field=path, problem=f"expected true or false, got {_show(value)}")
    if cpp == _FD.CPPTYPE_STRING:
        return _string(field, value, path=path)
    if cpp in _INT_RANGES:
        return _integer(field, value, path=path)
    return _float(field, value, path=path)


def _string(field: FieldDescriptor, value: object, *, path: str) -> str:
    if field.type == _FD.TYPE_BYTES:
        if isinstance(value, str) and _is_base64(value):
            return value
        raise InvalidArgument(field=path, problem=f"expected base64 text, got {_show(value)}")
    if isinstance(value, str):
        return value
    raise InvalidArgument(field=path, problem=f"expected a string, got {_show(value)}")


def _is_base64(text: str) -> bool:
    padded = text + "=" * (-len(text) % 4)
    try:
        base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _integer(field: FieldDescriptor, value: object, *, path: str) -> int:
    name, low, high = _INT_RANGES[field.cpp_type]
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        # ProtoJSON allows quoted integers; query and path values always arrive as text.
        if len(value.lstrip("-")) > _MAX_INTEGER_DIGITS:
            problem = f"{len(value)} digits is out of range for {name} ({low}..{high})"
            raise InvalidArgument(field=path, problem=problem)
        number = int(value)
    if number is None:
        raise InvalidArgument(field=path, problem=f"expected an integer, got {_show(value)}")
    if not low <= number <= high:
        problem = f"{number} is out of range for {name} ({low}..{high})"
        raise InvalidArgument(field=path, problem=problem)
    return number


def _float(field: FieldDescriptor, value: object, *, path: str) -> float | str:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        if value in _FLOAT_WORDS:
            return value
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is not None and not math.isfinite(number):
            number = None  # only the ProtoJSON spellings name the special values
    if number is None:
        raise InvalidArgument(field=path, problem=f"expected a number, got {_show(value)}")
    limit = _FLOAT32_MAX if field.cpp_type == _FD.CPPTYPE_FLOAT else math.inf
    if math.isfinite(number) and abs(number) > limit:
        raise InvalidArgument(field=path, problem=f"{number} is out of range for float")
    return number


def _normalize_special(desc: Descriptor, value: object, *, path: str) -> Any:
    if desc.full_name == "google.protobuf.FieldMask":
        return _normalize_field_mask(value, path)
    if desc.full_name in _WRAPPERS:
        return _normalize_scalar(desc.fields_by_name["value"], value, path=path)
    # Timestamp, Duration, Struct, Value, ListValue, Any: json_format owns the syntax; parse a
    # scratch copy here so a bad value is reported at its own path.
    try:
        json_format.ParseDict(cast(Any, value), message_factory.GetMessageClass(desc)())
    except Exception as e:
        raise InvalidArgument(field=path, problem=_special_problem(desc, value, error=e)) from e
    return value


def _special_problem(desc: Descriptor, value: object, *, error: Exception) -> str:
    if desc.full_name == "google.protobuf.Timestamp":
        return f"expected an RFC 3339 timestamp such as 2025-01-31T12:00:00Z, got {_show(value)}"
    if desc.full_name == "google.protobuf.Duration":
        return f'expected a duration such as "1.5s", got {_show(value)}'
    return f"not a valid {desc.full_name}: {error}"


def _normalize_field_mask(value: object, path: str) -> str:
    """Accept "a.b_c" and "a.bC" paths; return the form json_format reads ("a.bC")."""
    if not isinstance(value, str):
        problem = f"expected a comma-separated string of field paths, got {_show(value)}"
        raise InvalidArgument(field=path, problem=problem)
    paths = [_snake_path(p) for p in value.split(",") if p]
    try:
        return field_mask_pb2.FieldMask(paths=paths).ToJsonString()
    except ValueError as e:
        raise InvalidArgument(field=path, problem=f"not a valid field mask: {e}") from e


def _snake_path(path: str) -> str:
    return ".".join(
        part if "_" in part else re.sub(r"(?<!^)(?=[A-Z])", "_", part).lower()
        for part in path.split(".")
    )


# --------------------------------------------------------------------------------------------
# Messages for errors.


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _show(value: object) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        shown = repr(value)
        return shown if len(shown) <= 80 else f"{shown[:80]}... ({len(shown)} characters)"
    return _json_type(value)
