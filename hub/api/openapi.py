"""The REST contract as an OpenAPI 3.1 document, generated from the gateway's own routes.

`document(services)` walks `routes.describe_routes` (the same `google.api.http` rules the gateway
routes by) and describes each message with JSON Schema read off its descriptor, following
the conventions jsonmap implements: proto field names, enum words (the *_UNSPECIFIED value is
`null`), int64 as JSON numbers, RFC 3339 timestamps, FieldMask as "a,b.c", and `null` for an
unset field with presence. Nothing here names a Wingsmith message: a new RPC or field is in
the document without a change here.

Two schemas per message, because the hub reads more loosely than it writes:
- `<Name>` (responses): every field present (`required`), nulls only where jsonmap writes them;
- `<Name>.Input` (request bodies): every field optional and nullable (null means unset),
  enums also by their full name, unknown keys refused (`additionalProperties: false`).
Descriptions are the protos' comments (generated/wingsmith/v1/descriptions.json, written by
tools/genproto.py, since the Python descriptors drop comments): on each message and field
that has one. `wingsmith explain` prints them.
Every failure is the error envelope `{"error": {"code", "status", "message"}}` (the
`default` response). Served, unauthenticated (it holds no data), at GET /v1/openapi.json.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor

from hub.api import contract, jsonmap, routes
from hub.service import validate

OPENAPI_PATH = "/v1/openapi.json"

_FD = FieldDescriptor
_INT_BOUNDS: dict[int, tuple[int, int]] = {
    _FD.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    _FD.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    _FD.CPPTYPE_UINT32: (0, 2**32 - 1),
    _FD.CPPTYPE_UINT64: (0, 2**64 - 1),
}
_NON_FINITE = ("NaN", "Infinity", "-Infinity")
_ERROR_REF = "#/components/schemas/Error"
_NULL: dict[str, Any] = {"type": "null"}


def document(
    services: Sequence[ServiceDescriptor], *, title: str = "Wingsmith", version: str = ""
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route `rest.build_rest_app(services=...)` serves,
    plus GET /v1/openapi.json itself."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    operation_ids: dict[str, int] = {}
    for route in routes.describe_routes(services):
        path = _openapi_path(route.template)
        name = route.method.name
        count = operation_ids[name] = operation_ids.get(name, 0) + 1
        operation_id = name if count == 1 else f"{name}{count}"
        paths.setdefault(path, {})[route.http_method.lower()] = _operation(
            route, operation_id=operation_id, schemas=schemas
        )
    paths[OPENAPI_PATH] = {"get": _self_operation()}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version or "v1",
            "description": (
                "Generated from the google.api.http rules of the hub's gRPC services; "
                "the JSON is the REST mapping of docs/rest.md."
            ),
        },
        "tags": [
            {"name": service.name, "description": _first_line(schemas.descriptions, service)}
            for service in services
        ],
        "paths": paths,
        "components": {
            "schemas": {"Error": _error_schema(), **dict(sorted(schemas.defined.items()))},
            "securitySchemes": {
                "adminToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the hub's admin token",
                }
            },
        },
        "security": [{"adminToken": []}],
    }


def _openapi_path(template: str) -> str:
    """`/v1/things/{name=shelves/*}:verb` -> `/v1/things/{name}:verb` (OpenAPI names only)."""
    return re.sub(r"\{([^}=]+)=[^}]*\}", r"{\1}", template)


def _operation(
    route: routes.RouteDescription, *, operation_id: str, schemas: _Schemas
) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            # One non-empty segment: the gateway never matches an empty one.
            "schema": _text_schema(field, schemas, path=True),
        }
        for name, field in route.path_fields
    ]
    for name, field in route.query_fields:
        schema = _text_schema(field, schemas, path=False)
        if name == _MASK and route.method.name in contract.MUTABLE:
            schema = _mask_schema(route)
        parameter: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": False,
            "schema": schema,
        }
        if field.is_repeated:
            # ?tag=a&tag=b: repeated keys, never commas (docs/rest.md).
            parameter.update(style="form", explode=True)
        parameters.append(parameter)
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": f"{route.method.containing_service.name}.{route.method.name}",
        # One tag per gRPC service: generated clients group their calls by it.
        "tags": [route.method.containing_service.name],
        **_cross_field(route.method.name),
        "parameters": parameters,
        "responses": {
            "200": (
                {
                    # Server-Sent Events: each event's data is one response message
                    # (docs/rest.md "Watch").
                    "description": "a stream of Server-Sent Events, one message each",
                    "content": {"text/event-stream": {"schema": _response_schema(route, schemas)}},
                }
                if route.method.server_streaming
                else {
                    "description": "OK",
                    "content": {"application/json": {"schema": _response_schema(route, schemas)}},
                }
            ),
            "default": {
                "description": "an error: the status and its gRPC code name in the envelope",
                "content": {"application/json": {"schema": {"$ref": _ERROR_REF}}},
            },
        },
    }
    if route.body:
        schema, required = _request_body_schema(route, schemas)
        operation["requestBody"] = {
            "required": required,
            "content": {"application/json": {"schema": schema}},
        }
    return operation


_MASK = "update_mask"


def _cross_field(method: str) -> dict[str, Any]:
    rules = contract.CROSS_FIELD.get(method, ())
    if not rules:
        return {}
    return {"description": "Also refused: " + "; ".join(r.description for r in rules) + "."}


def _mask_schema(route: routes.RouteDescription) -> dict[str, Any]:
    """The update_mask parameter: comma-separated paths, each one `contract.MUTABLE` allows."""
    resource = jsonmap.message_type(route.method.input_type.fields_by_name[route.body])
    allowed = contract.MUTABLE[route.method.name]
    paths = contract.mask_paths(resource, allowed)
    one = "|".join(re.escape(p) for p in sorted(paths, key=lambda p: (-len(p), p)))
    return {
        "type": "string",
        "pattern": f"^(({one})(,({one}))*)?$",
        "description": (
            f"the fields to change, comma-separated: {', '.join(allowed)}, or a field below"
            " one of them (e.g. serving.model); absent: the fields the body sets"
        ),
    }


def _request_body_schema(
    route: routes.RouteDescription, schemas: _Schemas
) -> tuple[dict[str, Any], bool]:
    """(the body's schema, whether a body is required). A call with required fields
    (`contract.REQUIRED`) or an update (`contract.MUTABLE`) has a body schema of its own."""
    request = route.method.input_type
    method = route.method.name
    required = contract.REQUIRED.get(method, ())
    only = contract.MUTABLE.get(method)
    if route.body == "*":
        if not required:
            return schemas.ref(request, output=False), False
        return schemas.variant(request, method=method, required=required, only=None), True
    field = request.fields_by_name[route.body]
    inner = tuple(p.split(".", 1)[1] for p in required if p.startswith(f"{route.body}."))
    if route.body not in required and only is None:
        return schemas.field(field, output=False), False
    message = jsonmap.message_type(field)
    variant = schemas.variant(message, method=method, required=inner, only=only)
    if route.body in required:
        return variant, True
    return _nullable(variant), False


def _response_schema(route: routes.RouteDescription, schemas: _Schemas) -> dict[str, Any]:
    response = route.method.output_type
    if route.response_body:
        return schemas.field(response.fields_by_name[route.response_body], output=True)
    return schemas.ref(response, output=True)


def _text_schema(field: FieldDescriptor, schemas: _Schemas, *, path: bool) -> dict[str, Any]:
    """A path or query value's schema: what one URL value spells (strings for everything
    but numbers and bools, which the gateway parses from text)."""
    if field.type == _FD.TYPE_MESSAGE:
        schema = _well_known(jsonmap.message_type(field).full_name, output=False)
    else:
        schema = schemas.scalar(field, output=False)
        rule = contract.rule_for(field)
        if rule is not None and not field.is_repeated:
            schema = _ruled(schema, rule)
        elif field.type == _FD.TYPE_STRING:
            schema = _ruled(schema, contract.STRINGS)
    _drop_null(schema)
    if path and schema.get("type") == "string":
        schema = {**schema, "minLength": 1}
    if field.is_repeated:
        return {"type": "array", "items": schema}
    return schema


def _drop_null(schema: dict[str, Any]) -> None:
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


class _Schemas:
    """Component schemas, defined on first use; `ref` and `field` return schema fragments."""

    def __init__(self) -> None:
        self.defined: dict[str, dict[str, Any]] = {}
        self.descriptions = descriptions()

    def ref(self, desc: Descriptor, *, output: bool) -> dict[str, Any]:
        special = _well_known(desc.full_name, output=output)
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
                    properties[key] = _present(properties[key])
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
                schema["propertyNames"] = _ruled({}, contract.STRINGS)
            if rule is not None:
                _ruled_map(schema, rule)
        elif field.is_repeated:
            items = self._value(field, output=output, rule=rule.items if rule else None)
            schema = {"type": "array", "items": items}
            if rule is not None and rule.limit is not None:
                schema["maxItems"] = rule.limit
        else:
            value = self._value(field, output=output, rule=rule)
            # An unset field with presence is null on output; any field may be null on input.
            return _nullable(value) if (not output or field.has_presence) else value
        return schema if output else _nullable(schema)

    def _value(
        self, field: FieldDescriptor, *, output: bool, rule: validate.Rule | None
    ) -> dict[str, Any]:
        if field.type == _FD.TYPE_MESSAGE:
            return self.ref(jsonmap.message_type(field), output=output)
        schema = self.scalar(field, output=output)
        if output:
            return schema
        if rule is not None:
            return _ruled(schema, rule)
        if field.type == _FD.TYPE_STRING:
            free = field.full_name in contract.FREE_TEXT_FIELDS
            return _ruled(schema, contract.FREE_TEXT if free else contract.STRINGS)
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


def _ruled(schema: dict[str, Any], rule: validate.Rule) -> dict[str, Any]:
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


def _ruled_map(schema: dict[str, Any], rule: validate.Rule) -> None:
    if rule.keys is not None:
        schema["propertyNames"] = _ruled({}, rule.keys)
    if rule.values is not None and "$ref" not in schema["additionalProperties"]:
        schema["additionalProperties"] = _ruled(schema["additionalProperties"], rule.values)
    if rule.limit is not None:
        schema["maxProperties"] = rule.limit


def _present(schema: dict[str, Any]) -> dict[str, Any]:
    """A field's input schema as a call that requires it: not null, and a string not empty
    (proto3 cannot tell "" from unset)."""
    out: dict[str, Any] = json.loads(json.dumps(schema))
    _drop_null(out)
    if out.get("type") == "string" and "pattern" not in out and "enum" not in out:
        out["minLength"] = 1
    return out


def _first_line(descriptions: Mapping[str, str], service: ServiceDescriptor) -> str:
    text = descriptions.get(service.full_name, "")
    return text.split("\n", 1)[0] if text else f"the {service.name} calls"


def _enum_schema(field: FieldDescriptor, *, output: bool) -> dict[str, Any]:
    enum = jsonmap.enum_type(field)
    words = jsonmap.enum_words(enum)
    values: list[Any] = list(words)
    if not output:
        values += [v.name for v in enum.values if not v.name.endswith("UNSPECIFIED")]
    # The *_UNSPECIFIED value is null, in a list as anywhere.
    return {"type": ["string", "null"], "enum": [*values, None]}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if isinstance(kind, str) and "$ref" not in schema and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, _NULL]}


def _well_known(full_name: str, *, output: bool) -> dict[str, Any]:
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


def _error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "status", "message"],
                "properties": {
                    "code": {"type": "integer", "description": "the HTTP status"},
                    "status": {
                        "type": "string",
                        "description": "the gRPC code name (NOT_FOUND, INVALID_ARGUMENT, ...)",
                    },
                    "message": {"type": "string", "description": "what to fix"},
                },
            }
        },
    }


def _self_operation() -> dict[str, Any]:
    return {
        "operationId": "GetOpenApiDocument",
        "summary": "this document",
        "security": [],
        "responses": {
            "200": {
                "description": "the OpenAPI 3.1 document of the REST API",
                "content": {"application/json": {"schema": {"type": "object"}}},
            }
        },
    }
