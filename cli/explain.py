"""`wingsmith explain KIND[.field[.field...]]`: a resource's fields, from the API's own contract.

The source is the OpenAPI document the hub serves (`GET /v1/openapi.json`, generated from the
protos the hub runs), so `explain` describes the hub it talks to, whatever its version: a
field the hub has is listed, one it lacks is refused with the closest name. A field's
description is the document's `description` where the hub puts one (the protos' comments),
else its type and allowed values alone.

Pure but for `fetch_document`: `explain(document, kind, path)` returns the text.
"""

from __future__ import annotations

import difflib
from typing import Any

from cli import kinds
from cli.client import HubClient
from cli.errors import CliError

OPENAPI_PATH = "/v1/openapi.json"
_REF_PREFIX = "#/components/schemas/"

JsonObject = dict[str, Any]


def fetch_document(client: HubClient) -> JsonObject:
    return client.get(OPENAPI_PATH)


def explain(document: JsonObject, *, kind: kinds.Kind, path: list[str]) -> str:
    """kubectl explain's page: KIND, VERSION, the field's type and description, then the
    fields below it (a message's) with their types."""
    schemas: JsonObject = document.get("components", {}).get("schemas", {})
    schema = _resource_schema(document, kind)
    where = kind.title
    description = str(schema.get("description") or "")
    field_type = "<Object>"
    for depth, name in enumerate(path):
        properties = _properties(schema, schemas)
        if name not in properties:
            close = difflib.get_close_matches(name, list(properties), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            fields = ", ".join(properties) or "none"
            raise CliError(f"field {name!r} does not exist in {where}{hint} (fields: {fields})")
        raw = properties[name]
        where = f"{where}.{name}"
        field_type = type_word(raw)
        schema = _target(raw, schemas)
        # The field's own comment, else its message's.
        description = str(raw.get("description") or schema.get("description") or "")
        if depth == 0 and kind.spec:
            section = "spec" if name in kind.spec else "status"
            description = (description + "\n" if description else "") + (
                f"In a manifest (get -o yaml, apply -f): {section}.{name}"
                if name != kind.name_field
                else "In a manifest: metadata.name"
            )
    lines = [f"KIND:     {kind.title}", f"VERSION:  {kinds.API_VERSION}", ""]
    if path:
        lines += [f"FIELD:    {path[-1]} {field_type}", ""]
    lines += ["DESCRIPTION:", *_indent(description or _no_description(kind, path)), ""]
    properties = _properties(schema, schemas)
    if properties:
        lines.append("FIELDS:")
        for name, raw in properties.items():
            lines.append(f"   {name}\t{type_word(raw)}{_section(kind, path, name)}")
            text = str(raw.get("description") or "")
            lines += [f"     {line}" for line in text.splitlines()]
    elif "enum" in _plain(schema):
        values = [v for v in _plain(schema)["enum"] if v is not None]
        lines.append("VALUES:")
        lines += [f"   {v}" for v in values]
    return "\n".join(lines).rstrip()


def type_word(schema: JsonObject) -> str:
    """`<string>`, `<integer>`, `<[]string>`, `<map[string]integer>`, `<Object>`, and for an
    enum its values (`<string: low|normal|high|critical>`)."""
    plain = _plain(schema)
    if "$ref" in plain:
        return "<Object>"
    kind = plain.get("type")
    types = [t for t in (kind if isinstance(kind, list) else [kind]) if t not in (None, "null")]
    word = types[0] if types else "any"
    if word == "array":
        return f"<[]{type_word(plain.get('items') or {}).strip('<>')}>"
    if word == "object":
        values = plain.get("additionalProperties")
        if isinstance(values, dict):
            return f"<map[string]{type_word(values).strip('<>')}>"
        return "<Object>"
    if "enum" in plain:
        return f"<{word}: {'|'.join(str(v) for v in plain['enum'] if v is not None)}>"
    return f"<{word}>"


def _resource_schema(document: JsonObject, kind: kinds.Kind) -> JsonObject:
    """The schema of one `kind`: the items of its list answer (every kind has a list)."""
    schemas: JsonObject = document.get("components", {}).get("schemas", {})
    try:
        answer = document["paths"][kind.path]["get"]["responses"]["200"]
        listing = _target(answer["content"]["application/json"]["schema"], schemas)
        return _target(_properties(listing, schemas)[kind.plural]["items"], schemas)
    except (KeyError, TypeError) as e:
        raise CliError(
            f"the hub's API document has no list of {kind.plural} (GET {kind.path}): "
            "is it an older hub?"
        ) from e


def _plain(schema: JsonObject) -> JsonObject:
    """The schema without its nullable wrapper (`anyOf: [X, {type: null}]`)."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        real = [o for o in options if o.get("type") != "null"]
        if len(real) == 1:
            return {**real[0], **{k: v for k, v in schema.items() if k != "anyOf"}}
    return schema


def _target(schema: JsonObject, schemas: JsonObject) -> JsonObject:
    """What a field's schema points at: a message's, an array's items', a map's values'."""
    plain = _plain(schema)
    if plain.get("type") == "array" or "array" in (plain.get("type") or []):
        return _target(plain.get("items") or {}, schemas)
    ref = plain.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        found = schemas.get(ref.removeprefix(_REF_PREFIX), {})
        return {**found, "description": plain.get("description") or found.get("description")}
    values = plain.get("additionalProperties")
    if isinstance(values, dict) and "$ref" in _plain(values):
        return _target(values, schemas)
    return plain


def _properties(schema: JsonObject, schemas: JsonObject) -> JsonObject:
    properties = _target(schema, schemas).get("properties")
    return properties if isinstance(properties, dict) else {}


def _section(kind: kinds.Kind, path: list[str], name: str) -> str:
    if path or not kind.spec:
        return ""
    if name == kind.name_field:
        return "  (metadata.name)"
    return "  (spec)" if name in kind.spec else "  (status)"


def _no_description(kind: kinds.Kind, path: list[str]) -> str:
    if path:
        return "(the API document gives this field no description)"
    return f"A {kind.name}: GET {kind.path} lists them, GET {kind.path}/REF shows one."


def _indent(text: str) -> list[str]:
    return [f"   {line}" for line in text.splitlines()]
