"""to_json's one-pass encoder writes exactly what json_format plus the REST conventions did.

The reference below is the former implementation (json_format.MessageToDict, then a pass that
turns enum names into words, unset fields into nulls, int64 strings into numbers and sorts map
keys). Random messages of every control API response type and of the test proto's Thing go
through both; the documents must be equal, key order included.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from hub.api import jsonmap, jsonread
from tests.unit.api import things
from wingsmith.v1 import control_pb2

_FD = FieldDescriptor


def _reference(message: Message) -> dict[str, Any]:
    raw = json_format.MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )
    return _shape_message(message.DESCRIPTOR, raw)


def _shape_message(desc: Descriptor, raw: Mapping[str, Any]) -> dict[str, Any]:
    return {f.name: _shape_field(f, raw[f.name]) if f.name in raw else None for f in desc.fields}


def _shape_field(field: FieldDescriptor, raw: Any) -> Any:
    if jsonmap.is_map(field):
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        sort = int if key_field.cpp_type in jsonread._INT_RANGES else str
        return {k: _shape_value(value_field, raw[k]) for k in sorted(raw, key=sort)}
    if field.is_repeated:
        return [_shape_value(field, item) for item in raw]
    return _shape_value(field, raw)


def _shape_value(field: FieldDescriptor, raw: Any) -> Any:
    if raw is None:
        return None
    if field.type == _FD.TYPE_ENUM:
        if isinstance(raw, str):
            return jsonmap.enum_table(field.enum_type).word_by_name.get(raw, raw.lower())
        return raw
    if field.type == _FD.TYPE_MESSAGE:
        desc = field.message_type
        if desc.full_name in jsonmap.WRAPPERS:
            return _unquote(desc.fields_by_name["value"], raw)
        if desc.full_name in jsonmap.SPECIAL_JSON_TYPES:
            return raw
        return _shape_message(desc, raw)
    return _unquote(field, raw)


def _unquote(field: FieldDescriptor, raw: Any) -> Any:
    if field.cpp_type in (_FD.CPPTYPE_INT64, _FD.CPPTYPE_UINT64) and isinstance(raw, str):
        return int(raw)
    return raw


def _fill(message: Message, rng: random.Random, depth: int = 0) -> None:
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        count = rng.randint(0, 3) if field.is_repeated else 1
        for _ in range(count):
            _set(message, field, rng, depth)


def _set(message: Any, field: FieldDescriptor, rng: random.Random, depth: int) -> None:
    target = getattr(message, field.name)
    if jsonmap.is_map(field):
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        key = _scalar(key_field, rng)
        if value_field.type == _FD.TYPE_MESSAGE:
            if depth < 3:
                _fill(target[key], rng, depth + 1)
        else:
            target[key] = _scalar(value_field, rng)
    elif field.type == _FD.TYPE_MESSAGE:
        if depth >= 3:
            return
        sub = target.add() if field.is_repeated else target
        if field.message_type.full_name == "google.protobuf.Timestamp":
            sub.seconds, sub.nanos = rng.randint(0, 2**33), rng.choice([0, 5_000_000, 1])
        elif field.message_type.full_name == "google.protobuf.FieldMask":
            sub.paths.extend(rng.sample(["a", "b_c", "d.e_f"], rng.randint(0, 3)))
        elif field.message_type.full_name.startswith("google.protobuf."):
            sub.SetInParent()
        else:
            _fill(sub, rng, depth + 1)
    elif field.is_repeated:
        target.append(_scalar(field, rng))
    else:
        setattr(message, field.name, _scalar(field, rng))


def _scalar(field: FieldDescriptor, rng: random.Random) -> Any:
    cpp = field.cpp_type
    if field.type == _FD.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values]
        return rng.choice(numbers)
    if cpp == _FD.CPPTYPE_BOOL:
        return rng.random() < 0.5
    if cpp == _FD.CPPTYPE_STRING:
        if field.type == _FD.TYPE_BYTES:
            return rng.randbytes(rng.randint(0, 8))
        return rng.choice(["", "a", "é", "x y", "svg_0123", "ünï\u2028"])
    if cpp in (_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT):
        return rng.choice([0.0, 0.5, -1.25, 1e300, float("inf"), float("-inf"), 3.0])
    _, low, high = jsonread._INT_RANGES[cpp]
    return rng.choice([0, 1, low, high, rng.randint(low, high)])


MESSAGES = [
    *(
        message.output_type
        for message in control_pb2.DESCRIPTOR.services_by_name["ControlService"].methods
    ),
    things.message_class("Thing").DESCRIPTOR,
    things.message_class("ThingRequest").DESCRIPTOR,
]


@pytest.mark.parametrize("desc", MESSAGES, ids=lambda d: d.full_name)
def test_the_one_pass_encoder_writes_what_json_format_did(desc: Descriptor) -> None:
    from google.protobuf import message_factory

    message_class = message_factory.GetMessageClass(desc)
    rng = random.Random(desc.full_name)
    for _ in range(60):
        message = message_class()
        _fill(message, rng)
        expected = _reference(message)
        got = jsonmap.to_json(message)
        assert json.dumps(got) == json.dumps(expected)
