"""Render one deployment into one DynamoGraphDeployment manifest (a plain dict). Pure.

Caller: the agent's reconciler, for each managed, enabled deployment; it applies the dict
through `ClusterPort.apply_dgd` and turns a `RenderError` into a Reject on the stream.
This module reads no clock, no environment and no files, and builds every dict afresh, so
the same spec gives the same manifest byte for byte and callers may mutate what they get.

One rule shapes the layout: `spec.replicas` reaches only `replicas` fields. Dynamo hashes
the worker pod templates to decide whether to roll; a scale must not change that hash.
docs/rendering.md describes the result field by field.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from agent.cluster import dgd_versions, port
from agent.devices.classes import NO_OVERRIDES
from agent.model import DeploymentSpec, Serving
from agent.render import names, placement, sglang, trtllm, validation, vllm
from agent.render.engine import Engine, MainContainer, Role
from agent.render.errors import InvalidField, RenderError, UnsupportedEngine

__all__ = ["DEFAULT_DYNAMO_TAG", "RenderError", "render_dgd", "render_dgd_as"]

API_VERSION = f"{port.DGD_GROUP}/{port.DGD_VERSION}"
FRONTEND = "Frontend"
# Dynamo release whose runtime images the agent uses when neither the workload
# (serving.image) nor the agent's configuration (`images`) names one.
DEFAULT_DYNAMO_TAG = dgd_versions.DYNAMO_RELEASE
DEFAULT_REGISTRY = "nvcr.io/nvidia/ai-dynamo"
# On the DGD: the runtimeVersionOverride written and where it came from ("1.5.0 (the cluster's
# Dynamo operator)"), so a person reading the DGD sees that it was not a guess.
ANNOTATION_RUNTIME_VERSION = "wingsmith.dev/runtime-version"

_ENGINES: Mapping[str, Engine] = {
    engine.framework: engine for engine in (vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE)
}
# Frontend --router-mode spellings of our router modes.
_ROUTER_MODES = {"round_robin": "round-robin", "kv": "kv"}


def render_dgd(
    spec: DeploymentSpec,
    *,
    namespace: str,
    images: Mapping[str, str] | None = None,
    nodes: Iterable[port.Node] = (),
    class_overrides: Mapping[str, str] = NO_OVERRIDES,
    operator_version: str = "",
) -> dict[str, Any]:
    """The DGD for `spec` in `namespace`; `images` maps engine -> image (agent config);
    `nodes` are the cluster's nodes, whose GPU labels say which of them are of the
    deployment's class (`class_overrides`: NVML name -> class, as for devices);
    `operator_version`: Dynamo's operator version as read on the cluster ("" unknown), the
    runtime version of an image whose tag is not one when the workload names none."""
    validation.validate(spec, namespace=namespace)
    engine = _engine(spec.serving.engine)
    image = _image(spec.serving, images)
    runtime, source = _runtime_version(spec.serving, image, operator_version)
    affinity = placement.node_affinity(spec.device_class, nodes, overrides=class_overrides)
    services = {FRONTEND: _frontend(spec, image=image)}
    for role, replicas in _roles(spec):
        name = engine.services.for_role(role)
        services[name] = _worker(
            spec, engine=engine, role=role, replicas=replicas, image=image, affinity=affinity
        )
    if runtime:
        for service in services.values():
            service["runtimeVersionOverride"] = runtime
    metadata: dict[str, Any] = {
        "name": _name(spec, namespace, services),
        "namespace": namespace,
        "labels": _labels(spec),
    }
    if runtime:
        metadata["annotations"] = {ANNOTATION_RUNTIME_VERSION: f"{runtime} ({source})"}
    return {
        "apiVersion": API_VERSION,
        "kind": port.DGD_KIND,
        "metadata": metadata,
        "spec": {"backendFramework": engine.framework, "services": services},
    }


def _name(spec: DeploymentSpec, namespace: str, services: Mapping[str, Any]) -> str:
    name = names.dgd_name(spec.workload_name, namespace=namespace, components=services)
    if not name:
        raise InvalidField(
            "namespace",
            f"{namespace!r} ({len(namespace)} characters) leaves no room for a DGD name in"
            f" Dynamo's label nvidia.com/dynamo-namespace=<namespace>-<dgd> (at most"
            f" {names.MAX_LABEL_VALUE} characters): configure the agent with a namespace of at"
            f" most {names.MAX_LABEL_VALUE - 1 - names.MIN_SHORT} characters",
        )
    return name


def _runtime_version(serving: Serving, image: str, operator_version: str) -> tuple[str, str]:
    """(runtimeVersionOverride to write, where it comes from); ("", "") when none is written.

    The workload's own `serving.runtime_version` always wins (it is also how a user says the
    tag is not the runtime's version); else, for an image whose tag Dynamo cannot read, the
    operator version read on the cluster; else the deployment is refused: never a guess."""
    if serving.runtime_version:
        return serving.runtime_version, "serving.runtime_version"
    if dgd_versions.versioned(image):
        return "", ""
    if operator_version:
        return operator_version, "the cluster's Dynamo operator"
    raise InvalidField(
        "serving.runtime_version",
        f"required: the image {image!r} has no semantic-version tag, so Dynamo needs the"
        " runtime version inside it (e.g. 1.5.0), and no Dynamo operator version could be read"
        " on the cluster; set serving.runtime_version or use an image tagged with a version",
    )


def render_dgd_as(version: str, spec: DeploymentSpec, **kwargs: Any) -> dict[str, Any]:
    """The DGD for `spec` as the API version `version` spells it (v1alpha1 or v1beta1): what
    the Kubernetes adapter writes for `render_dgd`'s manifest (agent/cluster/dgd_versions.py)."""
    return dgd_versions.to_served(render_dgd(spec, **kwargs), version)


def _image(serving: Serving, images: Mapping[str, str] | None) -> str:
    """serving.image, else the agent's image for the engine, else Dynamo's runtime image."""
    if serving.image:
        return serving.image
    configured = (images or {}).get(serving.engine, "")
    if configured:
        return configured
    repository = _engine(serving.engine).runtime_image
    return f"{DEFAULT_REGISTRY}/{repository}:{DEFAULT_DYNAMO_TAG}"


def _engine(name: str) -> Engine:
    try:
        return _ENGINES[name]
    except KeyError:
        raise UnsupportedEngine(name) from None


def _roles(spec: DeploymentSpec) -> list[tuple[Role, int]]:
    """Worker roles in manifest order, each with its replica count."""
    serving = spec.serving
    if serving.mode == "disaggregated":
        return [
            ("prefill", spec.replicas * serving.prefill_workers),
            ("decode", spec.replicas * serving.decode_workers),
        ]
    return [("aggregated", spec.replicas)]


def _frontend(spec: DeploymentSpec, *, image: str) -> dict[str, Any]:
    container: dict[str, Any] = {"image": image, "command": ["python3", "-m", "dynamo.frontend"]}
    router_mode = spec.serving.router_mode
    if router_mode:
        container["args"] = ["--router-mode", _ROUTER_MODES[router_mode]]
    return {
        "componentType": "frontend",
        # One frontend per deployment, whatever the worker count: it holds no GPU.
        "replicas": 1,
        **_pod_labels(spec),
        "extraPodSpec": {"mainContainer": container},
    }


def _worker(
    spec: DeploymentSpec,
    *,
    engine: Engine,
    role: Role,
    replicas: int,
    image: str,
    affinity: Mapping[str, Any],
) -> dict[str, Any]:
    service: dict[str, Any] = {"componentType": "worker"}
    if role != "aggregated":
        service["subComponentType"] = role
    gpus = str(spec.serving.devices_per_worker)
    container = engine.main_container(spec.serving, role)
    return {
        **service,
        "replicas": replicas,
        **_pod_labels(spec),
        "resources": {"requests": {"gpu": gpus}, "limits": {"gpu": gpus}},
        "extraPodSpec": {
            # Only nodes of the deployment's device class (placement.py): a fresh copy per
            # service, as shared dicts would come out of a YAML dump as &anchors.
            "affinity": copy.deepcopy(dict(affinity)),
            "mainContainer": _main_container(container, spec, image=image),
        },
    }


def _main_container(
    container: MainContainer, spec: DeploymentSpec, *, image: str
) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "image": image,
        "command": list(container.command),
        # engine_args last and verbatim: the engines' parsers let a later flag win, so the
        # user can override anything we render.
        "args": [*container.args, *spec.serving.engine_args],
    }
    if container.env:
        rendered["env"] = [{"name": name, "value": value} for name, value in container.env]
    return rendered


def _pod_labels(spec: DeploymentSpec) -> dict[str, Any]:
    # Dynamo merges a service's `labels` and `extraPodMetadata.labels` onto its pods; both,
    # because operator versions differ in which one reaches the pod.
    return {"labels": _labels(spec), "extraPodMetadata": {"labels": _labels(spec)}}


def _labels(spec: DeploymentSpec) -> dict[str, str]:
    # A fresh dict per call: shared objects would come out of a YAML dump as &anchors.
    return {
        port.LABEL_MANAGED_BY: port.MANAGED_BY,
        port.LABEL_DEPLOYMENT_ID: spec.deployment_id,
        port.LABEL_WORKLOAD: spec.workload_id,
        port.LABEL_SERVING_DIGEST: spec.serving_digest,
        port.LABEL_ENGINE_VERSION: spec.serving.engine_version,
    }
