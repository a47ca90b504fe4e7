"""REST JSON straight from the service's records and views, with no protobuf message between:
the list responses' path (docs/rest.md "List answers, straight from the views").

`build(message_type, record, **given)` is `jsonmap.to_json(convert.to_message(message_type,
record, **given))`, the same document key for key (so the same bytes once dumped), without
building the message and reading it back: a page of 100 deployments is ~3,000 fields, and the
message in between cost about half of the page's CPU. It is the composition of the two rules,
generated like both of them: one function per (record type, message type, given fields),
returning one dict display in the message's declaration order, every field present:

- a field the record names like the message: the converter's rule (common/convert.py; enum
  words, nested records, a nested record at its default left unset, Timestamp from float
  seconds, registered custom types), then the REST conventions (hub/api/jsonmap.py; enum
  words, null for an unset message, int64 as numbers, sorted map keys);
- a given field: its value as the message's constructor takes it (a message, an enum number,
  a scalar; None: unset) or already as JSON (a dict from `build`, a timestamp's text);
- any other field: its default, as to_json writes an unset field.

The gRPC answers stay messages (hub/api/convert.py builds both from one definition through
`Output`). tests/unit/api/test_jsonview.py holds the two paths to the same bytes over random
views of every list response; the integration tests compare REST lists with gRPC's.

This module must not touch sqlite3 or the service layer.
"""

from __future__ import annotations

import base64
import functools
import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from common import convert
from common.serving import Serving
from hub.api import jsonmap
from wingsmith.v1 import resources_pb2 as pb

_FD = FieldDescriptor
_NANOS = 1_000_000_000

Encode = Callable[[Any], Any]


@dataclass(frozen=True)
class Document:
    """A response already in its REST JSON form: the message type it stands for (checked
    against the method's output type), the JSON object, and its text once dumped ("" until
    then: the REST dispatcher dumps it in the call's worker thread)."""

    type_name: str
    body: dict[str, Any]
    text: str = ""


def build(message_type: Any, record: Any, **given: Any) -> dict[str, Any]:
    """The REST JSON of `message_type` made from `record` (None: from `given` alone) by the
    converter's rule, `given` fields as given: what to_json of to_message answers."""
    record_type: Any = type(record)
    encode = _builder(record_type, message_type.DESCRIPTOR, tuple(given))
    return encode(record, given)


def document(message_type: Any, **given: Any) -> Document:
    """A whole response (a list page) from its given fields."""
    return Document(message_type.DESCRIPTOR.full_name, build(message_type, None, **given))


def stamp_text(seconds: float | None) -> str | None:
    """wire.timestamp's JSON: None for None, else the RFC 3339 text."""
    if seconds is None:
        return None
    return _seconds_text(seconds)


def stamp_ns_text(nanos: int) -> str | None:
    """wire.timestamp_ns's JSON: None for 0 (unset), else the RFC 3339 text."""
    if not nanos:
        return None
    return jsonmap.timestamp_text(nanos // _NANOS, nanos % _NANOS)


@functools.lru_cache(maxsize=16384)
def _seconds_text(seconds: float) -> str:
    # As convert.timestamp: Timestamp.FromNanoseconds(int(seconds * 1e9)).
    nanos = int(seconds * 1e9)
    return jsonmap.timestamp_text(nanos // _NANOS, nanos % _NANOS)


# --------------------------------------------------------------------------------------------
# The generated builder.


@functools.cache
def _builder(
    record_type: Any, desc: Descriptor, given: tuple[str, ...]
) -> Callable[[Any, Mapping[str, Any]], dict[str, Any]]:
    """One function per (record type, message type, given fields), from both plans: each
    field one expression of one dict display. `given` names come from the callers' code, so
    there are few such sets."""
    paired = {} if record_type is type(None) else convert.field_hints(record_type, desc)
    env: dict[str, Any] = {}
    items = []
    for i, field in enumerate(desc.fields):
        name = field.name
        if name in given:
            expr = _given_expr(field, env, i)
        elif name in paired:
            expr = _record_expr(field, paired[name], env, i)
        elif field.is_repeated:
            expr = "{}" if jsonmap.is_map(field) else "[]"  # a new one per document
        else:
            env[f"d{i}"] = _default(field)
            expr = f"d{i}"
        items.append(f"{name!r}: {expr}")
    source = "def build(r, g):\n    return {" + ", ".join(items) + "}\n"
    exec(compile(source, f"<jsonview {desc.full_name}>", "exec"), env)
    built: Callable[[Any, Mapping[str, Any]], dict[str, Any]] = env["build"]
    return built


def _given_expr(field: FieldDescriptor, env: dict[str, Any], i: int) -> str:
    """The JSON of a given field's value, `g[name]`: the common kinds written out in the
    generated code (a page gives ~20 fields a deployment), the rest by a function."""
    value = f"(v := g[{field.name!r}]) is None"
    env[f"d{i}"] = _default(field)
    if jsonmap.is_map(field) or field.is_repeated:
        env[f"g{i}"] = _given_encoder(field)
        return f"g{i}(g[{field.name!r}])"
    if field.type == _FD.TYPE_ENUM:
        env[f"w{i}"] = jsonmap.enum_json_words(jsonmap.enum_type(field))
        return f"(d{i} if {value} else w{i}.get(v, v))"
    if field.type == _FD.TYPE_MESSAGE:
        # A message as the constructor takes it, or already JSON (a dict, a timestamp's text).
        env[f"e{i}"] = _given_item(field)
        return (
            f"(None if {value} else (v if v.__class__ is dict or v.__class__ is str else e{i}(v)))"
        )
    bounds = _INT_RANGES.get(field.cpp_type)
    if bounds is not None:
        env["out_of_range"] = _out_of_range
        low, high = bounds
        return f"(d{i} if {value} else (v if {low} <= v <= {high} else out_of_range(v)))"
    if _scalar(field) is None:
        return f"(d{i} if {value} else v)"  # str, bool
    env[f"g{i}"] = _given_encoder(field)
    return f"g{i}(g[{field.name!r}])"


def _record_expr(field: FieldDescriptor, hint: Any, env: dict[str, Any], i: int) -> str:
    name = field.name
    attr = f"r.{name}" if name.isidentifier() and not keyword.iskeyword(name) else None
    attr = attr or f"getattr(r, {name!r})"
    optional = convert.is_optional(hint)
    if jsonmap.is_map(field) or field.is_repeated:
        env[f"c{i}"] = _record_field(field, hint)
        return f"c{i}({attr})"
    if field.type == _FD.TYPE_ENUM:
        # The record's word: its JSON by one dict lookup; another spelling the long way.
        env[f"d{i}"] = _default(field)
        env[f"k{i}"] = _known_words(field)
        env[f"c{i}"] = _enum_from_word(field)
        return f"(d{i} if (v := {attr}) is None else (k{i}[v] if v in k{i} else c{i}(v)))"
    if field.type == _FD.TYPE_MESSAGE and not _is_nested(field):
        env["seconds_text"] = _seconds_text
        return f"(None if (v := {attr}) is None else seconds_text(v))"
    if field.type == _FD.TYPE_MESSAGE:
        env[f"c{i}"] = _record_field(field, hint)
        return f"c{i}({attr})"
    bounds = _INT_RANGES.get(field.cpp_type)
    if bounds is not None and not optional:
        # An integer as it is, refused out of its type's range as the message refuses it.
        env["out_of_range"] = _out_of_range
        low, high = bounds
        return f"(v if {low} <= (v := {attr}) <= {high} else out_of_range(v))"
    if _scalar(field) is None and not optional:
        return attr  # str, bool: as it is
    env[f"c{i}"] = _record_field(field, hint)
    return f"c{i}({attr})"


def _record_field(field: FieldDescriptor, hint: Any) -> Encode:
    """A record's value of `field` -> its JSON, as to_json writes what to_message set."""
    default = _default(field)
    if jsonmap.is_map(field):
        return _map_encoder(field, _record_item)
    if field.is_repeated:
        item = _record_item(field)
        if item is _same:
            return lambda value: [] if value is None else list(value)
        return lambda value: [] if value is None else [item(v) for v in value]
    if field.type == _FD.TYPE_MESSAGE and _is_nested(field):
        # A nested record at its type's default is left unset (null), unless the record's
        # field is optional (`X | None`): then only None is.
        optional = convert.is_optional(hint)
        item = _record_item(field)

        def nested(value: Any) -> Any:
            if value is None or (not optional and value == convert.default_of(type(value))):
                return None
            return item(value)

        return nested
    item = _record_item(field)
    return lambda value: default if value is None else item(value)


def _record_item(field: FieldDescriptor) -> Encode:
    """One element of a record's value (not None) -> JSON."""
    if field.type == _FD.TYPE_ENUM:
        return _enum_from_word(field)
    if field.type == _FD.TYPE_MESSAGE:
        desc = jsonmap.message_type(field)
        if desc.full_name == convert.TIMESTAMP:
            return _seconds_text
        message_class = convert.message_class(desc)
        return functools.partial(_nested_record, field, message_class)
    scalar = _scalar(field)
    return _same if scalar is None else scalar


def _nested_record(field: FieldDescriptor, message_class: Any, value: Any) -> Any:
    value_type: Any = type(value)
    custom = _CUSTOM.get(value_type)
    if custom is not None:
        return custom(value)
    wire = convert.custom_to_wire(value_type)
    if wire is not None:
        return jsonmap.to_json(wire(value))
    convert.check_nested(field, value_type)  # raises as to_message does
    return build(message_class, value)


def _known_words(field: FieldDescriptor) -> dict[str, Any]:
    """The enum's own words (and "") -> what REST writes for them."""
    enum = jsonmap.enum_type(field)
    words = jsonmap.enum_json_words(enum)
    return {word: words.get(number, number) for word, number in convert.enum_words(enum).items()}


def _enum_from_word(field: FieldDescriptor) -> Encode:
    enum = jsonmap.enum_type(field)
    to_number = convert.word_to_number(enum)
    words = jsonmap.enum_json_words(enum)
    known = _known_words(field)

    def encode(word: str) -> Any:
        found = known.get(word, _MISSING)
        if found is not _MISSING:
            return found
        number = to_number(word)  # another spelling, or ValueError as to_message raises
        return words.get(number, number)

    return encode


def _map_encoder(field: FieldDescriptor, item_of: Callable[[FieldDescriptor], Encode]) -> Encode:
    """A map field's value (a mapping, or None) -> its JSON object: keys as JSON writes them
    (text; a bool key "true"/"false"), sorted as to_json sorts them, each value by `item_of`'s
    encoder for the entry's value field."""
    entry = jsonmap.message_type(field)
    boolean = entry.fields_by_name["key"].cpp_type == _FD.CPPTYPE_BOOL
    item = item_of(entry.fields_by_name["value"])

    def encode_map(value: Any) -> Any:
        if value is None:
            return {}
        return {
            (("true" if key else "false") if boolean else str(key)): item(value[key])
            for key in sorted(value)
        }

    return encode_map


_MISSING = object()


def _given_encoder(field: FieldDescriptor) -> Encode:
    """A given value (as the message's constructor takes it, or already JSON) -> JSON."""
    default = _default(field)
    if jsonmap.is_map(field):
        return _map_encoder(field, _given_item)
    item = _given_item(field)
    if field.is_repeated:
        return lambda value: [] if value is None else [item(v) for v in value]
    return lambda value: default if value is None else item(value)


def _given_item(field: FieldDescriptor) -> Encode:
    if field.type == _FD.TYPE_ENUM:
        words = jsonmap.enum_json_words(jsonmap.enum_type(field))
        return lambda number: words.get(number, number)
    if field.type == _FD.TYPE_MESSAGE:
        desc = jsonmap.message_type(field)
        if desc.full_name == convert.TIMESTAMP:
            return _given_timestamp
        encode = jsonmap.value_encoder(field)
        # A message as the constructor takes it, or already JSON (a dict from build).
        return lambda value: value if isinstance(value, dict) else encode(value)
    scalar = _scalar(field)
    return _same if scalar is None else scalar


def _given_timestamp(value: Any) -> Any:
    if isinstance(value, str):
        return value
    return jsonmap.timestamp_text(value.seconds, value.nanos)


_INT_RANGES = {
    _FD.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    _FD.CPPTYPE_UINT32: (0, 2**32 - 1),
    _FD.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    _FD.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def _out_of_range(value: int) -> Any:
    raise ValueError(f"Value out of range: {value}")  # the message's own words


def _scalar(field: FieldDescriptor) -> Encode | None:
    """The coercion or check a scalar takes on its way through a message (None: none)."""
    bounds = _INT_RANGES.get(field.cpp_type)
    if bounds is not None:
        low, high = bounds
        return lambda value: value if low <= value <= high else _out_of_range(value)
    if field.type == _FD.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode("ascii")
    if field.cpp_type in (_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT):
        return lambda value: jsonmap.encode_float(field, float(value))
    return None


def _default(field: FieldDescriptor) -> Any:
    """What to_json writes for the field left unset."""
    if jsonmap.is_map(field):
        return {}
    if field.is_repeated:
        return []
    if field.type == _FD.TYPE_MESSAGE or field.has_presence:
        return None
    if field.type == _FD.TYPE_ENUM:
        words = jsonmap.enum_json_words(jsonmap.enum_type(field))
        return words.get(0, 0)
    if field.type == _FD.TYPE_BYTES:
        return ""
    if field.cpp_type in (_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT):
        return 0.0
    return field.default_value


def _is_nested(field: FieldDescriptor) -> bool:
    return jsonmap.message_type(field).full_name != convert.TIMESTAMP


def _same(value: Any) -> Any:
    return value


# record type -> its JSON, for the types whose wire form is not their fields one to one
# (common.convert.register); a registered type without one here goes through its message.
_CUSTOM: dict[Any, Encode] = {}


def register(record_type: Any, to_json: Encode) -> None:
    _CUSTOM[record_type] = to_json


def _serving_json(serving: Serving) -> dict[str, Any]:
    # As convert.serving_to_message: the worker counts in `disaggregation`, set only for a
    # disaggregated config.
    disaggregation = None
    if serving.mode == "disaggregated":
        disaggregation = build(
            pb.Disaggregation,
            None,
            prefill_workers=serving.prefill_workers,
            decode_workers=serving.decode_workers,
        )
    return build(pb.ServingConfig, serving, disaggregation=disaggregation)


register(Serving, _serving_json)
