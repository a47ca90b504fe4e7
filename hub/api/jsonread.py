"""JSON into messages: `from_json`, the REST gateway's reader of request bodies, path and
query values (hub/api/rest.py), by the conventions of hub/api/jsonmap.py.

It accepts the enum word, the full enum name, or null; field names in snake_case or the
ProtoJSON lowerCamelCase; FieldMask paths in either case. It checks the whole document
against the descriptor before json_format builds the message, so every error is an
`InvalidArgument` whose `field` is the dotted path of the offending value ("workload.serving
.engine", "project.quotas[\"H100\"]", "placement.clusters[2]"); json_format's own errors are
wrapped, never passed through. It knows no Wingsmith message.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any, TypeVar, cast

from google.protobuf import field_mask_pb2, json_format, message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from hub.api import jsonmap
from hub.errors import InvalidArgument

M = TypeVar("M", bound=Message)

_FD = FieldDescriptor
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT_WORDS = frozenset({"NaN", "Infinity", "-Infinity"})
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_INT_RANGES: dict[int, tuple[str, int, int]] = {
    _FD.CPPTYPE_INT32: ("int32", -(2**31), 2**31 - 1),
    _FD.CPPTYPE_INT64: ("int64", -(2**63), 2**63 - 1),
    _FD.CPPTYPE_UINT32: ("uint32", 0, 2**32 - 1),
    _FD.CPPTYPE_UINT64: ("uint64", 0, 2**64 - 1),
}
# More digits than any 64-bit integer has: out of range without converting the text (Python
# refuses to convert more than 4,300 digits at all).
_MAX_INTEGER_DIGITS = 21


def _enum_choices(enum: EnumDescriptor) -> str:
    return ", ".join(jsonmap.enum_table(enum).choices)


def _enum_number(enum: EnumDescriptor, value: object, *, path: str) -> int:
    if isinstance(value, str):
        number = jsonmap.enum_table(enum).number_by_input.get(value)
        if number is not None:
            return number
        problem = f"unknown value {value!r}; expected one of: {_enum_choices(enum)}"
    else:
        problem = f"expected one of: {_enum_choices(enum)} (a string), got {_json_type(value)}"
    raise InvalidArgument(field=path, problem=problem)


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
    desc = jsonmap.descriptor_of(message)
    if desc.full_name in jsonmap.SPECIAL_JSON_TYPES:
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
    keys = jsonmap.fields_by_json_key(desc)
    out: dict[str, Any] = {}
    seen: set[str] = set()
    oneofs: dict[str, str] = {}
    for key, value in data.items():
        field = keys.get(key) if isinstance(key, str) else None
        if field is None:
            known = ", ".join(f.name for f in desc.fields)
            problem = f"unknown field of {desc.name}; known fields: {known}"
            raise InvalidArgument(field=jsonmap.join_path(path, str(key)), problem=problem)
        sub = jsonmap.join_path(path, field.name)
        if field.name in seen:
            raise InvalidArgument(field=sub, problem=f"given twice ({key!r} is the same field)")
        seen.add(field.name)
        if value is None and not _null_is_a_value(field):
            # null is "unset": what jsonmap.to_json writes for unset messages and unspecified enums.
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
        return jsonmap.message_type(field).full_name == "google.protobuf.Value"
    if field.type == _FD.TYPE_ENUM:
        return jsonmap.enum_type(field).full_name == "google.protobuf.NullValue"
    return False


def _normalize_field(field: FieldDescriptor, value: object, *, path: str) -> Any:
    if jsonmap.is_map(field):
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
    key_field = jsonmap.message_type(field).fields_by_name["key"]
    value_field = jsonmap.message_type(field).fields_by_name["value"]
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
    # Inside arrays and maps null has no "unset" meaning; jsonmap.to_json writes it only for an
    # unspecified enum, so that is the one null we read back.
    if value is None:
        unspecified = (
            jsonmap.enum_table(jsonmap.enum_type(field)).unspecified
            if field.type == _FD.TYPE_ENUM
            else None
        )
        if unspecified is not None:
            return unspecified
        if _null_is_a_value(field):
            return None
        raise InvalidArgument(field=path, problem="null is not allowed here")
    return _normalize_value(field, value, path=path)


def _normalize_value(field: FieldDescriptor, value: object, *, path: str) -> Any:
    if field.type == _FD.TYPE_ENUM:
        return _enum_number(jsonmap.enum_type(field), value, path=path)
    if field.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
        desc = jsonmap.message_type(field)
        if desc.full_name in jsonmap.SPECIAL_JSON_TYPES:
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
    if desc.full_name in jsonmap.WRAPPERS:
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
