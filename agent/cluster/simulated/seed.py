"""Seed files: DGDs that were running in a simulated cluster before the agent started.

The CLI reads a seed file with `load_seed_file` and hands the manifests to
`SimulatedCluster.seed`, so a laptop demo can show discovery and adoption of workloads nobody
declared. A file holds one or more DGD manifests: YAML documents separated by `---`, a
top-level list, or a Kubernetes `kind: List` (what `kubectl get dgd -o yaml` prints). Every
manifest is checked here, and an error names the file and the document (and item).
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from agent.cluster.simulated.manifest import InvalidManifest, parse_manifest


class SeedFileError(ValueError):
    def __init__(self, path: str, message: str, *, document: int = 0, item: int = 0) -> None:
        where = path
        if document:
            where += f": document {document}"
        if item:
            where += f", item {item}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.document = document
        self.item = item


def load_seed_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read every DGD manifest in a YAML file; empty documents are skipped."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            documents = list(yaml.safe_load_all(f))
    except OSError as e:
        raise SeedFileError(name, f"cannot read: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise SeedFileError(name, f"not valid YAML: {e}") from e
    manifests: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        manifests.extend(_manifests(name, number, document))
    return manifests


def _manifests(path: str, number: int, document: object) -> list[dict[str, Any]]:
    if document is None:
        return []
    if isinstance(document, dict) and document.get("kind") == "List":
        document = document.get("items") or []
    if isinstance(document, list):
        return [_checked(path, number, item, index) for index, item in enumerate(document, 1)]
    return [_checked(path, number, document, 0)]


def _checked(path: str, number: int, manifest: object, item: int) -> dict[str, Any]:
    if not isinstance(manifest, dict):
        problem = f"a DGD manifest is a mapping, got {type(manifest).__name__}"
        raise SeedFileError(path, problem, document=number, item=item)
    try:
        parse_manifest(manifest)
    except InvalidManifest as e:
        raise SeedFileError(path, str(e), document=number, item=item) from e
    return manifest
