"""Reading what we ship: the YAML under deploy/, kustomize builds of it, and the Dockerfiles.

- `documents()` loads every YAML file under deploy/ (multi-document); `objects()` keeps the
  Kubernetes objects (not the Kustomization files).
- `build(directory)` renders a kustomization the way `kubectl kustomize` does, for the small
  subset we use: `resources` (files and directories), inline JSON6902 `patches` with a
  target, and inline strategic-merge patches that delete an object (`$patch: delete`).
  Anything else raises, so a new kustomize feature in deploy/ fails loudly here until
  this learns it. When kubectl is installed, a test checks that both agree.
- `check_schema(obj)` deserializes an object into the official client's model and serializes
  it back. The models reject a wrong type or a missing required field; the round trip catches
  what they silently drop (a misspelt or misplaced field).
- `dockerfile(path)` splits a Dockerfile into instructions and stages.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"

KUSTOMIZATION = "kustomization.yaml"
KUSTOMIZE_KEYS = {"apiVersion", "kind", "resources", "patches"}


@dataclass(frozen=True)
class Document:
    path: Path
    index: int
    body: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}#{self.index}"


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        docs = [doc for doc in yaml.safe_load_all(f) if doc is not None]
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: a document is not a mapping: {doc!r}")
    return docs


def documents() -> list[Document]:
    return [Document(p, i, doc) for p in yaml_files() for i, doc in enumerate(load(p))]


def objects() -> list[Document]:
    return [d for d in documents() if d.path.name != KUSTOMIZATION]


def one(build: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of that kind (and name) in a build."""
    found = [o for o in build if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def ident(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata", {})
    return obj["kind"], meta.get("namespace", ""), meta["name"]


# -- kustomize ---------------------------------------------------------------------------------


def kustomization(directory: Path) -> dict[str, Any]:
    (body,) = load(directory / KUSTOMIZATION)
    unknown = set(body) - KUSTOMIZE_KEYS
    if unknown:
        raise NotImplementedError(f"{directory}: kustomize fields this renderer lacks: {unknown}")
    return body


def build(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize directory` prints (order aside)."""
    body = kustomization(directory)
    out: list[dict[str, Any]] = []
    for entry in body.get("resources", []):
        path = (directory / entry).resolve()
        out.extend(build(path) if path.is_dir() else copy.deepcopy(load(path)))
    for patch in body.get("patches", []):
        _patch(out, patch, where=directory)
    return out


def referenced_files(directory: Path) -> set[Path]:
    """Every file a kustomization pulls in, through its directories too."""
    files = {directory / KUSTOMIZATION}
    for entry in kustomization(directory).get("resources", []):
        path = (directory / entry).resolve()
        files |= referenced_files(path) if path.is_dir() else {path}
    return files


def _patch(objs: list[dict[str, Any]], patch: Mapping[str, Any], *, where: Path) -> None:
    if set(patch) == {"patch"}:
        body = yaml.safe_load(patch["patch"])
        if not isinstance(body, dict) or body.get("$patch") != "delete":
            raise NotImplementedError(f"{where}: only strategic-merge patches that delete")
        doomed = {k: v for k, v in body.items() if k != "$patch"}
        hits = [o for o in objs if ident(o) == ident(doomed)]
        if not hits:
            raise ValueError(f"{where}: delete patch {ident(doomed)} matches nothing")
        objs[:] = [o for o in objs if ident(o) != ident(doomed)]
        return
    if set(patch) != {"target", "patch"}:
        raise NotImplementedError(f"{where}: only inline JSON6902 patches with a target")
    ops = yaml.safe_load(patch["patch"])
    hits = [obj for obj in objs if _matches(obj, patch["target"])]
    if not hits:
        raise ValueError(f"{where}: patch target {patch['target']} matches nothing")
    for obj in hits:
        for op in ops:
            json_patch(obj, op)


def _matches(obj: Mapping[str, Any], target: Mapping[str, str]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    have = {
        "group": group,
        "version": version,
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"].get("namespace", ""),
    }
    return all(have[key] == value for key, value in target.items())


def json_patch(doc: Any, op: Mapping[str, Any]) -> None:
    """One RFC 6902 operation of the kinds we use: test, replace, add, remove."""
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key: Any = last
    if isinstance(node, list):
        key = len(node) if last == "-" else int(last)
    kind = op["op"]
    if kind == "test":
        if node[key] != op["value"]:
            raise ValueError(f"test failed at {op['path']}: {node[key]!r} != {op['value']!r}")
    elif kind == "replace":
        node[key]
        node[key] = copy.deepcopy(op["value"])
    elif kind == "add" and isinstance(node, list):
        node.insert(key, copy.deepcopy(op["value"]))
    elif kind == "add":
        node[key] = copy.deepcopy(op["value"])
    elif kind == "remove":
        del node[key]
    else:
        raise NotImplementedError(f"JSON patch op {kind!r}")


# -- schema --------------------------------------------------------------------------------------

# API groups whose kinds have V1<Kind> models in the official client. Custom resources (none in
# deploy/ today) have no model: give them a check of their own.
MODEL_GROUPS = {
    "",
    "apps",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "policy",
    "networking.k8s.io",
}


def model_name(obj: Mapping[str, Any]) -> str | None:
    group, _, version = obj["apiVersion"].rpartition("/")
    if group not in MODEL_GROUPS or version != "v1":
        return None
    name = f"V1{obj['kind']}"
    return name if hasattr(kubernetes.client, name) else None


def check_schema(api: kubernetes.client.ApiClient, obj: Mapping[str, Any]) -> list[str]:
    """What is wrong with `obj` by its model: [] when nothing. Raises the model's own error
    (pydantic ValidationError, a ValueError) for a wrong type or a missing required field."""
    name = model_name(obj)
    if name is None:
        raise LookupError(f"no client model for {obj['apiVersion']} {obj['kind']}")
    model = api.deserialize(json.dumps(obj), name, "application/json")
    back = api.sanitize_for_serialization(model)
    return differences(_without_nulls(obj), back)


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(want) | set(got)):
            where = f"{path}.{key}" if path else key
            if key not in got:
                out.append(f"{where}: not a field of the model (misspelt or misplaced?)")
            elif key not in want:
                out.append(f"{where}: added by the model")
            else:
                out.extend(differences(want[key], got[key], where))
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            d
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for d in differences(w, g, f"{path}[{i}]")
        ]
    if want != got or type(want) is not type(got):
        return [f"{path}: {want!r} became {got!r}"]
    return []


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


# -- pod specs -------------------------------------------------------------------------------


def pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: Mapping[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    return found


def env(c: Mapping[str, Any]) -> dict[str, Any]:
    """name -> value (a plain string) or valueFrom (a mapping)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def variables(args: list[str]) -> set[str]:
    """The $(VAR) references Kubernetes expands in command and args."""
    return {m for arg in args for m in re.findall(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg)}


# -- Dockerfiles ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    text: str

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form ENTRYPOINT/CMD (or HEALTHCHECK ... CMD)."""
        text = self.text.split(" CMD ", 1)[-1] if self.keyword == "HEALTHCHECK" else self.text
        text = text.strip()
        if text.startswith("CMD "):
            text = text[4:].strip()
        if not text.startswith("["):
            return None
        value = json.loads(text)
        assert isinstance(value, list)
        return [str(v) for v in value]

    def words(self) -> list[str]:
        return shlex.split(self.text)


def dockerfile(path: Path) -> list[list[Instruction]]:
    """Stages (split at FROM) of instructions; the first holds what comes before any FROM."""
    stages: list[list[Instruction]] = [[]]
    for keyword, text in _instructions(path.read_text(encoding="utf-8")):
        if keyword == "FROM":
            stages.append([])
        stages[-1].append(Instruction(keyword, text))
    return stages


def _instructions(source: str) -> Iterator[tuple[str, str]]:
    pending = ""
    for raw in source.splitlines():
        line = raw.strip()
        # Comment lines are dropped even inside a continued instruction, as Docker does.
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, text = full.partition(" ")
        yield keyword.upper(), text.strip()
    if pending:
        raise ValueError("a Dockerfile ends inside a continued line")
