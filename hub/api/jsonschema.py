"""JSON Schema of the protobuf messages as the REST gateway writes and reads them (jsonmap's
conventions), with the contract's input rules (hub/api/contract.py) on the fields they
guard. Used by the OpenAPI document (hub/api/openapi.py), which adds paths and operations.

Two schemas per message, because the hub reads more loosely than it writes:
- `<Name>` (responses): every field present (`required`), nulls only where jsonmap writes them;
- `<Name>.Input` (request bodies): every field optional and nullable (null means unset),
  enums also by their full name, unknown keys refused (`additionalProperties: false`), each
  field with its contract rule (a pattern, bounds) or, for a string, no control character;
- `<Name>.<Method>` (`Schemas.variant`): the input as one call reads it (its required
  fields present and not null; an update's mutable fields only).
Nothing here names a Wingsmith message: a new message or field is described as it comes.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from hub.api import contract, jsonmap
from hub.service import validate

_FD = FieldDescriptor
_INT_BOUNDS: dict[int, tuple[int, int]] = {
    _FD.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    _FD.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    _FD.CPPTYPE_UINT32: (0, 2**32 - 1),
    _FD.CPPTYPE_UINT64: (0, 2**64 - 1),
}
_NON_FINITE = ("NaN", "Infinity", "-Infinity")
_NULL: dict[str, Any] = {"type": "null"}


def drop_null(schema: dict[str, Any]) -> None:
    """A URL value is never null: strip `null` from a schema's type and enum."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        schema["type"] = kinds[0] if len(kinds) == 1 else kinds
    if "enum" in schema:
        schema["enum"] = [v for v in schema["enum"] if v is not None]
    if "anyOf" in schema:
        schema["anyOf"] = [s for s in schema["anyOf"] if s != _NULL]


@functools.cache
def descriptions() -> Mapping[str, str]:
    """The protos' comments by full name ({} if the generated file is missing)."""
    try:
        resource = importlib.resources.files("wingsmith.v1").joinpath("descriptions.json")
        loaded = json.loads(resource.read_text(encoding="utf-8"))
    except (FileNotFoundError, ModuleNotFoundError):
        return {}
    return {str(k): str(v) for k, v in loaded.items()}


class Schemas:
    """Component schemas, defined on first use; `ref` and `field` return schema fragments."""

    def __init__(self) -> None:
        self.defined: dict[str, dict[str, Any]] = {}
        self.descriptions = descriptions()

    def ref(self, desc: Descriptor, *, output: bool) -> dict[str, Any]:
        special = well_known(desc.full_name, output=output)
        if special:
            return special
        name = desc.full_name if output else f"{desc.full_name}.Input"
        if name not in self.defined:
            self.defined[name] = {}  # reserved first: a message may contain itself
            self.defined[name] = self._message(desc, output=output)
        return {"$ref": f"#/components/schemas/{name}"}

    def _message(self, desc: Descriptor, *, output: bool) -> dict[str, Any]:
        properties = {f.name: self._described(f, output=output) for f in desc.fields}
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if desc.full_name in self.descriptions:
            schema["description"] = self.descriptions[desc.full_name]
        if output:
            schema["required"] = [f.name for f in desc.fields]
        # Unknown keys are refused. Input also accepts each field's ProtoJSON lowerCamelCase
        # name (docs/rest.md); the document spells the canonical snake_case name only.
        schema["additionalProperties"] = False
        return schema

    def variant(
        self,
        desc: Descriptor,
        *,
        method: str,
        required: Sequence[str],
        only: Sequence[str] | None,
    ) -> dict[str, Any]:
        """`<Name>.<Method>`: the input schema of `desc` as one call reads it: only the
        fields in `only` (an update's mutable fields), `required` (dotted paths) present and
        not null."""
        name = f"{desc.full_name}.{method}"
        if name not in self.defined:
            self.defined[name] = {}
            schema = self._message(desc, output=False)
            properties = schema["properties"]
            if only is not None:
                schema["properties"] = properties = {k: properties[k] for k in only}
            top = sorted({p.split(".", 1)[0] for p in required})
            for key in top:
                inner = tuple(p.split(".", 1)[1] for p in required if p.startswith(f"{key}."))
                field = desc.fields_by_name[key]
                if inner:
                    sub = jsonmap.message_type(field)
                    properties[key] = self.variant(sub, method=method, required=inner, only=None)
                else:
                    properties[key] = present(properties[key])
            if top:
                schema["required"] = top
            self.defined[name] = schema
        return {"$ref": f"#/components/schemas/{name}"}

    def _described(self, field: FieldDescriptor, *, output: bool) -> dict[str, Any]:
        schema = self.field(field, output=output)
        text = self.descriptions.get(field.full_name)
        rule = None if output else contract.rule_for(field)
        if rule is not None:
            text = f"{text} ({rule.description})" if text else rule.description
        return {**schema, "description": text} if text else schema

    def field(self, field: FieldDescriptor, *, output: bool) -> dict[str, Any]:
        rule = None if output else contract.rule_for(field)
        if jsonmap.is_map(field):
            entry = jsonmap.message_type(field)
            value = self._value(entry.fields_by_name["value"], output=output, rule=None)
            schema: dict[str, Any] = {"type": "object", "additionalProperties": value}
            key = entry.fields_by_name["key"]
            if key.cpp_type in _INT_BOUNDS:
                schema["propertyNames"] = {"pattern": "^-?[0-9]+$"}
            elif not output:
                schema["propertyNames"] = ruled({}, contract.STRINGS)
            if rule is not None:
                ruled_map(schema, rule)
        elif field.is_repeated:
            items = self._value(field, output=output, rule=rule.items if rule else None)
            schema = {"type": "array", "items": items}
            if rule is not None and rule.limit is not None:
                schema["maxItems"] = rule.limit
        else:
            value = self._value(field, output=output, rule=rule)
            # An unset field with presence is null on output; any field may be null on input.
            return nullable(value) if (not output or field.has_presence) else value
        return schema if output else nullable(schema)

    def _value(
        self, field: FieldDescriptor, *, output: bool, rule: validate.Rule | None
    ) -> dict[str, Any]:
        if field.type == _FD.TYPE_MESSAGE:
            return self.ref(jsonmap.message_type(field), output=output)
        schema = self.scalar(field, output=output)
        if output:
            return schema
        if rule is not None:
            return ruled(schema, rule)
        if field.type == _FD.TYPE_STRING:
            free = field.full_name in contract.FREE_TEXT_FIELDS
            return ruled(schema, contract.FREE_TEXT if free else contract.STRINGS)
        return schema

    def scalar(self, field: FieldDescriptor, *, output: bool) -> dict[str, Any]:
        if field.type == _FD.TYPE_ENUM:
            return _enum_schema(field, output=output)
        if field.cpp_type in _INT_BOUNDS:
            low, high = _INT_BOUNDS[field.cpp_type]
            return {"type": "integer", "minimum": low, "maximum": high}
        if field.cpp_type in (_FD.CPPTYPE_FLOAT, _FD.CPPTYPE_DOUBLE):
            return {"anyOf": [{"type": "number"}, {"type": "string", "enum": list(_NON_FINITE)}]}
        if field.cpp_type == _FD.CPPTYPE_BOOL:
            return {"type": "boolean"}
        if field.type == _FD.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        return {"type": "string"}


def ruled(schema: dict[str, Any], rule: validate.Rule) -> dict[str, Any]:
    """`schema` (a scalar's) with what `rule` says of one value."""
    bounded = rule.minimum is not None or rule.maximum is not None
    if bounded and "anyOf" in schema:
        # A float with bounds: "NaN" and "Infinity" are out of them.
        schema = {"type": "number"}
    out = dict(schema)
    if rule.pattern:
        body = f"({rule.pattern})?" if rule.optional else rule.pattern
        out["pattern"] = f"^({body})$"
    if rule.max_length is not None:
        out["maxLength"] = rule.max_length
    if rule.minimum is not None:
        out["minimum"] = rule.minimum
    if rule.maximum is not None:
        out["maximum"] = rule.maximum
    if rule.format:
        out["format"] = rule.format
        if rule.optional:
            # "" (unset) is no value of the format: say it apart.
            return {"anyOf": [{**schema, "maxLength": 0}, {**out, "minLength": 1}]}
    if rule.forbidden:
        out["not"] = {"pattern": rule.forbidden}
    return out


def ruled_map(schema: dict[str, Any], rule: validate.Rule) -> None:
    if rule.keys is not None:
        schema["propertyNames"] = ruled({}, rule.keys)
    if rule.values is not None and "$ref" not in schema["additionalProperties"]:
        schema["additionalProperties"] = ruled(schema["additionalProperties"], rule.values)
    if rule.limit is not None:
        schema["maxProperties"] = rule.limit


def present(schema: dict[str, Any]) -> dict[str, Any]:
    """A field's input schema as a call that requires it: not null, and a string not empty
    (proto3 cannot tell "" from unset)."""
    out: dict[str, Any] = json.loads(json.dumps(schema))
    drop_null(out)
    if out.get("type") == "string" and "pattern" not in out and "enum" not in out:
        out["minLength"] = 1
    return out


def _enum_schema(field: FieldDescriptor, *, output: bool) -> dict[str, Any]:
    enum = jsonmap.enum_type(field)
    words = jsonmap.enum_words(enum)
    values: list[Any] = list(words)
    if not output:
        values += [v.name for v in enum.values if not v.name.endswith("UNSPECIFIED")]
    # The *_UNSPECIFIED value is null, in a list as anywhere.
    return {"type": ["string", "null"], "enum": [*values, None]}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if isinstance(kind, str) and "$ref" not in schema and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, _NULL]}


def well_known(full_name: str, *, output: bool) -> dict[str, Any]:
    """The ProtoJSON form of a well-known type; {} for any other message."""
    scalars: dict[str, dict[str, Any]] = {
        "google.protobuf.DoubleValue": {"type": "number"},
        "google.protobuf.FloatValue": {"type": "number"},
        "google.protobuf.Int64Value": {"type": "integer"},
        "google.protobuf.UInt64Value": {"type": "integer", "minimum": 0},
        "google.protobuf.Int32Value": {"type": "integer"},
        "google.protobuf.UInt32Value": {"type": "integer", "minimum": 0},
        "google.protobuf.BoolValue": {"type": "boolean"},
        "google.protobuf.StringValue": {"type": "string"},
        "google.protobuf.BytesValue": {"type": "string", "contentEncoding": "base64"},
        "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
        "google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?s$"},
        "google.protobuf.FieldMask": {"type": "string"},
        "google.protobuf.Struct": {"type": "object"},
        "google.protobuf.ListValue": {"type": "array"},
        "google.protobuf.Value": {},
        "google.protobuf.Any": {"type": "object", "properties": {"@type": {"type": "string"}}},
    }
    if full_name == "google.protobuf.Empty":
        return {"type": "object", "maxProperties": 0} if output else {"type": "object"}
    schema = scalars.get(full_name)
    if schema is None:
        return {}
    if full_name == "google.protobuf.Value":
        return {"description": "any JSON value"}
    return dict(schema)
