"""Server-side apply, as much of it as the adapter's tests need: field ownership per manager.

Fields are leaf paths (tuples of keys); lists are atomic (one leaf), as Kubernetes treats
lists without merge keys, except those of MAP_LISTS (list-type map: per element, by key).
`apply()` merges an applied configuration into the live object, drops fields the manager
applied before and no longer does (unless someone else owns them), and refuses, without
force, to change a field another manager owns: `Conflict`, with the (manager, field) pairs,
which the server turns into a 409 like the real one. An identical value is no conflict:
ownership becomes shared. `update()` is a plain write (PUT/PATCH by another actor): its
manager takes every field it changed, from whoever owned it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.fake_kube import crd_schema

Path = tuple[str, ...]
MISSING = object()

# Fields that belong to the server (or identify the object): nobody owns them.
UNOWNED: frozenset[Path] = frozenset(
    {
        ("apiVersion",),
        ("kind",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "uid"),
        ("metadata", "resourceVersion"),
        ("metadata", "generation"),
        ("metadata", "creationTimestamp"),
        ("metadata", "managedFields"),
    }
)


# Without a CRD schema (the hand-made CRD, core kinds): lists merged per element, by key
# (`x-kubernetes-list-type: map`), are Dynamo v1beta1's spec.components, keyed by name; every
# other list is atomic. With one (crd_schema.py), every list goes by its declared type.
MAP_LISTS: dict[Path, str] = {("spec", "components"): "name"}
_HAND_MADE: Mapping[str, Any] = {
    "properties": {
        "spec": {
            "properties": {
                "components": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                }
            }
        }
    }
}


@dataclass
class Manager:
    operation: str  # "Apply" | "Update"
    fields: set[Path] = field(default_factory=set)
    # "scale" when the manager wrote through the /scale subresource (an HPA, kubectl scale).
    subresource: str = ""


class Conflict(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]) -> None:
        super().__init__(f"{len(conflicts)} conflict(s)")
        self.conflicts = conflicts


# The path of a list-map element itself (under its `k:{...}` key), as managedFields' "." entry:
# whoever owns it owns the element's existence, not only its fields (structured-merge-diff).
ELEMENT = "."


def leaves(obj: Mapping[str, Any], prefix: Path = ()) -> dict[Path, Any]:
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        path = (*prefix, str(key))
        if path in UNOWNED:
            continue
        if str(key).startswith("k:") and isinstance(value, Mapping):
            out[(*path, ELEMENT)] = True
        if isinstance(value, Mapping) and value:
            out.update(leaves(value, path))
        else:
            out[path] = value
    return out


def get(obj: Any, path: Path) -> Any:
    for key in path:
        if key == ELEMENT:
            return True if isinstance(obj, Mapping) else MISSING
        if not isinstance(obj, Mapping) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def remove(obj: dict[str, Any], path: Path, *, keep: frozenset[Path] = frozenset()) -> None:
    """Delete a leaf (an element, for an ELEMENT path) and the maps it leaves empty, except
    those in `keep` (fields on the way to another manager's: structured-merge-diff keeps a
    struct field someone else owns something under, even when it ends up empty)."""
    if path and path[-1] == ELEMENT:
        path = path[:-1]
    parents = [obj]
    for key in path[:-1]:
        child = parents[-1].get(key)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth] or path[:depth] in keep:
            break
        parents[depth - 1].pop(path[depth - 1], None)


def _widest(path: Path, keep: frozenset[Path]) -> Path:
    """What goes when `path` is dropped: its widest enclosing field (inside its element) that
    no manager owns anything under, with everything in it, owned or not; structured-merge-diff
    removes the named fields on the way to a dropped field as members of the dropped set."""
    if path[-1] == ELEMENT:
        return path
    start = max((i for i, key in enumerate(path) if key.startswith(("k:", "v:"))), default=-1)
    for end in range(start + 2, len(path) + 1):
        if path[:end] not in keep:
            return path[:end]
    return path


def _struct_prefixes(paths: Iterable[Path]) -> frozenset[Path]:
    """The map fields on the way to `paths`: not lists (followed by an element key) and not
    elements (an element goes whole, whoever owns fields inside it)."""
    out = set()
    for path in paths:
        for i in range(1, len(path)):
            if path[i].startswith(("k:", "v:")) or path[i - 1].startswith(("k:", "v:")):
                continue
            out.add(path[:i])
    return frozenset(out)


def merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def related(a: Path, b: Path) -> bool:
    """One path is the other or lies under it (a map or list owned itself: its path; an
    element's own marker stays apart from its fields, as in the library's field sets)."""
    a, b = _node_path(a), _node_path(b)
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _node_path(path: Path) -> Path:
    if len(path) >= 2 and path[-1] == ELEMENT and not path[-2].startswith(("k:", "v:")):
        return path[:-1]
    return path


def apply(
    live: dict[str, Any] | None,
    applied: Mapping[str, Any],
    owners: dict[str, Manager],
    *,
    manager: str,
    force: bool,
    schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The object after `manager` applies `applied`; updates `owners` in place. `schema`: the
    object's CRD schema, whose list types decide how lists merge (None: MAP_LISTS)."""
    schema = schema or _HAND_MADE
    return _unkeyed(
        _apply(
            _keyed(live, schema),
            _keyed(applied, schema) or {},
            owners,
            manager=manager,
            force=force,
        ),
        schema,
    )


def _apply(
    live: dict[str, Any] | None,
    applied: Mapping[str, Any],
    owners: dict[str, Manager],
    *,
    manager: str,
    force: bool,
) -> dict[str, Any]:
    mine = leaves(applied)
    before = owners.get(manager, Manager("Apply")).fields
    candidate = merge(live or {}, applied)
    # What this manager applied before and no longer does goes, unless another manager owns
    # it; a list-map element it owned goes whole, whoever owns fields inside it, unless
    # another manager owns the element itself (as structured-merge-diff prunes).
    dropped = before - set(mine)
    others = {p for name, m in owners.items() if name != manager for p in m.fields}
    keep = _struct_prefixes(others | set(mine))
    roots = []
    for path in sorted(dropped, key=lambda p: (p[-1] != ELEMENT, len(p))):
        if path not in others:
            root = _widest(path, keep)
            remove(candidate, root, keep=keep)
            roots.append(root[:-1] if root[-1] == ELEMENT else root)
    conflicts = _conflicts(live or {}, candidate, owners, manager=manager, touched=mine)
    if conflicts and not force:
        raise Conflict(conflicts)
    for name, path in conflicts:
        owners[name].fields.discard(path)
    # Fields that are gone are nobody's any more: what was removed, with everything under it.
    # (A list emptied on the way is not removed: the library leaves it null, which the API
    # server prunes, and whoever owned the list itself still does.)
    gone = set(leaves(live or {})) - set(leaves(candidate))
    for name, owner in owners.items():
        if name != manager:
            owner.fields = {
                p
                for p in owner.fields - gone
                if get(live or {}, p) is MISSING
                or not any(p[: len(root)] == root for root in roots)
            }
    owners[manager] = Manager("Apply", set(mine))
    _drop_empty(owners)
    return candidate


def _nodes(obj: Mapping[str, Any], prefix: Path = ()) -> Iterable[Path]:
    """The paths of the maps and lists inside `obj` (not list elements: leaves() marks those)."""
    for key, value in obj.items():
        path = (*prefix, str(key))
        if path in UNOWNED or not isinstance(value, Mapping) or not value:
            continue
        if not str(key).startswith(("k:", "v:")):
            yield path
        yield from _nodes(value, path)


def update(
    live: dict[str, Any] | None,
    new: Mapping[str, Any],
    owners: dict[str, Manager],
    *,
    manager: str,
    subresource: str = "",
    schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A plain write of the whole object by `manager`: it owns what it changed."""
    schema = schema or _HAND_MADE
    live, new = _keyed(live, schema), _keyed(new, schema) or {}
    old_leaves, new_leaves = leaves(live or {}), leaves(new)
    changed = {p for p, v in new_leaves.items() if old_leaves.get(p, MISSING) != v}
    gone = set(old_leaves) - set(new_leaves)
    # A map or list the update adds is the updater's itself too ("." under it), as
    # structured-merge-diff records what an update adds.
    changed |= {(*p, ELEMENT) for p in _nodes(new) if get(live or {}, p) is MISSING}
    gone |= {(*p, ELEMENT) for p in _nodes(live or {}) if get(new, p) is MISSING}
    for name, owner in owners.items():
        if name != manager:
            owner.fields -= changed | gone
    entry = owners.setdefault(manager, Manager("Update"))
    entry.fields = (entry.fields - gone) | changed
    if changed:
        entry.subresource = subresource
    _drop_empty(owners)
    return _unkeyed(copy.deepcopy(dict(new)), schema)


def managed_fields(owners: Mapping[str, Manager], *, api_version: str) -> list[dict[str, Any]]:
    """metadata.managedFields as the API server writes it (FieldsV1)."""
    return [
        {
            "manager": name,
            "operation": owner.operation,
            "apiVersion": api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields_v1(owner.fields),
            **({"subresource": owner.subresource} if owner.subresource else {}),
        }
        for name, owner in sorted(owners.items())
    ]


def dotted(path: Path) -> str:
    return "".join(f".{key}" for key in path)


def _conflicts(
    live: Mapping[str, Any],
    candidate: Mapping[str, Any],
    owners: Mapping[str, Manager],
    *,
    manager: str,
    touched: Iterable[Path],
) -> list[tuple[str, Path]]:
    touched = list(touched)
    found = []
    for name, owner in sorted(owners.items()):
        if name == manager:
            continue
        for path in sorted(owner.fields):
            if not any(related(path, t) for t in touched):
                continue
            if get(live, path) != get(candidate, path):
                found.append((name, path))
    return found


def _fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for key in path:
            named = key if key.startswith(("k:", "v:")) or key == ELEMENT else f"f:{key}"
            node = node.setdefault(named, {})
    return _collapse(tree)


def _collapse(tree: dict[str, Any]) -> dict[str, Any]:
    """FieldsV1 writes a field owned itself and nothing under it as `{}`, not `{".": {}}`."""
    out = {}
    for key, child in tree.items():
        inner = _collapse(child)
        out[key] = {} if inner == {ELEMENT: {}} else inner
    return out


def _keyed(obj: Mapping[str, Any] | None, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """`obj` with each list the schema declares `x-kubernetes-list-type: map` as a map from its
    elements' keys (`k:{"name":"x"}`) to elements, and each `set` list as a map from its values
    (`v:"x"`), so that ownership and merging go per element and field, as the API server's
    structured merge does. Atomic lists stay lists: one leaf."""
    if obj is None:
        return None
    out = _key_walk(copy.deepcopy(dict(obj)), schema)
    assert isinstance(out, dict)
    return out


def _key_walk(value: Any, node: Mapping[str, Any] | None) -> Any:
    if isinstance(value, dict):
        return {k: _key_walk(v, crd_schema.child(node, k)) for k, v in value.items()}
    if isinstance(value, list) and node is not None:
        kind, keys = crd_schema.list_type(node)
        items = node.get("items") if isinstance(node.get("items"), Mapping) else None
        if kind == "map" and all(isinstance(i, Mapping) for i in value):
            return {_element_key(keys, i): _key_walk(dict(i), items) for i in value}
        if kind == "set":
            return {"v:" + json.dumps(i, sort_keys=True, separators=(",", ":")): i for i in value}
    return value


def _unkeyed(obj: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    out = _unkey_walk(obj, schema)
    assert isinstance(out, dict)
    return out


def _unkey_walk(value: Any, node: Mapping[str, Any] | None) -> Any:
    if not isinstance(value, dict):
        return value
    if node is not None and (node.get("type") == "array" or "items" in node):
        items = node.get("items") if isinstance(node.get("items"), Mapping) else None
        # An element keeps its key fields while it exists (someone else's fields in it).
        return [
            _unkey_walk({**json.loads(k[2:]), **v} if k.startswith("k:") else v, items)
            for k, v in value.items()
        ]
    out = {}
    for key, item in value.items():
        child = crd_schema.child(node, key)
        if item == {} and child is not None and child.get("type") == "array":
            # A list-map or set whose last element went: the merge leaves a null, which the
            # API server's pruning drops (the schema does not allow it), so the field goes.
            continue
        out[key] = _unkey_walk(item, child)
    return out


def _element_key(keys: Iterable[str], item: Mapping[str, Any]) -> str:
    found = {k: item[k] for k in keys if k in item}
    return "k:" + json.dumps(found, sort_keys=True, separators=(",", ":"))


def _drop_empty(owners: dict[str, Manager]) -> None:
    for name in [n for n, m in owners.items() if not m.fields]:
        del owners[name]
