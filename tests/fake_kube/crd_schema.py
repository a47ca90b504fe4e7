"""Dynamo's own CRDs as the fake API server's rules: pruning, defaults, validation, list types.

The files are upstream's, unchanged (shared/reference/dynamo-crds/, README there), so a test of
the agent cannot pass on a misreading the fake shares with the agent's renderer. They are found
at `$WINGSMITH_DYNAMO_CRDS`, else at `shared/reference/dynamo-crds` beside the repository's root
(CI clones the repository with `shared/` beside it); `missing()` says what is missing when they
are not there, for the tests to skip with.

What the API server does with a CustomResourceDefinition's structural schema, here:
- `prune`: fields the schema does not declare are dropped, unless the node says
  `x-kubernetes-preserve-unknown-fields: true` (or declares `additionalProperties`); a null
  where the schema does not say `nullable: true` is dropped too. The root's apiVersion, kind and
  metadata are the server's own.
- `default`: each absent property with a `default` gets it, in objects that are present (and in
  every list item and map value), as the API server defaults on decoding.
- `validate`: type (int-or-string included), enum, pattern, min/maxLength, minimum/maximum,
  min/maxItems, min/maxProperties, required, anyOf/allOf/oneOf/not, unique keys of
  `x-kubernetes-list-type: map` lists and unique items of `set` lists. Each violation is one
  (field path, message) cause in the API server's words; the server answers 422 Invalid.
- `list_type(node)`: what server-side apply merges by (tests/fake_kube/ssa.py).

Not enforced (a documented gap, docs/kubernetes.md): the CEL rules (`x-kubernetes-validations`,
19 in the DGD CRD), `format` (only date-time occurs, in status), and ObjectMeta's own rules.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ENV = "WINGSMITH_DYNAMO_CRDS"
# The Dynamo releases the emulator can be: folder in shared/reference/dynamo-crds/.
RELEASES = {"1.5": "1.5-dev", "1.3": "1.3-cut"}
DGD_FILE = "nvidia.com_dynamographdeployments.yaml"
DGDSA_FILE = "nvidia.com_dynamographdeploymentscalingadapters.yaml"
Schema = Mapping[str, Any]
Cause = tuple[str, str]  # (field path, message)


def crd_dir() -> Path:
    """Where the CRD files are looked for."""
    override = os.environ.get(ENV)
    if override:
        return Path(override)
    root = Path(__file__).resolve().parents[2]
    return root.parent / "shared" / "reference" / "dynamo-crds"


def missing() -> str:
    """Why the real CRDs cannot be used ("" when they can): for a test's skip message."""
    base = crd_dir()
    absent = [
        str(base / folder / name)
        for folder in RELEASES.values()
        for name in (DGD_FILE, DGDSA_FILE)
        if not (base / folder / name).is_file()
    ]
    if not absent:
        return ""
    return (
        f"Dynamo's CRDs are missing: {', '.join(absent)}; they are shared/reference/dynamo-crds"
        f" beside the repository (or set ${ENV} to a folder holding 1.5-dev/ and 1.3-cut/)"
    )


@dataclass(frozen=True)
class Crd:
    kind: str
    # version -> the openAPIV3Schema of that version
    schemas: Mapping[str, Schema]
    storage: str
    served: tuple[str, ...]


@functools.lru_cache(maxsize=8)
def load(release: str, file: str = DGD_FILE) -> Crd:
    """One CRD of one Dynamo release ("1.5" or "1.3")."""
    path = crd_dir() / RELEASES[release] / file
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open() as f:
        document = yaml.load(f, Loader=loader)
    versions = document["spec"]["versions"]
    return Crd(
        kind=document["spec"]["names"]["kind"],
        schemas={v["name"]: v["schema"]["openAPIV3Schema"] for v in versions},
        storage=next(v["name"] for v in versions if v.get("storage")),
        served=tuple(v["name"] for v in versions if v.get("served")),
    )


class Invalid(Exception):
    """The object breaks its schema: the API server's 422 Invalid, with one cause per field."""

    def __init__(self, kind: str, name: str, causes: list[Cause]) -> None:
        self.kind, self.name, self.causes = kind, name, causes
        listed = ", ".join(f"{path}: {message}" for path, message in causes)
        super().__init__(f'{kind}.nvidia.com "{name}" is invalid: {listed}')


# -- pruning ------------------------------------------------------------------------------------


def prune(obj: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The object with what its schema does not declare dropped (the root's apiVersion, kind
    and metadata kept: they are the API server's)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata"):
            out[key] = value
            continue
        node = (schema.get("properties") or {}).get(key)
        if node is None:
            continue
        kept = _prune(value, node)
        if kept is not _DROP:
            out[key] = kept
    return out


_DROP = object()


def _prune(value: Any, node: Schema) -> Any:
    if value is None:
        return None if node.get("nullable") else _DROP
    if isinstance(value, Mapping):
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        keep_unknown = bool(node.get("x-kubernetes-preserve-unknown-fields"))
        if node.get("x-kubernetes-embedded-resource"):
            keep_unknown = keep_unknown or False
        out: dict[str, Any] = {}
        for key, item in value.items():
            child = (properties or {}).get(key)
            if child is None and isinstance(extra, Mapping):
                child = extra
            if child is None:
                if (
                    keep_unknown
                    or extra is True
                    or (
                        node.get("x-kubernetes-embedded-resource")
                        and key in ("apiVersion", "kind", "metadata")
                    )
                ):
                    out[key] = item
                continue
            kept = _prune(item, child)
            if kept is not _DROP:
                out[key] = kept
        return out
    if isinstance(value, list):
        items = node.get("items")
        if not isinstance(items, Mapping):
            return list(value)
        return [kept for item in value if (kept := _prune(item, items)) is not _DROP]
    return value


# -- defaults -----------------------------------------------------------------------------------


def default(obj: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The object with the schema's defaults filled in where a property is absent."""
    out = _default(dict(obj), schema)
    assert isinstance(out, dict)
    return out


def _default(value: Any, node: Schema) -> Any:
    if isinstance(value, Mapping):
        out = dict(value)
        properties = node.get("properties") or {}
        for key, child in properties.items():
            if key not in out and "default" in child:
                out[key] = json.loads(json.dumps(child["default"]))
        for key, item in list(out.items()):
            child = properties.get(key)
            if child is None and isinstance(node.get("additionalProperties"), Mapping):
                child = node["additionalProperties"]
            if child is not None:
                out[key] = _default(item, child)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_default(item, node["items"]) for item in value]
    return value


# -- validation ---------------------------------------------------------------------------------


def validate(obj: Mapping[str, Any], schema: Schema) -> list[Cause]:
    """Every violation of the schema, as (field path, message); [] when there is none."""
    causes: list[Cause] = []
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        node = (schema.get("properties") or {}).get(key)
        if node is not None:
            _validate(value, node, key, causes)
    for key in schema.get("required") or []:
        if key not in obj:
            causes.append((key, "Required value"))
    return causes


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, (dict, list)) else f"{type(value).__name__}"


_TYPES = {
    "string": (str,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _type_ok(value: Any, node: Schema) -> bool:
    if node.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    kind = node.get("type")
    if not kind:
        return True
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES.get(kind, (object,)))


def _validate(value: Any, node: Schema, path: str, causes: list[Cause]) -> None:
    if value is None:
        if not node.get("nullable"):
            causes.append(
                (
                    path,
                    f'Invalid value: "null": {path} in body must be of type '
                    f'{node.get("type", "object")}: "null"',
                )
            )
        return
    if not _type_ok(value, node):
        wanted = "integer or string" if node.get("x-kubernetes-int-or-string") else node["type"]
        causes.append(
            (
                path,
                f"Invalid value: {_show(value)}: {path} in body must be of type {wanted}: "
                f'"{_json_type(value)}"',
            )
        )
        return
    before = len(causes)
    _scalar_rules(value, node, path, causes)
    for combinator in ("allOf", "anyOf", "oneOf"):
        options = node.get(combinator)
        if not options:
            continue
        results = []
        for option in options:
            found: list[Cause] = []
            if _type_ok(value, option):
                _scalar_rules(value, option, path, found)
            else:
                found.append((path, "wrong type"))
            results.append(not found)
        if combinator == "allOf" and not all(results):
            causes.append((path, f"Invalid value: {_show(value)}: {path} must match all of"))
        if combinator == "anyOf" and not any(results):
            causes.append((path, f"Invalid value: {_show(value)}: {path} must match any of"))
        if combinator == "oneOf" and sum(results) != 1:
            causes.append((path, f"Invalid value: {_show(value)}: {path} must match one of"))
    if len(causes) > before:
        return
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key)
            if child is None and isinstance(extra, Mapping):
                child = extra
            if child is not None:
                _validate(item, child, f"{path}.{key}" if path else key, causes)
        for key in node.get("required") or []:
            if key not in value:
                causes.append((f"{path}.{key}", "Required value"))
        _count(len(value), node, "Properties", path, causes)
    elif isinstance(value, list):
        _count(len(value), node, "Items", path, causes)
        items = node.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                _validate(item, items, f"{path}[{index}]", causes)
        _unique(value, node, path, causes)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _scalar_rules(value: Any, node: Schema, path: str, causes: list[Cause]) -> None:
    enum = node.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(json.dumps(e) for e in enum)
        causes.append((path, f"Unsupported value: {_show(value)}: supported values: {supported}"))
    if isinstance(value, str):
        pattern = node.get("pattern")
        if pattern is not None and not _regex(pattern).search(value):
            causes.append(
                (path, f"Invalid value: {_show(value)}: {path} in body should match '{pattern}'")
            )
        if "maxLength" in node and len(value) > node["maxLength"]:
            causes.append((path, f"Too long: may not be more than {node['maxLength']} bytes"))
        if "minLength" in node and len(value) < node["minLength"]:
            causes.append(
                (
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be at least"
                    f" {node['minLength']} chars long",
                )
            )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            causes.append((path, f"Invalid value: {value}: must be a finite number"))
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and (value < low or (node.get("exclusiveMinimum") and value == low)):
            causes.append(
                (
                    path,
                    f"Invalid value: {value}: {path} in body should be greater than or equal"
                    f" to {low}",
                )
            )
        if high is not None and (value > high or (node.get("exclusiveMaximum") and value == high)):
            causes.append(
                (
                    path,
                    f"Invalid value: {value}: {path} in body should be less than or equal"
                    f" to {high}",
                )
            )


def _count(n: int, node: Schema, noun: str, path: str, causes: list[Cause]) -> None:
    low, high = node.get(f"min{noun}"), node.get(f"max{noun}")
    if low is not None and n < low:
        causes.append(
            (path, f"Invalid value: {n}: {path} in body should have at least {low} {noun.lower()}")
        )
    if high is not None and n > high:
        causes.append((path, f"Too many: {n}: must have at most {high} {noun.lower()}"))


def _unique(value: list[Any], node: Schema, path: str, causes: list[Cause]) -> None:
    kind = node.get("x-kubernetes-list-type")
    seen: set[str] = set()
    for index, item in enumerate(value):
        if kind == "map" and isinstance(item, Mapping):
            keys = node.get("x-kubernetes-list-map-keys") or []
            identity = json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
        elif kind == "set":
            identity = json.dumps(item, sort_keys=True)
        else:
            return
        if identity in seen:
            causes.append((f"{path}[{index}]", f"Duplicate value: {identity}"))
        seen.add(identity)


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# -- list types (server-side apply) -------------------------------------------------------------


def list_type(node: Schema | None) -> tuple[str, tuple[str, ...]]:
    """("map", keys) | ("set", ()) | ("atomic", ()) for an array node (atomic by default, as
    Kubernetes treats a list without a declared type)."""
    if not node:
        return "atomic", ()
    kind = node.get("x-kubernetes-list-type") or "atomic"
    if kind == "map":
        return "map", tuple(node.get("x-kubernetes-list-map-keys") or ())
    return kind, ()


def child(node: Schema | None, key: str) -> Schema | None:
    """The schema of `node`'s property (or map value) `key`; None when there is none."""
    if not node:
        return None
    found = (node.get("properties") or {}).get(key)
    if found is None and isinstance(node.get("additionalProperties"), Mapping):
        found = node["additionalProperties"]
    return found


def atomic_map(node: Schema | None) -> bool:
    """A map the schema says is replaced whole (`x-kubernetes-map-type: atomic`)."""
    return bool(node) and node.get("x-kubernetes-map-type") == "atomic"  # type: ignore[union-attr]
