"""Reconcile: desired deployments vs the DGDs in the cluster -> what to apply and delete. Pure.

Rules (docs/authority.md, docs/rollouts.md):
- only `managed` deployments are ever written; an `observed` one is left exactly as it is,
  with one exception: when a deployment is demoted, the DGD still carries our managed-by label,
  and the agent removes that label (DGD metadata only, the pod template is untouched) so that
  nothing it does later can touch the DGD again;
- a managed deployment that should run (admitted, enabled) is either
  - *rendered* (the agent's own): the renderer's DGD, plus the rollout's surge limit; or
  - *adopted* (taken over from a DGD someone else made): the live DGD, kept as it is, with
    only what the hub declares enforced: the workers' replicas, and engine_args as the main
    worker's args once set. Our labels go on the DGD's metadata only, so taking control of a
    DGD whose config matches changes nothing in its pod template and Dynamo rolls nothing;
- it is applied when the cluster's DGD is missing or was made from something else (the
  spec-hash annotation differs: comparing hashes, not specs, ignores what the API server
  defaults);
- a DGD we manage (our managed-by and deployment-id labels) whose deployment is gone, disabled
  or no longer admitted is deleted; DGDs we do not manage are never deleted;
- a deployment that cannot be rendered, whose DGD name is taken by a DGD that is not ours, or
  whose adopted DGD is gone, fails (the agent rejects it on the stream); what runs stays.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.cluster import port
from agent.cluster.shape import main_worker, role_of, worker_args
from agent.model import DeploymentSpec
from agent.render.dgd import RenderError, render_dgd

ANNOTATION_SPEC_HASH = "wingsmith.dev/spec-hash"
ANNOTATION_GENERATION = "wingsmith.dev/generation"
# Per worker service: pods beyond replicas it may hold during a rollout (the admitted surge).
ANNOTATION_MAX_SURGE = "wingsmith.dev/max-surge"


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
    """The deployment id of a DGD this agent manages, or ""."""
    if dgd.labels.get(port.LABEL_MANAGED_BY) != port.MANAGED_BY:
        return ""
    return dgd.labels.get(port.LABEL_DEPLOYMENT_ID, "")


def dgd_of(spec: DeploymentSpec, live: Sequence[port.Dgd]) -> port.Dgd | None:
    """The deployment's DGD in the cluster: by its recorded coordinates (adopted), else by our
    deployment-id label (which stays on a demoted DGD)."""
    if spec.dgd_name:
        return next(
            (d for d in live if (d.namespace, d.name) == (spec.dgd_namespace, spec.dgd_name)),
            None,
        )
    return next(
        (d for d in live if d.labels.get(port.LABEL_DEPLOYMENT_ID) == spec.deployment_id), None
    )


def plan(
    desired: Mapping[str, DeploymentSpec],
    live: Sequence[port.Dgd],
    *,
    namespace: str,
    images: Mapping[str, str] | None = None,
) -> Plan:
    managed_live = {ours(d): d for d in live if ours(d)}
    applies, failures = [], []
    for spec in sorted(desired.values(), key=lambda s: s.deployment_id):
        current = dgd_of(spec, live)
        if spec.authority != "managed":
            if current is not None and ours(current):
                applies.append(Apply(spec.deployment_id, spec.generation, released(current)))
            continue
        if not spec.should_run:
            continue
        try:
            manifest = _manifest(spec, current, live, namespace=namespace, images=images)
        except _Refused as e:
            failures.append(Failure(spec.deployment_id, spec.generation, str(e)))
            continue
        if (
            current is None
            or current.annotations.get(ANNOTATION_SPEC_HASH)
            != (manifest["metadata"]["annotations"][ANNOTATION_SPEC_HASH])
        ):
            applies.append(Apply(spec.deployment_id, spec.generation, manifest))
    deletes = [
        Delete(dgd.namespace, dgd.name, deployment_id)
        for deployment_id, dgd in sorted(managed_live.items())
        if _unwanted(desired.get(deployment_id))
    ]
    return Plan(tuple(applies), tuple(deletes), tuple(failures))


def _unwanted(spec: DeploymentSpec | None) -> bool:
    return spec is None or (spec.authority == "managed" and not spec.should_run)


class _Refused(Exception):
    pass


def _manifest(
    spec: DeploymentSpec,
    current: port.Dgd | None,
    live: Sequence[port.Dgd],
    *,
    namespace: str,
    images: Mapping[str, str] | None,
) -> dict[str, Any]:
    if spec.adopted:
        if current is None:
            raise _Refused(
                f"the adopted DynamoGraphDeployment {spec.dgd_namespace}/{spec.dgd_name} is"
                " gone from the cluster"
            )
        return adopted(spec, current)
    squatter = next(
        (d for d in live if (d.namespace, d.name) == (namespace, spec.workload_name)), None
    )
    if squatter is not None and squatter.labels.get(port.LABEL_DEPLOYMENT_ID) != (
        spec.deployment_id
    ):
        raise _Refused(
            f"DynamoGraphDeployment {namespace}/{spec.workload_name} exists and is not this"
            " deployment's: adopt it (discovered) or rename the workload"
        )
    try:
        return rendered(spec, namespace=namespace, images=images)
    except RenderError as e:
        raise _Refused(str(e)) from e


def rendered(
    spec: DeploymentSpec, *, namespace: str, images: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The manifest to apply: the renderer's output plus our bookkeeping annotations (on the
    DGD's metadata only, never on pod templates, so they cannot trigger a rollout)."""
    manifest = render_dgd(spec, namespace=namespace, images=images)
    return _annotated(spec, manifest)


def adopted(spec: DeploymentSpec, current: port.Dgd) -> dict[str, Any]:
    """The live DGD with what the hub declares enforced, and nothing else changed."""
    services = copy.deepcopy(dict(current.spec.get("services", {})))
    main = main_worker(services)
    for name, service in services.items():
        if service.get("componentType") == "worker":
            service["replicas"] = spec.replicas * spec.workers_of(role_of(name, service))
    args = list(spec.serving.engine_args)
    if args and main is not None and worker_args(services[main]) != args:
        container = services[main].setdefault("extraPodSpec", {}).setdefault("mainContainer", {})
        container["args"] = args
        # The template changes anyway: label its pods so the rollout can be followed.
        pod_labels = services[main].setdefault("extraPodMetadata", {}).setdefault("labels", {})
        pod_labels.update(_pod_labels(spec))
    manifest = {
        "apiVersion": f"{port.DGD_GROUP}/{port.DGD_VERSION}",
        "kind": port.DGD_KIND,
        "metadata": {
            "name": current.name,
            "namespace": current.namespace,
            "labels": {**current.labels, **_dgd_labels(spec)},
            "annotations": {
                k: v for k, v in current.annotations.items() if k != ANNOTATION_SPEC_HASH
            },
        },
        "spec": {**copy.deepcopy(dict(current.spec)), "services": services},
    }
    return _annotated(spec, manifest)


def released(current: port.Dgd) -> dict[str, Any]:
    """The DGD as it is, without our managed-by label: the last write after a demotion."""
    return {
        "apiVersion": f"{port.DGD_GROUP}/{port.DGD_VERSION}",
        "kind": port.DGD_KIND,
        "metadata": {
            "name": current.name,
            "namespace": current.namespace,
            "labels": {k: v for k, v in current.labels.items() if k != port.LABEL_MANAGED_BY},
            "annotations": dict(current.annotations),
        },
        "spec": copy.deepcopy(dict(current.spec)),
    }


def _annotated(spec: DeploymentSpec, manifest: dict[str, Any]) -> dict[str, Any]:
    annotations = manifest["metadata"].setdefault("annotations", {})
    annotations[ANNOTATION_GENERATION] = str(spec.generation)
    annotations[ANNOTATION_MAX_SURGE] = json.dumps(_surge(spec, manifest), sort_keys=True)
    annotations.pop(ANNOTATION_SPEC_HASH, None)
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    annotations[ANNOTATION_SPEC_HASH] = digest
    return manifest


def _surge(spec: DeploymentSpec, manifest: Mapping[str, Any]) -> dict[str, int]:
    services = manifest.get("spec", {}).get("services", {})
    return {
        name: spec.surge_replicas * spec.workers_of(role_of(name, service))
        for name, service in services.items()
        if service.get("componentType") == "worker"
    }


def _dgd_labels(spec: DeploymentSpec) -> dict[str, str]:
    return {
        port.LABEL_MANAGED_BY: port.MANAGED_BY,
        port.LABEL_DEPLOYMENT_ID: spec.deployment_id,
        port.LABEL_WORKLOAD: spec.workload_id,
    }


def _pod_labels(spec: DeploymentSpec) -> dict[str, str]:
    return {
        port.LABEL_DEPLOYMENT_ID: spec.deployment_id,
        port.LABEL_SERVING_DIGEST: spec.serving_digest,
        port.LABEL_ENGINE_VERSION: spec.serving.engine_version,
    }
