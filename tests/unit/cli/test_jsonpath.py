"""kubectl's JSONPath templates (cli/jsonpath.py) over the hub's JSON."""

from __future__ import annotations

import pytest

from cli import jsonpath

LIST = {
    "kind": "List",
    "items": [
        {"name": "a", "replicas": 2, "ok": True, "quotas": {"H100-80GB": 3}, "tags": ["x", "y"]},
        {"name": "b", "replicas": 0, "ok": False, "quotas": {}, "tags": []},
    ],
}


@pytest.mark.parametrize(
    ("template", "text"),
    [
        ("{.items[*].name}", "a b"),
        ("{.items[0].replicas}", "2"),
        ("{.items[0].ok}", "true"),
        ("{.items[0].quotas['H100-80GB']}", "3"),
        ("{.items[0].tags}", '["x", "y"]'),
        ('{.items[?(@.name=="b")].replicas}', "0"),
        ("names: {.items[*].name}!", "names: a b!"),
        ('{range .items[*]}{.name}={.replicas}{"\\n"}{end}', "a=2\nb=0\n"),
        ("{range .items[*]}[{range .tags[*]}{@}{end}]{end}", "[xy][]"),
        ('{.items[?(@.name=="z")].replicas}', ""),
        ("{.items[1].tags[*]}", ""),
        ("{$.kind}", "List"),
    ],
)
def test_templates_print_as_kubectl_does(template: str, text: str) -> None:
    assert jsonpath.render(template, LIST) == text


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{.items[*]", "unclosed '{'"),
        ("{range .items[*]}{.name}", "{range} without {end}"),
        ("{.name}{end}", "{end} without {range}"),
        ("{}", "an empty path"),
        ('{"unterminated}', "unclosed"),
        ("{.items[?(@.a==}", "cannot read"),
    ],
)
def test_a_template_that_does_not_parse_says_why(template: str, problem: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        jsonpath.compile_template(template)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("template", "field", "suggestion"),
    [
        ("{.missing}", "missing", ""),
        ("{.items[*].nmae}", "nmae", "did you mean 'name'?"),
        ("{.items[0].quotas['A100']}", "A100", ""),
        ("{range .items[*]}{.replica}{end}", "replica", "did you mean 'replicas'?"),
    ],
)
def test_a_path_to_a_field_that_does_not_exist_is_an_error_as_in_kubectl(
    template: str, field: str, suggestion: str
) -> None:
    with pytest.raises(jsonpath.MissingField) as raised:
        jsonpath.render(template, LIST)
    assert raised.value.field == field
    assert suggestion in str(raised.value)


def test_values_finds_what_one_path_names_and_refuses_a_missing_field() -> None:
    assert jsonpath.values(".items[*].replicas", LIST) == [2, 0]
    assert jsonpath.values("{.items[0].name}".strip("{}"), LIST) == ["a"]
    with pytest.raises(jsonpath.MissingField):
        jsonpath.values(".items[0].nope", LIST)
