"""`-o jsonpath=TEMPLATE`: kubectl's JSONPath templates over the hub's JSON.

A template is text with `{...}` actions, as in kubectl:
- `{.items[*].name}`, `{.status.ready_replicas}`, `{.quotas['H100-80GB']}`,
  `{.items[?(@.phase=="running")].name}`: a JSONPath (jsonpath-ng's extended syntax) from
  the current object; `$` and `@` may start it. Several results print space-separated, as
  kubectl does; strings raw, numbers and booleans as JSON, objects and lists as JSON text.
  A path that finds nothing because an object lacks the field it names is an error
  (`MissingField`, kubectl's "is not found": a typo must not pass for an empty answer); one
  that finds nothing because a list is empty or a filter matched nothing prints nothing.
- `{"\\n"}`, `{"\\t"}`: a quoted literal with escapes;
- `{range .items[*]}...{end}`: the text between, once per result, paths in it relative to
  that result (ranges nest).
A list command's output is met as kubectl's List: `{"kind": "List", "items": [...]}`.
Pure: `compile_template` raises ValueError for a template it cannot read.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jsonpath_ng import jsonpath as ast
from jsonpath_ng.ext.parser import parse

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Path:
    expression: Any  # a compiled jsonpath-ng expression
    text: str  # as written, for errors


@dataclass(frozen=True)
class _Range:
    expression: Any
    body: tuple[_Node, ...]
    text: str


_Node = _Text | _Path | _Range


class MissingField(ValueError):
    """A path names a field an object it reached does not have."""

    def __init__(self, field: str, present: list[str], path: str = "") -> None:
        close = difflib.get_close_matches(field, present, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        shown = ", ".join(present[:12]) + (", ..." if len(present) > 12 else "")
        where = f"jsonpath {path}: " if path else ""
        super().__init__(f"{where}field {field!r} is not found{hint} (fields here: {shown})")
        self.field, self.present = field, present


def render(template: str, data: Any) -> str:
    return "".join(_run(compile_template(template), data))


def values(path: str, data: Any) -> list[Any]:
    """What one path (`.status.ready`, `{.x}` without braces) finds in `data`; MissingField
    when nothing is found because a field is missing."""
    expression = _expression(path, path)
    return [match.value for match in _find(expression, data, path)]


def show(value: Any) -> str:
    return _show(value)


@functools.cache
def compile_template(template: str) -> tuple[_Node, ...]:
    nodes, rest = _parse(list(_tokens(template)), template, in_range=False)
    assert not rest
    return nodes


def _tokens(template: str) -> Iterator[tuple[str, str]]:
    """("text", literal) and ("action", inside braces), braces inside quotes kept."""
    i = 0
    while i < len(template):
        start = template.find("{", i)
        if start < 0:
            yield "text", template[i:]
            return
        if start > i:
            yield "text", template[i:start]
        end = _closing_brace(template, start)
        yield "action", template[start + 1 : end].strip()
        i = end + 1


def _closing_brace(template: str, start: int) -> int:
    quoted = False
    i = start + 1
    while i < len(template):
        char = template[i]
        if char == "\\" and quoted:
            i += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "}" and not quoted:
            return i
        i += 1
    raise ValueError(f"jsonpath template {template!r}: unclosed '{{' at {start}")


def _parse(
    tokens: list[tuple[str, str]], template: str, *, in_range: bool
) -> tuple[tuple[_Node, ...], list[tuple[str, str]]]:
    nodes: list[_Node] = []
    while tokens:
        kind, value = tokens.pop(0)
        if kind == "text":
            nodes.append(_Text(value))
        elif value == "end":
            if not in_range:
                raise ValueError(f"jsonpath template {template!r}: {{end}} without {{range}}")
            return tuple(nodes), tokens
        elif value.startswith("range ") or value == "range":
            body, tokens = _parse(tokens, template, in_range=True)
            path = value.removeprefix("range").strip()
            nodes.append(_Range(_expression(path, template), body, "{" + path + "}"))
        elif value.startswith('"'):
            nodes.append(_Text(_literal(value, template)))
        else:
            nodes.append(_Path(_expression(value, template), "{" + value + "}"))
    if in_range:
        raise ValueError(f"jsonpath template {template!r}: {{range}} without {{end}}")
    return tuple(nodes), tokens


def _literal(value: str, template: str) -> str:
    if len(value) < 2 or not value.endswith('"'):
        raise ValueError(f"jsonpath template {template!r}: unterminated string {value}")
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), value[1:-1])


def _expression(text: str, template: str) -> Any:
    if not text:
        raise ValueError(f"jsonpath template {template!r}: an empty path")
    if text.startswith("@"):
        text = "$" + text[1:]
    elif not text.startswith("$"):
        text = "$" + ("" if text.startswith("[") or text.startswith(".") else ".") + text
    if text.startswith("$.") and text[2:3] in ("", "."):
        text = "$" + text[2:]  # `{.}` / `{$.}`: the object itself
    try:
        return parse(text)
    except Exception as e:  # jsonpath-ng raises its lexer's and parser's errors, and others
        raise ValueError(f"jsonpath template {template!r}: cannot read {text!r}: {e}") from e


def _run(nodes: tuple[_Node, ...], data: Any) -> Iterator[str]:
    for node in nodes:
        if isinstance(node, _Text):
            yield node.text
        elif isinstance(node, _Path):
            yield " ".join(_show(m.value) for m in _find(node.expression, data, node.text))
        else:
            for match in _find(node.expression, data, node.text):
                yield from _run(node.body, match.value)


def _find(expression: Any, data: Any, where: str) -> list[Any]:
    found = list(expression.find(data))
    if not found:
        try:
            _check_fields(expression, data)
        except MissingField as e:
            raise MissingField(e.field, e.present, path=where) from None
    return found


def _check_fields(expression: Any, data: Any) -> None:
    """Raise MissingField when `expression` finds nothing because an object it reaches lacks
    the field named next (kubectl's rule); an empty list or filter is not that."""
    if isinstance(expression, ast.Child):
        _check_fields(expression.left, data)
        for match in expression.left.find(data):
            _check_fields(expression.right, match.value)
    elif isinstance(expression, ast.Fields) and isinstance(data, dict):
        for name in expression.fields:
            if name != "*" and name not in data:
                raise MissingField(name, [str(k) for k in data])


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)
