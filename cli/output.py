"""Rendering resources for people (tables) and for programs (JSON, YAML).

Tables have one row per resource and columns chosen per kind (cli/columns.py: `COLUMNS`, and
`WIDE_COLUMNS` after them for `-o wide`), or the user's (`-o custom-columns=NAME:.path,...`).
JSON and jsonpath show the hub's own JSON unchanged, so scripts see exactly what the REST API
returns; YAML shows a resource as the Kubernetes-style manifest `apply -f` reads back
(`apiVersion`, `kind`, `metadata.name`, `spec`: what is declared, `status`: what the hub
reports). A list, in every format, is kubectl's List (`{"apiVersion": "v1", "items": [...],
"kind": "List", "metadata": {"resourceVersion": ""}}`), every page already joined; `-o name`
prints `kind/name` lines and `-o jsonpath=...` kubectl's templates (cli/jsonpath.py).
Pure: strings in, string out.

Cells: a missing value (`null`, an empty string, a `status` the cluster has not reported yet)
is "-"; booleans are "true"/"false" as in the JSON (cli/cells.py).

A deployment review is not a table: cli/review.py draws it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from cli import jsonpath, kinds
from cli.cells import JsonObject, text, timestamp
from cli.columns import COLUMNS, WIDE_COLUMNS

# -o values; `jsonpath=TEMPLATE` and `custom-columns=SPEC` (kubectl's syntax) take an argument.
FORMATS = ("table", "wide", "json", "yaml", "name")
JSONPATH_PREFIX = "jsonpath="
COLUMNS_PREFIX = "custom-columns="
TABLE_FORMATS = ("table", "wide")


def parse_format(text: str) -> str:
    """An -o value, checked (ValueError says what is accepted); a jsonpath template is
    compiled once here, so a bad one is a usage error before the hub is asked."""
    if text.startswith(JSONPATH_PREFIX):
        jsonpath.compile_template(text.removeprefix(JSONPATH_PREFIX))
        return text
    if text.startswith(COLUMNS_PREFIX):
        custom_columns(text)
        return text
    if text not in FORMATS:
        accepted = ", ".join((*FORMATS, "jsonpath=TEMPLATE", "custom-columns=NAME:.path,..."))
        hint = kinds.suggest(text, [*FORMATS, "jsonpath", "custom-columns"])
        raise ValueError(f"unknown output format {text!r}{hint} (expected one of: {accepted})")
    return text


def custom_columns(fmt: str) -> list[tuple[str, str]]:
    """`custom-columns=NAME:.path,READY:.status.ready` as (header, path) pairs; ValueError
    for a spec kubectl would refuse too."""
    spec = fmt.removeprefix(COLUMNS_PREFIX)
    columns = []
    for part in spec.split(","):
        header, sep, path = part.partition(":")
        if not sep or not header or not path:
            raise ValueError(
                f"custom-columns: {part!r} is not NAME:PATH (e.g. custom-columns=NAME:.name,"
                "PHASE:.phase)"
            )
        jsonpath.compile_template("{" + path + "}")
        columns.append((header, path))
    return columns


def sort_items(items: Sequence[JsonObject], path: str) -> list[JsonObject]:
    """`--sort-by=PATH` (a jsonpath, `{.x}` or `.x`): items by the value found there, numbers
    as numbers, null first. An item without the field is refused (jsonpath.MissingField),
    as kubectl refuses it."""
    expression = path.strip()
    if expression.startswith("{") and expression.endswith("}"):
        expression = expression[1:-1]
    values = [jsonpath.values(expression, item) for item in items]

    def key(found: list[Any]) -> tuple[int, Any]:
        value = found[0] if found else None
        if value is None:
            return (0, 0)
        if isinstance(value, bool | int | float):
            return (1, value)
        return (2, value if isinstance(value, str) else json.dumps(value, sort_keys=True))

    order = sorted(range(len(items)), key=lambda i: key(values[i]))
    return [items[i] for i in order]


def as_list(items: list[Any]) -> dict[str, Any]:
    """kubectl's List, as `kubectl get -o json` prints one."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def manifest(kind: kinds.Kind, item: JsonObject) -> JsonObject:
    """A resource as the Kubernetes-style object `apply -f` reads back: its name in metadata,
    its declared fields (`Kind.spec`) in spec, everything the hub reports in status."""
    spec = {key: value for key, value in item.items() if key in kind.spec}
    declared = {*kind.spec, *kind.metadata, kind.name_field}
    status = {key: value for key, value in item.items() if key not in declared}
    metadata: JsonObject = {"name": item.get(kind.name_field)}
    metadata.update({key: item[key] for key in kind.metadata if key in item})
    obj: JsonObject = {
        "apiVersion": kinds.API_VERSION,
        "kind": kind.title,
        "metadata": metadata,
    }
    if kind.spec:
        obj["spec"] = spec
    obj["status"] = status
    return obj


def is_table(fmt: str) -> bool:
    """A format for people: commands add their notes ("no workloads found", "... created")."""
    return fmt in TABLE_FORMATS


def render(
    data: Any, *, fmt: str, kind: str, name_field: str = "name", headers: bool = True
) -> str:
    """`data` is one resource or a list of them, of `kind` (a key of COLUMNS)."""
    items = data if isinstance(data, list) else [data]
    if fmt in TABLE_FORMATS:
        return table(kind, items, wide=fmt == "wide", headers=headers)
    if fmt == "name":
        return "\n".join(f"{kind}/{text(item.get(name_field))}" for item in items)
    if fmt == "yaml" and kind in kinds.words():
        shape = kinds.lookup(kind)
        objects = [manifest(shape, item) for item in items]
        return serialize(objects if isinstance(data, list) else objects[0], fmt=fmt)
    return serialize(data, fmt=fmt, headers=headers)


def serialize(data: Any, *, fmt: str, headers: bool = True) -> str:
    """JSON, YAML, custom columns or a jsonpath template's text of any JSON value, keys in
    the hub's order; a list as kubectl's List."""
    if fmt.startswith(COLUMNS_PREFIX):
        items = data if isinstance(data, list) else [data]
        columns = custom_columns(fmt)
        rows = [[h for h, _ in columns]] if headers else []
        rows += [[_column(path, item) for _, path in columns] for item in items]
        return format_rows(rows) if rows else ""
    subject = as_list(data) if isinstance(data, list) else data
    if fmt == "json":
        return json.dumps(subject, indent=2, ensure_ascii=False)
    if fmt == "yaml":
        return yaml.safe_dump(subject, sort_keys=False, allow_unicode=True).rstrip("\n")
    if fmt.startswith(JSONPATH_PREFIX):
        return jsonpath.render(fmt.removeprefix(JSONPATH_PREFIX), subject)
    if fmt in ("table", "wide", "name"):
        # Not a resource (a deletion's record, a review): its JSON is the honest table.
        return json.dumps(data, indent=2, ensure_ascii=False)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _column(path: str, item: JsonObject) -> str:
    # kubectl's custom columns: several values comma-joined, none "<none>".
    found = jsonpath.values(path, item)
    return ",".join(jsonpath.show(v) for v in found if v is not None) or "<none>"


def table(
    kind: str, items: Sequence[JsonObject], *, wide: bool = False, headers: bool = True
) -> str:
    rows = table_rows(kind, items, wide=wide, headers=headers)
    return format_rows(rows) if rows else ""


def table_rows(
    kind: str, items: Sequence[JsonObject], *, wide: bool = False, headers: bool = True
) -> list[list[str]]:
    columns = COLUMNS[kind] + (WIDE_COLUMNS.get(kind, ()) if wide else ())
    rows = [[header for header, _ in columns]] if headers else []
    rows += [[cell(item) for _, cell in columns] for item in items]
    return rows


def applied_object(answer: JsonObject) -> str:
    """An AppliedObject as the YAML manifest it is, led by comments (still valid YAML):
    which deployment, which object, its digest and since when the agent reports it."""
    lines = [
        f"# applied for deployment {text(answer.get('deployment_id'))}:"
        f" {text(answer.get('kind'))} {text(answer.get('namespace'))}/{text(answer.get('name'))}",
        f"# digest {text(answer.get('digest'))}, reported since"
        f" {timestamp(answer.get('observe_time'))}",
    ]
    body = answer.get("body") or ""
    if answer.get("truncated") or not body:
        lines.append("# body left out by the agent: larger than the stream carries (256 KiB)")
        return "\n".join(lines)
    document = json.loads(body)
    return "\n".join([*lines, serialize(document, fmt="yaml")])


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def format_rows(rows: Sequence[Sequence[str]], *, min_widths: Sequence[int] = ()) -> str:
    """Left-aligned columns two spaces apart, no trailing blanks (kubectl's look);
    `min_widths` keeps later rows in the columns of a table printed before (--watch)."""
    widths = column_widths(rows)
    widths = [max(w, m) for w, m in zip(widths, [*min_widths, *([0] * len(widths))], strict=False)]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


# -- cells ------------------------------------------------------------------------------------
