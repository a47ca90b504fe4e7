"""The REST contract as an OpenAPI 3.1 document, generated from the gateway's own routes.

`document(services)` walks `routes.describe_routes` (the same `google.api.http` rules the
gateway routes by) and describes each message with JSON Schema read off its descriptor, following
the conventions jsonmap implements: proto field names, enum words (the *_UNSPECIFIED value is
`null`), int64 as JSON numbers, RFC 3339 timestamps, FieldMask as "a,b.c", and `null` for an
unset field with presence. Nothing here names a Wingsmith message: a new RPC or field is in
the document without a change here.

The messages' schemas (`<Name>`, `<Name>.Input`, `<Name>.<Method>`) are hub/api/jsonschema.py's;
this module adds what the contract says of calls (hub/api/contract.py): required request
bodies, the update_mask paths each update allows, rules over two fields in words, and a tag
per gRPC service.
Descriptions are the protos' comments (generated/wingsmith/v1/descriptions.json, written by
tools/genproto.py, since the Python descriptors drop comments): on each message and field
that has one. `wingsmith explain` prints them.
Every failure is the error envelope `{"error": {"code", "status", "message"}}` (the
`default` response). Served, unauthenticated (it holds no data), at GET /v1/openapi.json.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import FieldDescriptor, ServiceDescriptor

from hub.api import contract, jsonmap, jsonschema, routes

OPENAPI_PATH = "/v1/openapi.json"

_ERROR_REF = "#/components/schemas/Error"


def document(
    services: Sequence[ServiceDescriptor], *, title: str = "Wingsmith", version: str = ""
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route `rest.build_rest_app(services=...)` serves,
    plus GET /v1/openapi.json itself."""
    schemas = jsonschema.Schemas()
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
    route: routes.RouteDescription, *, operation_id: str, schemas: jsonschema.Schemas
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
    route: routes.RouteDescription, schemas: jsonschema.Schemas
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
    return jsonschema.nullable(variant), False


def _response_schema(route: routes.RouteDescription, schemas: jsonschema.Schemas) -> dict[str, Any]:
    response = route.method.output_type
    if route.response_body:
        return schemas.field(response.fields_by_name[route.response_body], output=True)
    return schemas.ref(response, output=True)


def _text_schema(
    field: FieldDescriptor, schemas: jsonschema.Schemas, *, path: bool
) -> dict[str, Any]:
    """A path or query value's schema: what one URL value spells (strings for everything
    but numbers and bools, which the gateway parses from text)."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        schema = jsonschema.well_known(jsonmap.message_type(field).full_name, output=False)
    else:
        schema = schemas.scalar(field, output=False)
        rule = contract.rule_for(field)
        if rule is not None and not field.is_repeated:
            schema = jsonschema.ruled(schema, rule)
        elif field.type == FieldDescriptor.TYPE_STRING:
            schema = jsonschema.ruled(schema, contract.STRINGS)
    jsonschema.drop_null(schema)
    if path and schema.get("type") == "string":
        schema = {**schema, "minLength": 1}
    if field.is_repeated:
        return {"type": "array", "items": schema}
    return schema


def _first_line(descriptions: Mapping[str, str], service: ServiceDescriptor) -> str:
    text = descriptions.get(service.full_name, "")
    return text.split("\n", 1)[0] if text else f"the {service.name} calls"


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
