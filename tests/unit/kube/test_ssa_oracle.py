"""The fake's server-side apply against Kubernetes' own merge library (structured-merge-diff).

Random sequences of applies (two appliers, sometimes forced) and updates (a `kubectl edit`
manager) on a DGD's spec, under Dynamo 1.5's v1beta1 schema (list-maps of components,
containers, env, volumeMounts, ports; atomic args and tolerations), run through the fake
(tests/fake_kube/ssa.py) and through the library (tests/fake_kube/smd_oracle.py), compared
after every step on the object, each manager's owned fields and the conflicts.

The comparison leaves out one thing on purpose (docs/kubernetes.md, "The fake API server"):
the library also records that a manager owns a list-map element itself (the "." entry under
`k:{...}`); the fake records the element's fields only. Everything else must be equal.
Skips, saying what to install, where Go or the library is missing; CI installs both.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_kube import crd_schema, smd_oracle, ssa

pytestmark = [
    pytest.mark.skipif(bool(crd_schema.missing()), reason=crd_schema.missing() or "-"),
    pytest.mark.skipif(bool(smd_oracle.missing()), reason=smd_oracle.missing() or "-"),
]

APPLIERS = ("wingsmith-hangar", "helm")
EDITOR = "kubectl-edit"
SEQUENCES = 40
STEPS = 40


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return dict(crd_schema.load("1.5").schemas["v1beta1"])


@pytest.fixture(scope="module")
def oracle_binary() -> Path:
    return smd_oracle.build()


@pytest.fixture
def oracle(oracle_binary: Path, schema: dict[str, Any]) -> Iterator[smd_oracle.Oracle]:
    started = smd_oracle.Oracle(oracle_binary, smd_oracle.smd_schema(schema))
    yield started
    started.close()


# -- random DGD specs ---------------------------------------------------------------------------


def container(rng: random.Random) -> dict[str, Any]:
    main: dict[str, Any] = {"name": "main"}
    if rng.random() < 0.7:
        main["image"] = rng.choice(["vllm:1.5.0", "vllm:1.5.1"])
    if rng.random() < 0.6:
        main["env"] = [
            {"name": name, "value": rng.choice(["1", "2"])}
            for name in rng.sample(["HF_HOME", "LOG_LEVEL", "NCCL_DEBUG"], rng.randint(1, 3))
        ]
    if rng.random() < 0.4:
        main["args"] = rng.sample(["--a", "--b", "--c"], rng.randint(0, 3))
    if rng.random() < 0.3:
        main["volumeMounts"] = [
            {"name": "models", "mountPath": path}
            for path in rng.sample(["/models", "/cache"], rng.randint(1, 2))
        ]
    if rng.random() < 0.3:
        main["ports"] = [
            {"containerPort": port, "protocol": "TCP"}
            for port in rng.sample([8000, 9090], rng.randint(1, 2))
        ]
    return main


def component(rng: random.Random, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if rng.random() < 0.6:
        out["replicas"] = rng.randint(1, 3)
    if rng.random() < 0.7:
        spec: dict[str, Any] = {"containers": [container(rng)]}
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        out["podTemplate"] = {"spec": spec}
    if rng.random() < 0.3:
        # A set (x-kubernetes-list-type: set): merged and owned per value.
        clients = rng.sample(["sidecar", "prefetch", "metrics"], rng.randint(1, 3))
        out["experimental"] = {"gpuMemoryService": {"extraClientContainers": clients}}
    if rng.random() < 0.3:
        out["podTemplate"] = {
            **out.get("podTemplate", {}),
            "metadata": {"labels": {rng.choice(["team", "tier"]): rng.choice(["a", "b"])}},
        }
    return out


def applied(rng: random.Random) -> dict[str, Any]:
    names = rng.sample(["Frontend", "Worker", "Prefill"], rng.randint(1, 3))
    spec: dict[str, Any] = {"components": [component(rng, n) for n in names]}
    if rng.random() < 0.5:
        spec["backendFramework"] = rng.choice(["vllm", "sglang"])
    return {"spec": spec}


def edited(rng: random.Random, live: dict[str, Any]) -> dict[str, Any]:
    """`kubectl edit`: one change to the whole live object."""
    obj = copy.deepcopy(live)
    components = (obj.get("spec") or {}).get("components") or []
    if not components:
        obj.setdefault("spec", {})["backendFramework"] = "trtllm"
        return obj
    target = rng.choice(components)
    choice = rng.randrange(5)
    containers = ((target.get("podTemplate") or {}).get("spec") or {}).get("containers") or []
    if choice == 0:
        target["replicas"] = rng.randint(1, 5)
    elif choice == 1 and containers:
        containers[0].setdefault("env", []).append({"name": "DEBUG", "value": "3"})
        containers[0]["env"] = list({e["name"]: e for e in containers[0]["env"]}.values())
    elif choice == 2 and containers and containers[0].get("env"):
        containers[0]["env"][0]["value"] = "edited"
    elif choice == 3 and containers and containers[0].get("env"):
        containers[0]["env"].pop(0)
        if not containers[0]["env"]:
            del containers[0]["env"]
    else:
        target.pop("replicas", None)
    return obj


# -- comparing ----------------------------------------------------------------------------------


def owned(tree: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The leaf paths of a FieldsV1 tree ("." marks an element owned itself)."""
    out: set[tuple[str, ...]] = set()
    for key, child in (tree or {}).items():
        path = (*prefix, key)
        if isinstance(child, dict) and child:
            out |= owned(child, path)
        else:
            out.add(path)
    return out


def without_nulls(value: Any) -> Any:
    """The library leaves `null` where it removed a whole list or map; the API server then
    drops a null its schema does not allow (pruning), so the stored object has no field."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def fake_step(
    live: dict[str, Any] | None,
    owners: dict[str, ssa.Manager],
    op: str,
    manager: str,
    obj: dict[str, Any],
    force: bool,
    schema: dict[str, Any],
) -> tuple[dict[str, Any] | None, dict[str, set[tuple[str, ...]]]]:
    try:
        if op == "apply":
            result = ssa.apply(live, obj, owners, manager=manager, force=force, schema=schema)
        else:
            result = ssa.update(live, obj, owners, manager=manager, schema=schema)
    except ssa.Conflict as e:
        by_manager: dict[str, set[ssa.Path]] = {}
        for manager_name, path in e.conflicts:
            by_manager.setdefault(manager_name, set()).add(path)
        return live, {m: owned(ssa._fields_v1(paths)) for m, paths in by_manager.items()}
    return result, {}


def differences(seed: int, oracle: smd_oracle.Oracle, schema: dict[str, Any]) -> list[str]:
    rng = random.Random(seed)
    live: dict[str, Any] | None = None
    owners: dict[str, ssa.Manager] = {}
    found = []
    for step in range(STEPS):
        if live is not None and rng.random() < 0.3:
            op, manager, obj, force = "update", EDITOR, edited(rng, live), False
        else:
            op, manager, obj = "apply", rng.choice(APPLIERS), applied(rng)
            force = rng.random() < 0.2
        answer = oracle.run(op, manager, obj, force=force)
        assert not answer["error"], answer["error"]
        trial = copy.deepcopy(owners)
        result, conflicts = fake_step(live, trial, op, manager, obj, force, schema)
        where = f"seed {seed} step {step} ({op} by {manager}{', forced' if force else ''})"
        expected = {m: owned(fields) for m, fields in answer["conflicts"].items()}
        if conflicts != expected:
            found.append(f"{where}: conflicts {conflicts} != library's {expected}")
        if not conflicts:
            owners, live = trial, result
        if (live or {}) != without_nulls(answer["object"]):
            found.append(
                f"{where}: object {json.dumps(live)} != library's {json.dumps(answer['object'])}"
            )
        ours = {
            entry["manager"]: owned(entry["fieldsV1"])
            for entry in ssa.managed_fields(owners, api_version="v1")
        }
        theirs = {m: owned(o["fieldsV1"]) for m, o in answer["managed"].items()}
        theirs = {m: paths for m, paths in theirs.items() if paths}
        if ours != theirs:
            diff = {
                m: (
                    sorted(ours.get(m, set()) - theirs.get(m, set())),
                    sorted(theirs.get(m, set()) - ours.get(m, set())),
                )
                for m in set(ours) | set(theirs)
                if ours.get(m) != theirs.get(m)
            }
            found.append(f"{where}: owned fields differ (fake only, library only): {diff}")
        if found:
            # Later steps start from different states: the first difference is the finding.
            break
    return found


@pytest.mark.parametrize("seed", range(SEQUENCES))
def test_the_fake_merges_as_kubernetes_does(
    seed: int, oracle: smd_oracle.Oracle, schema: dict[str, Any]
) -> None:
    assert differences(seed, oracle, schema) == []


def test_the_converted_schema_keeps_the_crds_list_types(schema: dict[str, Any]) -> None:
    import yaml

    types = yaml.safe_load(smd_oracle.smd_schema(schema))["types"]
    spec = types[0]["map"]["fields"][0]["type"]["map"]
    components = next(f for f in spec["fields"] if f["name"] == "components")["type"]["list"]
    assert (components["elementRelationship"], components["keys"]) == ("associative", ["name"])
