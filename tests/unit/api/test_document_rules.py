"""The OpenAPI document states every input rule the hub enforces (hub/api/contract.py).

The use cases check values by calling `validate.<rule>(value, "<field path>")`; these tests
read those calls off the source of hub/service, resolve each field path to the proto field
it names, and require the document's schema of that field to carry the very rule (its
pattern and bounds). A new `validate.*` call on a field the contract does not list fails
here, naming the call.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from hub.api import contract, openapi
from hub.service import selectors, validate
from wingsmith.v1 import control_pb2

SERVICE = Path(__file__).resolve().parents[3] / "hub" / "service"
_CONTROL = control_pb2.DESCRIPTOR.services_by_name["ControlService"]

# validate's checking functions -> the rule each enforces.
CHECKS: dict[str, validate.Rule] = {
    "dns_label": validate.NAME,
    "device_class": validate.DEVICE_CLASS_RULE,
    "node_name": validate.NODE_RULE,
    "labels": validate.LABELS_RULE,
    "quotas": validate.QUOTAS_RULE,
    "replicas": validate.REPLICAS_RULE,
}
# Field paths built at run time (f"{where}.cluster_selector"): where each lands.
COMPUTED = {
    "{}.clusters": "wingsmith.v1.PlacementPreference.clusters",
    "{}.cluster_selector": "wingsmith.v1.PlacementPreference.cluster_selector",
    "{}.weights": "wingsmith.v1.PlacementPreference.weights",
}
# Checked with a rule the document cannot hold on that field (say why): none today.
NOT_IN_DOCUMENT: set[str] = set()


def validate_calls() -> list[tuple[str, str, str]]:
    """(file:line, check name, field path) of every `validate.<check>(value, "path")`."""
    found = []
    for path in sorted(SERVICE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "validate"
                and node.func.attr in CHECKS
                and len(node.args) >= 2
            ):
                continue
            found.append((f"{path.name}:{node.lineno}", node.func.attr, _text(node.args[1])))
    return found


def _text(node: ast.expr) -> str:
    """A field path as written: f-string parts become {}, indexes are dropped."""
    if isinstance(node, ast.Constant):
        text = str(node.value)
    elif isinstance(node, ast.JoinedStr):
        text = "".join(
            str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values
        )
    else:
        raise AssertionError(f"a validate call names its field by {ast.dump(node)}")
    return re.sub(r"\[[^\]]*\]", "", text)


def proto_fields(path: str) -> list[FieldDescriptor]:
    """The fields a request path may name, resolved against every ControlService request (a
    bare name such as "project" is a field of several)."""
    if path in COMPUTED:
        full = COMPUTED[path]
        message, _, name = full.rpartition(".")
        return [control_pb2.DESCRIPTOR.pool.FindMessageTypeByName(message).fields_by_name[name]]
    found = {}
    for method in _CONTROL.methods:
        field = _resolve(method.input_type, path.split("."))
        if field is not None:
            found[field.full_name] = field
    assert found, f"{path!r} names no field of any ControlService request"
    return list(found.values())


def _resolve(desc: Descriptor, parts: list[str]) -> FieldDescriptor | None:
    field = desc.fields_by_name.get(parts[0])
    if field is None or len(parts) == 1:
        return field
    if field.message_type is None:
        return None
    return _resolve(field.message_type, parts[1:])


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi.document([_CONTROL])


def documented(document: dict[str, Any], field: FieldDescriptor) -> dict[str, Any]:
    """The document's schema of `field` (an input), from its message's component or from the
    parameters of the operations that bind it."""
    schemas = document["components"]["schemas"]
    message = field.containing_type.full_name
    for name, component in schemas.items():
        # <Message>.Input, or a call's own <Message>.<Method> (a create, an update).
        if name.startswith(f"{message}.") and field.name in component.get("properties", {}):
            schema: dict[str, Any] = component["properties"][field.name]
            return schema
    for operations in document["paths"].values():
        for operation in operations.values():
            if operation["operationId"] not in {
                m.name for m in _CONTROL.methods if m.input_type is field.containing_type
            }:
                continue
            for parameter in operation.get("parameters", []):
                if parameter["name"] == field.name:
                    found: dict[str, Any] = parameter["schema"]
                    return found
            body = operation.get("requestBody", {}).get("content", {})
            text = json.dumps(body)
            ref = re.search(r'"#/components/schemas/([^"]+)"', text)
            if ref and field.name in schemas[ref.group(1)].get("properties", {}):
                prop: dict[str, Any] = schemas[ref.group(1)]["properties"][field.name]
                return prop
    raise AssertionError(f"{field.full_name} is in no request schema of the document")


def _facts(rule: validate.Rule) -> list[Any]:
    """What of `rule` the document must show: its patterns and bounds."""
    facts: list[Any] = []
    for part in (rule, rule.keys, rule.values, rule.items):
        if part is None:
            continue
        if part.pattern:
            facts.append(part.pattern)
        facts += [b for b in (part.minimum, part.maximum) if b is not None]
    if rule.limit is not None:
        facts.append(rule.limit)
    return facts


CALLS = validate_calls()


def test_the_use_cases_call_the_validator_at_all() -> None:
    # The scan would pass vacuously if validate were renamed or imported another way.
    assert len(CALLS) >= 15, CALLS
    assert {name for _, name, _ in CALLS} == set(CHECKS)


@pytest.mark.parametrize(("where", "check", "path"), CALLS, ids=[c[0] for c in CALLS])
def test_every_rule_the_validator_enforces_is_in_the_document(
    document: dict[str, Any], where: str, check: str, path: str
) -> None:
    expected = CHECKS[check]
    # Of the fields the path may name, the one the contract guards with this rule.
    guarded = [
        (field, rule)
        for field, rule in ((f, contract.rule_for(f)) for f in proto_fields(path))
        if rule is not None and field.full_name not in NOT_IN_DOCUMENT
    ]
    assert guarded, f"{where}: validate.{check} on {path!r}: no field of it is in the contract"
    field, rule = guarded[0]
    if rule.items is not None:
        rule = rule.items
    elif rule.keys is not None and expected.keys is None:
        rule = rule.keys  # a check of a map's keys (a weight's cluster id)
    # The contract's rule is the validator's (a name's length may be its own).
    assert (rule.pattern, rule.keys, rule.values, rule.minimum, rule.maximum) == (
        expected.pattern,
        expected.keys,
        expected.values,
        expected.minimum,
        expected.maximum,
    ), f"{where}: {field.full_name}"
    shown = json.dumps(documented(document, field))
    for fact in _facts(rule):
        assert json.dumps(fact)[1:-1] in shown or str(fact) in shown, (where, fact, shown)


def test_paging_and_selectors_are_documented_on_every_list_call(document: dict[str, Any]) -> None:
    lists = 0
    for operations in document["paths"].values():
        for operation in operations.values():
            parameters = {p["name"]: p["schema"] for p in operation.get("parameters", [])}
            if "page_size" not in parameters:
                continue
            lists += 1
            assert parameters["page_size"]["minimum"] == 0
            token = parameters["page_token"]["anyOf"]
            assert token == [
                {"type": "string", "maxLength": 0},
                {"type": "string", "format": "page-token", "minLength": 1},
            ]
            if "label_selector" in parameters:
                assert validate.SELECTOR_RULE.pattern in parameters["label_selector"]["pattern"]
    assert lists >= 8


@pytest.mark.parametrize(
    "text",
    ["", "  ", "app=web", "app==web,tier!=db", "!gpu, example.com/team", "in", "notin=x", "k="],
)
def test_a_selector_the_document_allows_parses(text: str) -> None:
    assert re.fullmatch(validate.SELECTOR_RULE.pattern, text)
    selectors.parse(text)


def test_update_masks_and_bodies_name_only_the_mutable_fields(document: dict[str, Any]) -> None:
    for operations in document["paths"].values():
        for operation in operations.values():
            method = operation["operationId"]
            if method not in contract.MUTABLE:
                continue
            (mask,) = [p for p in operation["parameters"] if p["name"] == "update_mask"]
            pattern = mask["schema"]["pattern"]
            for name in contract.MUTABLE[method]:
                assert re.fullmatch(pattern, name)
            assert not re.fullmatch(pattern, "name")
            body = json.dumps(operation["requestBody"])
            ref = re.search(r'"#/components/schemas/([^"]+)"', body)
            assert ref is not None
            properties = document["components"]["schemas"][ref.group(1)]["properties"]
            assert list(properties) == list(contract.MUTABLE[method])


def test_required_fields_are_required_and_never_null(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    authority = schemas["wingsmith.v1.SetDeploymentAuthorityRequest.SetDeploymentAuthority"]
    assert authority["required"] == ["authority"]
    assert None not in authority["properties"]["authority"]["enum"]
    project = schemas["wingsmith.v1.Project.CreateProject"]
    assert project["required"] == ["name"]
    assert project["properties"]["name"]["type"] == "string"


def test_every_operation_is_tagged_with_its_service(document: dict[str, Any]) -> None:
    tags = {t["name"] for t in document["tags"]}
    for path, operations in document["paths"].items():
        for operation in operations.values():
            if path != openapi.OPENAPI_PATH:
                assert operation["tags"] == ["ControlService"]
    assert tags == {"ControlService"}
