"""Reconcile: desired deployments vs the DGDs in the cluster -> what to apply and delete. Pure.

Rules:
- only `managed` deployments are ever written; `observed` ones are left exactly as they are;
- a managed deployment that should run (admitted, enabled) is rendered and applied when the
  cluster's DGD is missing or was rendered from something else (the spec-hash annotation
  differs: comparing hashes, not specs, ignores fields the API server defaults);
- a DGD we created (our managed-by and deployment-id labels) whose deployment is gone, disabled
  or no longer admitted is deleted; DGDs we did not create are never deleted;
- a deployment that cannot be rendered, or whose DGD name is taken by a DGD that is not ours,
  fails (the agent rejects it on the stream) and whatever runs now stays.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.cluster import port
from agent.model import DeploymentSpec
from agent.render.dgd import RenderError, render_dgd

ANNOTATION_SPEC_HASH = "wingsmith.dev/spec-hash"
ANNOTATION_GENERATION = "wingsmith.dev/generation"


@dataclass(frozen=True)
class Apply:
    deployment_id: str
    generation: int
    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class Delete:
    namespace: str
    name: str
    deployment_id: str


@dataclass(frozen=True)
class Failure:
    deployment_id: str
    generation: int
    error: str


@dataclass(frozen=True)
class Plan:
    applies: tuple[Apply, ...] = ()
    deletes: tuple[Delete, ...] = ()
    failures: tuple[Failure, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.applies or self.deletes)


def ours(dgd: port.Dgd) -> str:
    """The deployment id of a DGD this agent created, or ""."""
    if dgd.labels.get(port.LABEL_MANAGED_BY) != port.MANAGED_BY:
        return ""
    return dgd.labels.get(port.LABEL_DEPLOYMENT_ID, "")


def plan(
    desired: Mapping[str, DeploymentSpec],
    live: Sequence[port.Dgd],
    *,
    namespace: str,
    images: Mapping[str, str] | None = None,
) -> Plan:
    managed_live = {ours(d): d for d in live if ours(d)}
    by_name = {(d.namespace, d.name): d for d in live}
    applies, deletes, failures = [], [], []
    for spec in sorted(desired.values(), key=lambda s: s.deployment_id):
        if spec.authority != "managed" or not spec.should_run:
            continue
        try:
            manifest = rendered(spec, namespace=namespace, images=images)
        except RenderError as e:
            failures.append(Failure(spec.deployment_id, spec.generation, str(e)))
            continue
        squatter = by_name.get((namespace, spec.workload_name))
        if squatter is not None and ours(squatter) != spec.deployment_id:
            failures.append(
                Failure(
                    spec.deployment_id,
                    spec.generation,
                    f"DynamoGraphDeployment {namespace}/{spec.workload_name} exists and is not"
                    " this deployment's: adopt it (discovered) or rename the workload",
                )
            )
            continue
        current = managed_live.get(spec.deployment_id)
        if current is None or _annotation(current, ANNOTATION_SPEC_HASH) != _annotation_of(
            manifest, ANNOTATION_SPEC_HASH
        ):
            applies.append(Apply(spec.deployment_id, spec.generation, manifest))
    for deployment_id, dgd in sorted(managed_live.items()):
        wanted = desired.get(deployment_id)
        if wanted is None or (wanted.authority == "managed" and not wanted.should_run):
            deletes.append(Delete(dgd.namespace, dgd.name, deployment_id))
    return Plan(tuple(applies), tuple(deletes), tuple(failures))


def rendered(
    spec: DeploymentSpec, *, namespace: str, images: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The manifest to apply: the renderer's output plus our bookkeeping annotations (on the
    DGD's metadata only, never on pod templates, so they cannot trigger a rollout)."""
    manifest = render_dgd(spec, namespace=namespace, images=images)
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    annotations = manifest["metadata"].setdefault("annotations", {})
    annotations[ANNOTATION_SPEC_HASH] = digest
    annotations[ANNOTATION_GENERATION] = str(spec.generation)
    return manifest


def _annotation(dgd: port.Dgd, key: str) -> str:
    return str(dgd.annotations.get(key, ""))


def _annotation_of(manifest: Mapping[str, Any], key: str) -> str:
    return str(manifest.get("metadata", {}).get("annotations", {}).get(key, ""))
