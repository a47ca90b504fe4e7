"""Reading `create|apply|delete -f FILE`: documents of kind Project, Cluster or Workload.

A file holds one or more documents: YAML (several separated by `---`), a JSON object, a
JSON list (a YAML list works too), or kubectl's `{"kind": "List", "items": [...]}` (what
`get -o yaml` prints for a list). Each document has one of two shapes:

- Kubernetes' (what `get -o yaml` prints):
  `{"apiVersion": "wingsmith.dev/v1", "kind": "Workload", "metadata": {"name": ...},
  "spec": {<fields of the resource>}, "status": {...}}`; `status` is the hub's report and
  is ignored, the name comes from `metadata.name`;
- flat: `{"kind": ..., <fields of the resource>}`, the kind case-insensitive.

Either way the body sent to the hub is the resource's fields as written (the hub validates
them and names the bad one).

The whole file is checked before anything is created, so a bad third document does not leave
the first two created. Duplicate keys are refused, as the hub refuses them in JSON: in a
hand-written file the second `replicas:` is a mistake, not an override.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import yaml

from cli import kinds
from cli.errors import ApiError, ManifestError

STDIN = "-"
API_VERSION = kinds.API_VERSION
# What a Kubernetes-shaped document may hold at its top level.
_OBJECT_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")


@dataclass(frozen=True)
class Document:
    kind: kinds.Kind
    body: dict[str, Any]
    # 1-based position in its file, for error messages.
    index: int
    # The file it came from ("<stdin>" for -), for error messages.
    source: str = "the file"

    @property
    def name(self) -> str:
        return str(self.body.get(self.kind.name_field) or "?")


def read(path: str, *, stdin: IO[str]) -> list[Document]:
    source = "<stdin>" if path == STDIN else path
    try:
        if path == STDIN:
            text = stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(source, 0, f"cannot read: {e}") from e
    return parse(text, source=source)


def parse(text: str, *, source: str) -> list[Document]:
    raw = [doc for doc in _load(text, source) if doc is not None]
    if not raw:
        raise ManifestError(source, 0, "no documents")
    return [_document(doc, index=i, source=source) for i, doc in enumerate(raw, start=1)]


@contextlib.contextmanager
def naming(doc: Document) -> Iterator[None]:
    """The hub's refusal of a document says which: a hint names the file and the document."""
    try:
        yield
    except ApiError as e:
        if not e.hint:
            e.hint = f"in {doc.source}: document {doc.index} ({doc.kind.name}/{doc.name})"
        raise


def in_creation_order(documents: Sequence[Document]) -> list[Document]:
    """Projects, then clusters, then workloads; file order within a kind (a stable sort)."""
    rank = {kind.name: i for i, kind in enumerate(kinds.CREATION_ORDER)}
    return sorted(documents, key=lambda doc: rank[doc.kind.name])


def _load(text: str, source: str) -> list[Any]:
    if text.lstrip().startswith(("{", "[")):
        try:
            return _flatten([json.loads(text, object_pairs_hook=_unique_pairs)])
        except ValueError:
            pass  # YAML flow style also starts so; let the YAML parser have it.
    try:
        return _flatten(list(yaml.load_all(text, Loader=_UniqueKeyLoader)))
    except yaml.YAMLError as e:
        raise ManifestError(source, 0, f"not valid YAML or JSON: {e}") from e


def _flatten(loaded: list[Any]) -> list[Any]:
    """A document that is a list, or kubectl's List, contributes its items."""
    out: list[Any] = []
    for doc in loaded:
        if isinstance(doc, dict) and doc.get("kind") == "List" and "items" in doc:
            items = doc["items"]
            out.extend(items if isinstance(items, list) else [items])
        else:
            out.extend(doc if isinstance(doc, list) else [doc])
    return out


def _document(doc: Any, *, index: int, source: str) -> Document:
    if not isinstance(doc, dict):
        raise ManifestError(source, index, f"expected a mapping with 'kind', got {doc!r}")
    body = dict(doc)
    word = body.pop("kind", None)
    if not isinstance(word, str) or not word:
        raise ManifestError(source, index, f"missing 'kind' (one of: {_creatable()})")
    try:
        kind = kinds.lookup(word)
    except KeyError:
        kind = None
    if kind is None or not kind.creatable:
        hint = kinds.suggest(word, [k.title for k in kinds.CREATION_ORDER])
        raise ManifestError(
            source, index, f"unknown kind {word!r}{hint}: expected one of {_creatable()}"
        )
    if any(key in body for key in ("apiVersion", "metadata", "spec")):
        body = _object_body(body, kind=kind, index=index, source=source)
    return Document(kind=kind, body=body, index=index, source=source)


def _object_body(
    doc: dict[str, Any], *, kind: kinds.Kind, index: int, source: str
) -> dict[str, Any]:
    """The resource's fields of a Kubernetes-shaped document (its `kind` already taken)."""

    def refuse(problem: str) -> ManifestError:
        return ManifestError(source, index, problem)

    extra = [key for key in doc if key not in _OBJECT_KEYS]
    if extra:
        raise refuse(
            f"unknown top-level field(s) {', '.join(map(repr, extra))}: a document with "
            "apiVersion/metadata/spec holds the resource's fields under spec"
        )
    if doc.get("apiVersion") != API_VERSION:
        raise refuse(f"apiVersion is {doc.get('apiVersion')!r}: expected {API_VERSION!r}")
    metadata, spec = doc.get("metadata"), doc.get("spec", {})
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise refuse("metadata.name is missing: give the object's name there")
    allowed = ("name", *kind.metadata)
    unknown = [key for key in metadata if key not in allowed]
    if unknown:
        raise refuse(
            f"metadata.{unknown[0]} is not supported: a {kind.name}'s metadata holds"
            f" {' and '.join(allowed)}"
        )
    if "labels" in metadata and not isinstance(metadata["labels"], dict):
        raise refuse("metadata.labels must be a mapping of label keys to values")
    clash = [key for key in kind.metadata if key in metadata and key in spec]
    if clash:
        raise refuse(f"{clash[0]} is in both metadata and spec: give it once, in metadata")
    if not isinstance(spec, dict):
        raise refuse(f"spec must be a mapping of the {kind.name}'s fields, got {spec!r}")
    field = kind.name_field
    if field in spec and spec[field] != metadata["name"]:
        raise refuse(
            f"spec.{field} {spec[field]!r} differs from metadata.name {metadata['name']!r}:"
            " name the object once, in metadata.name"
        )
    return {
        field: metadata["name"],
        **{k: metadata[k] for k in kind.metadata if k in metadata},
        **{k: v for k, v in spec.items() if k != field},
    }


def _creatable() -> str:
    return ", ".join(kind.name.capitalize() for kind in kinds.CREATION_ORDER)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
