"""Kubernetes' own server-side apply (structured-merge-diff v4) as an oracle for the fake's.

- `smd_schema(openapi)`: a CRD version's openAPIV3Schema as the library's schema YAML (what
  `typed.NewParser` reads), the way the API server derives it: `properties` are a map's fields,
  `additionalProperties` its element type, `x-kubernetes-list-type: map` an associative list
  with its keys, `set` an associative list of scalars, anything else atomic;
  `x-kubernetes-map-type: atomic` an atomic map; int-or-string an untyped scalar;
  `x-kubernetes-preserve-unknown-fields` the API server's `__untyped_deduced_` type.
- `build()`: tools/smd_oracle/main.go compiled offline against Debian's packaged library
  (golang-go, golang-k8s-sigs-structured-merge-diff-dev) in a GOPATH laid out in a cache
  folder (`$WINGSMITH_CACHE` or ~/.cache/wingsmith), keyed by the source's hash: never in the
  repository. `missing()` says what to install when it cannot be built.
- `Oracle`: the built helper as a subprocess, one JSON line per operation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT_TYPE = "io.wingsmith.root"
LIBRARY = Path("/usr/share/gocode/src/sigs.k8s.io/structured-merge-diff")
GOCODE = Path("/usr/share/gocode/src")
SOURCE = Path(__file__).resolve().parents[2] / "tools" / "smd_oracle" / "main.go"
INSTALL = (
    "install Go and Kubernetes' merge library from Debian: "
    "apt-get install -y golang-go golang-k8s-sigs-structured-merge-diff-dev"
)

_UNTYPED = [
    {
        "name": "__untyped_atomic_",
        "scalar": "untyped",
        "list": {
            "elementType": {"namedType": "__untyped_atomic_"},
            "elementRelationship": "atomic",
        },
        "map": {"elementType": {"namedType": "__untyped_atomic_"}, "elementRelationship": "atomic"},
    },
    {
        "name": "__untyped_deduced_",
        "scalar": "untyped",
        "list": {
            "elementType": {"namedType": "__untyped_atomic_"},
            "elementRelationship": "atomic",
        },
        "map": {
            "elementType": {"namedType": "__untyped_deduced_"},
            "elementRelationship": "separable",
        },
    },
]


def smd_schema(openapi: Mapping[str, Any], *, roots: tuple[str, ...] = ("spec",)) -> str:
    """The library's schema YAML for an object holding `roots` of the CRD's schema."""
    properties = openapi.get("properties") or {}
    root = {
        "name": ROOT_TYPE,
        "map": {
            "fields": [{"name": key, "type": _ref(properties[key])} for key in roots],
        },
    }
    return yaml.safe_dump({"types": [root, *_UNTYPED]}, sort_keys=False)


def _ref(node: Mapping[str, Any]) -> dict[str, Any]:
    if node.get("x-kubernetes-int-or-string"):
        return {"scalar": "untyped"}
    kind = node.get("type")
    unknown = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if kind in (None, "object") and unknown and not node.get("properties"):
        return {"namedType": "__untyped_deduced_"}
    if kind == "object" or (kind is None and "properties" in node):
        mapped: dict[str, Any] = {
            "fields": [
                {"name": k, "type": _ref(v)} for k, v in (node.get("properties") or {}).items()
            ]
        }
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            mapped["elementType"] = _ref(extra)
        elif unknown:
            mapped["elementType"] = {"namedType": "__untyped_deduced_"}
        if node.get("x-kubernetes-map-type") == "atomic":
            mapped["elementRelationship"] = "atomic"
        return {"map": mapped}
    if kind == "array":
        items = node.get("items")
        listed: dict[str, Any] = {
            "elementType": _ref(items) if isinstance(items, Mapping) else {"scalar": "untyped"}
        }
        list_type = node.get("x-kubernetes-list-type") or "atomic"
        if list_type == "map":
            listed["elementRelationship"] = "associative"
            listed["keys"] = list(node.get("x-kubernetes-list-map-keys") or [])
        elif list_type == "set":
            listed["elementRelationship"] = "associative"
        else:
            listed["elementRelationship"] = "atomic"
        return {"list": listed}
    if kind == "string":
        return {"scalar": "string"}
    if kind in ("integer", "number"):
        return {"scalar": "numeric"}
    if kind == "boolean":
        return {"scalar": "boolean"}
    return {"namedType": "__untyped_atomic_"}


# -- building -----------------------------------------------------------------------------------


def missing() -> str:
    """What is missing to build the oracle ("" when nothing is): for a test's skip message."""
    if shutil.which("go") is None:
        return f"Go is not installed: {INSTALL}"
    if not (LIBRARY / "merge" / "update.go").is_file():
        return f"structured-merge-diff is not at {LIBRARY}: {INSTALL}"
    return ""


def cache_dir() -> Path:
    base = os.environ.get("WINGSMITH_CACHE") or os.path.expanduser("~/.cache/wingsmith")
    return Path(base) / "smd-oracle"


def build() -> Path:
    """The helper's binary, built once per source (offline: GOPATH mode, no module download)."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    home = cache_dir()
    binary = home / f"smd_oracle-{digest}"
    if binary.is_file():
        return binary
    gopath = home / "gopath"
    links = {
        gopath / "src/sigs.k8s.io/structured-merge-diff/v4": LIBRARY,
        gopath / "src/gopkg.in/yaml.v2": GOCODE / "gopkg.in/yaml.v2",
    }
    for entry in sorted((GOCODE / "github.com").iterdir()):
        links[gopath / "src/github.com" / entry.name] = entry
    for link, target in links.items():
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            with contextlib.suppress(FileExistsError):  # another test process made it
                link.symlink_to(target)
    package = gopath / "src/wingsmith/smd_oracle"
    package.mkdir(parents=True, exist_ok=True)
    (package / "main.go").write_bytes(source)
    env = {
        **os.environ,
        "GOPATH": str(gopath),
        "GO111MODULE": "off",
        "GOFLAGS": "",
        "GOPROXY": "off",
        "GOCACHE": str(home / "gocache"),
    }
    partial = binary.with_name(f"{binary.name}.{os.getpid()}.partial")
    built = subprocess.run(
        ["go", "build", "-o", str(partial), "."],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0:
        raise RuntimeError(f"building {SOURCE} failed ({INSTALL}):\n{built.stderr}")
    partial.replace(binary)
    return binary


class Oracle:
    """One object's history through the library: apply/update return its answer."""

    def __init__(self, binary: Path, schema_yaml: str) -> None:
        self._process = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._send({"schema": schema_yaml, "type": ROOT_TYPE})

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()

    def run(
        self, op: str, manager: str, obj: Mapping[str, Any], *, force: bool = False
    ) -> dict[str, Any]:
        self._send({"op": op, "manager": manager, "force": force, "object": obj})
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            assert self._process.stderr is not None
            raise RuntimeError(f"smd_oracle ended: {self._process.stderr.read()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()
