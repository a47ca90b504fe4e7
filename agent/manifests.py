"""The DGDs the agent writes, as manifests: a rendered one (the renderer's output with our
bookkeeping annotations), an adopted one (the live DGD with only what the hub declares
enforced), and the last writes letting one go (`released_dgd`, `forgotten`). Our labels and
annotations go on the DGD's metadata only, never on a pod template, so they trigger no
rollout. Pure; `agent.reconcile` decides which to write (docs/authority.md).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent.cluster import port
from agent.cluster.shape import (
    Unrewritable,
    is_worker,
    main_worker,
    role_of,
    with_engine_flags,
    worker_args,
    workers,
)
from agent.devices.classes import NO_OVERRIDES
from agent.model import DeploymentSpec
from agent.render.dgd import render_dgd

ANNOTATION_SPEC_HASH = "wingsmith.dev/spec-hash"
ANNOTATION_GENERATION = "wingsmith.dev/generation"
# Per worker service: pods beyond replicas it may hold during a rollout (the admitted surge).
ANNOTATION_MAX_SURGE = "wingsmith.dev/max-surge"
# On a DGD Wingsmith took over: it was made by someone else, so it is never deleted unasked.
ANNOTATION_ADOPTED = "wingsmith.dev/adopted"
# The managed-by label an adopted DGD had before ours replaced it; restored when we let go.
ANNOTATION_PREVIOUS_MANAGER = "wingsmith.dev/previous-managed-by"
OUR_ANNOTATION_PREFIX = "wingsmith.dev/"


class Refused(Exception):
    """The deployment cannot be written (the agent rejects it on the stream)."""


def rendered(
    spec: DeploymentSpec,
    *,
    namespace: str,
    images: Mapping[str, str] | None = None,
    nodes: Sequence[port.Node] = (),
    class_overrides: Mapping[str, str] = NO_OVERRIDES,
    operator_version: str = "",
) -> dict[str, Any]:
    """The manifest to apply: the renderer's output plus our bookkeeping annotations (on the
    DGD's metadata only, never on pod templates, so they cannot trigger a rollout)."""
    manifest = render_dgd(
        spec,
        namespace=namespace,
        images=images,
        nodes=nodes,
        class_overrides=class_overrides,
        operator_version=operator_version,
    )
    return _annotated(spec, manifest)


def adopted(spec: DeploymentSpec, current: port.Dgd) -> dict[str, Any]:
    """The live DGD with what the hub declares enforced, and nothing else changed. Raises
    Refused when the declared engine flags cannot be written into its container."""
    services = copy.deepcopy(dict(current.spec.get("services", {})))
    for name, service in services.items():
        if is_worker(service):
            service["replicas"] = spec.replicas * spec.workers_of(role_of(name, service))
    main = main_worker(services)
    flags = list(spec.serving.engine_args)
    # Empty engine_args enforce nothing: the DGD keeps the flags it runs with.
    if flags and main is not None and worker_args(services[main]) != flags:
        extra = services[main].setdefault("extraPodSpec", {})
        try:
            extra["mainContainer"] = with_engine_flags(extra.get("mainContainer", {}), flags)
        except Unrewritable as e:
            raise Refused(
                f"engine_args cannot be set on {current.namespace}/{current.name} service"
                f" {main}: {e}; clear engine_args, or change the DGD yourself"
            ) from e
        # The template changes, and Dynamo's worker hash covers every worker, so every worker
        # restarts: label all their pods, so the rollout can be followed to its end.
        for name in workers(services):
            labels = services[name].setdefault("extraPodMetadata", {}).setdefault("labels", {})
            labels.update(_pod_labels(spec))
    annotations = {k: v for k, v in current.annotations.items() if k != ANNOTATION_SPEC_HASH}
    annotations[ANNOTATION_ADOPTED] = "true"
    manager = current.labels.get(port.LABEL_MANAGED_BY)
    if manager and manager != port.MANAGED_BY:
        annotations[ANNOTATION_PREVIOUS_MANAGER] = manager
    manifest = {
        "apiVersion": f"{port.DGD_GROUP}/{port.DGD_VERSION}",
        "kind": port.DGD_KIND,
        "metadata": {
            "name": current.name,
            "namespace": current.namespace,
            "labels": {**current.labels, **_dgd_labels(spec)},
            "annotations": annotations,
        },
        "spec": {**copy.deepcopy(dict(current.spec)), "services": services},
    }
    return _annotated(spec, manifest)


def released_dgd(current: port.Dgd) -> dict[str, Any]:
    """The DGD as it is, without our managed-by label: the last write after a demotion (the
    deployment-id label stays: the observed deployment still finds its DGD by it)."""
    labels = {k: v for k, v in current.labels.items() if k != port.LABEL_MANAGED_BY}
    return _metadata_only(current, labels=labels, annotations=dict(current.annotations))


def forgotten(current: port.Dgd) -> dict[str, Any]:
    """The DGD as it is, without any label or annotation of ours (a previous manager's label
    restored): the last write for a DGD the hub no longer declares and that stays."""
    labels = {
        k: v
        for k, v in current.labels.items()
        if k not in (port.LABEL_DEPLOYMENT_ID, port.LABEL_WORKLOAD)
        and not (k == port.LABEL_MANAGED_BY and v == port.MANAGED_BY)
    }
    previous = current.annotations.get(ANNOTATION_PREVIOUS_MANAGER)
    if previous:
        labels[port.LABEL_MANAGED_BY] = previous
    annotations = {
        k: v for k, v in current.annotations.items() if not k.startswith(OUR_ANNOTATION_PREFIX)
    }
    return _metadata_only(current, labels=labels, annotations=annotations)


def _metadata_only(
    current: port.Dgd, *, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": f"{port.DGD_GROUP}/{port.DGD_VERSION}",
        "kind": port.DGD_KIND,
        "metadata": {
            "name": current.name,
            "namespace": current.namespace,
            "labels": labels,
            "annotations": annotations,
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
        if is_worker(service)
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
