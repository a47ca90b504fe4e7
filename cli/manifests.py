"""Reading `wingsmith create -f FILE`: documents of kind Project, Cluster or Workload.

A file holds one or more documents: YAML (several separated by `---`), a JSON object, or a
JSON list (a YAML list works too). Each is `{"kind": ..., <fields of the resource>}`; the kind
is case-insensitive and everything else is the resource body, sent to the hub as it is (the
hub validates fields and names the bad one).

The whole file is checked before anything is created, so a bad third document does not leave
the first two created. Duplicate keys are refused, as the hub refuses them in JSON: in a
hand-written file the second `replicas:` is a mistake, not an override.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import yaml

from cli import kinds
from cli.errors import ManifestError

STDIN = "-"


@dataclass(frozen=True)
class Document:
    kind: kinds.Kind
    body: dict[str, Any]
    # 1-based position in its file, for error messages.
    index: int

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
    """A document that is a list contributes its items (the JSON-list form)."""
    out: list[Any] = []
    for doc in loaded:
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
        raise ManifestError(source, index, f"unknown kind {word!r}: expected one of {_creatable()}")
    return Document(kind=kind, body=body, index=index)


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
