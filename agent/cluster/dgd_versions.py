"""DynamoGraphDeployment API versions: which one to write, and conversion at the backend edge. Pure.

Dynamo serves DGDs as `nvidia.com/v1alpha1` (every release) and `nvidia.com/v1beta1` (1.3 on;
the storage version since 1.5, when v1alpha1 became deprecated: every v1alpha1 write gets a
Warning and fields v1beta1 cannot hold are parked in private `nvidia.com/dgd-*` annotations).
The facts are in shared/reference/dynamo-dgd-v1beta1.md.

The agent's core (renderer, reconciler, observer, discovery) works on one *internal form*: the
v1alpha1 shape (a `services` map, engine settings in `extraPodSpec.mainContainer`, GPUs in
`resources.{limits,requests}.gpu`). A cluster backend converts at its edge:
- `to_served(manifest, version)`: internal -> what it writes (v1beta1: a `components` list sorted
  by name, everything engine-side on the container named `main` of `podTemplate`);
- `to_internal(obj)`: what it read (either version, by the object's own apiVersion) -> internal,
  without the private conversion annotations (they are the operator's, never ours to diff or
  write back).
A v1beta1 object read and written back goes through both unchanged: fields the internal form
has no name for (modelRef, experimental, runtimeVersionOverride, ...) pass through as they are.

`choose(served)` picks the version to write: the newest one this agent knows that the API server
serves (v1beta1, else v1alpha1, else none). `recreate_reason` says when a change cannot be made in
place under v1beta1 (the operator's webhook forbids changing the component set, a component's
type, single- vs multinode, and backendFramework after creation): the reconciler then deletes the
DGD and creates it again, and says why on the deployment.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agent.cluster.port import DGD_GROUP, DGD_KIND, GPU_RESOURCE

V1ALPHA1 = "v1alpha1"
V1BETA1 = "v1beta1"
# Newest first: the order `choose` prefers.
KNOWN_VERSIONS = (V1BETA1, V1ALPHA1)
# The Dynamo release whose runtime images the agent uses by default (a tag, never an override:
# the runtime version written for an unversioned image comes from the workload or the cluster).
DYNAMO_RELEASE = "1.3.1"
# What Dynamo's webhook stamps on every DGD it admits: the operator's own version.
ORIGIN_VERSION_ANNOTATION = "nvidia.com/dynamo-operator-origin-version"
# The operator's conversion keeps what one version cannot hold under these annotation keys.
PRIVATE_ANNOTATION_PREFIX = "nvidia.com/dgd-"
MAIN = "main"

# Semantic Versioning 2.0.0, exactly (Dynamo's runtimeversion.ParseImageVersion; a leading v/V
# is allowed): no leading zeros in numbers or numeric pre-release identifiers, no empty
# identifiers, one "+" at most. `1.3.1.post1`, `01.3.1`, `1.3.1-rc.01`, `1.3.1+a+b`, `1.3.1-`
# are not versions.
_NUM = r"(?:0|[1-9][0-9]*)"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"
_SEMVER_TAG = re.compile(
    rf"^[vV]?({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?(?:\+{_BUILD_ID}(?:\.{_BUILD_ID})*)?\Z"
)
# What the CRD's `runtimeVersionOverride` pattern accepts: MAJOR.MINOR.PATCH, each 0..9999.
RUNTIME_VERSION = re.compile(r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\Z")
_ROLES = frozenset({"prefill", "decode"})
# v1alpha1 service fields v1beta1 has no place for (the operator parks them in an annotation).
_ALPHA_ONLY = frozenset({"labels", "annotations", "dynamoNamespace", "autoscaling", "ingress"})


class NoServedVersion(Exception):
    """The API server serves no DGD version this agent can write."""


def api_version(version: str) -> str:
    return f"{DGD_GROUP}/{version}"


def version_of(obj: Mapping[str, Any]) -> str:
    """The version an object is written in ("" when its apiVersion is not a DGD group's)."""
    group, _, version = str(obj.get("apiVersion", "")).partition("/")
    return version if group == DGD_GROUP else ""


def choose(served: Iterable[str]) -> str:
    """The version to write: the newest one known here that is served; "" when none is."""
    served = set(served)
    return next((v for v in KNOWN_VERSIONS if v in served), "")


def no_version_message(served: Iterable[str]) -> str:
    listed = ", ".join(sorted(served)) or "none"
    return (
        f"the API server serves no DynamoGraphDeployment version this agent can write"
        f" (it serves: {listed}; the agent writes {' or '.join(KNOWN_VERSIONS)}):"
        " install or upgrade NVIDIA Dynamo's operator in this cluster"
    )


# -- internal -> served -------------------------------------------------------------------------


def to_served(manifest: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The internal-form manifest as `version` spells it (a fresh dict)."""
    if version == V1ALPHA1:
        out = copy.deepcopy(dict(manifest))
        out["apiVersion"] = api_version(V1ALPHA1)
        return out
    if version != V1BETA1:
        raise NoServedVersion(no_version_message([version] if version else []))
    out = {k: copy.deepcopy(v) for k, v in manifest.items() if k not in ("spec", "status")}
    out["apiVersion"] = api_version(V1BETA1)
    out.setdefault("kind", DGD_KIND)
    if "spec" in manifest:
        out["spec"] = _spec_to_beta(manifest["spec"])
    if "status" in manifest:
        out["status"] = _status_to_beta(manifest["status"])
    return out


def _spec_to_beta(spec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "services":
            services = value if isinstance(value, Mapping) else {}
            out["components"] = [
                _component(name, services[name])
                for name in sorted(services)
                if isinstance(services[name], Mapping)
            ]
        elif key == "envs":
            out["env"] = copy.deepcopy(value)
        elif key == "pvcs":
            continue  # v1alpha1 only; the agent never renders it
        else:
            out[key] = copy.deepcopy(value)
    return out


def _component(name: str, service: Mapping[str, Any]) -> dict[str, Any]:
    component: dict[str, Any] = {"name": name}
    kind = str(service.get("componentType", "") or "")
    sub = str(service.get("subComponentType", "") or "")
    component["type"] = sub if kind == "worker" and sub in _ROLES else kind or "worker"
    if "replicas" in service:
        component["replicas"] = service["replicas"]
    extra = dict(service.get("extraPodSpec") or {})
    main = _main_to_beta(service, dict(extra.pop("mainContainer", None) or {}))
    pod_spec = copy.deepcopy(extra)
    others = [c for c in pod_spec.pop("containers", None) or [] if c.get("name") != MAIN]
    pod_spec["containers"] = [main, *others]
    template: dict[str, Any] = {}
    if service.get("extraPodMetadata"):
        template["metadata"] = copy.deepcopy(service["extraPodMetadata"])
    template["spec"] = pod_spec
    component["podTemplate"] = template
    for key, value in service.items():
        if key in ("componentType", "subComponentType", "replicas", "extraPodSpec"):
            continue
        if key in ("extraPodMetadata", "resources", "envs", "envFromSecret", "volumeMounts"):
            continue  # moved into the template above
        if key in ("livenessProbe", "readinessProbe"):
            continue
        if key in _ALPHA_ONLY:
            continue
        if key == "sharedMemory":
            shm = value if isinstance(value, Mapping) else {}
            if shm.get("disabled"):
                component["sharedMemorySize"] = "0"
            elif shm.get("size"):
                component["sharedMemorySize"] = shm["size"]
        elif key == "scalingAdapter":
            if isinstance(value, Mapping) and value.get("enabled", True) is not False:
                component["scalingAdapter"] = {}
        else:
            component[key] = copy.deepcopy(value)
    return component


def _main_to_beta(service: Mapping[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    main: dict[str, Any] = {"name": MAIN}
    main.update({k: copy.deepcopy(v) for k, v in container.items() if k != "name"})
    envs = [e for e in service.get("envs") or [] if isinstance(e, Mapping)]
    if envs:
        # The container's own env wins by name, as the operator's conversion does.
        own = {e.get("name") for e in main.get("env") or []}
        main["env"] = [*(dict(e) for e in envs if e.get("name") not in own), *main.get("env", [])]
    if service.get("envFromSecret"):
        main["envFrom"] = [
            *main.get("envFrom", []),
            {"secretRef": {"name": service["envFromSecret"]}},
        ]
    for probe in ("livenessProbe", "readinessProbe"):
        if probe in service and probe not in main:
            main[probe] = copy.deepcopy(service[probe])
    mounts = [m for m in service.get("volumeMounts") or [] if isinstance(m, Mapping)]
    if mounts:
        main["volumeMounts"] = [
            *main.get("volumeMounts", []),
            *({"name": m.get("name"), "mountPath": m.get("mountPoint")} for m in mounts),
        ]
    resources = service.get("resources")
    if isinstance(resources, Mapping):
        merged = copy.deepcopy(main.get("resources") or {})
        for part in ("requests", "limits"):
            values = resources.get(part)
            if not isinstance(values, Mapping):
                continue
            target = merged.setdefault(part, {})
            gpu_key = str(values.get("gpuType") or GPU_RESOURCE)
            for key, value in values.items():
                if key == "gpu":
                    target[gpu_key] = str(value)
                elif key in ("cpu", "memory"):
                    target[key] = value
                elif key == "custom" and isinstance(value, Mapping):
                    target.update(value)
        main["resources"] = merged
    return main


def image_tag(image: str) -> str:
    """The tag of an image reference ("" when it has none: a bare name or a digest only)."""
    name = image.rsplit("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


def image_version(image: str) -> str:
    """The image tag's semantic version as MAJOR.MINOR.PATCH, "" when the tag is not a strict
    semantic version (then Dynamo needs `runtimeVersionOverride`)."""
    found = _SEMVER_TAG.match(image_tag(image))
    return ".".join(found.groups()) if found else ""


def versioned(image: str) -> bool:
    """Whether Dynamo can read the runtime version off the image's tag."""
    return bool(image_version(image))


def operator_version(dgds: Iterable[Mapping[str, str]]) -> str:
    """The newest operator version stamped on the DGDs' annotations (MAJOR.MINOR.PATCH; "" when
    none carries a readable one): Dynamo's defaulting webhook writes its own version there on
    every create, so the newest one is at least the running operator's minor line."""
    stamped = (str(a.get(ORIGIN_VERSION_ANNOTATION, "")) for a in dgds)
    canonical = (image_version(":" + version) for version in stamped)
    found = [
        tuple(int(part) for part in version.split("."))
        for version in canonical
        if RUNTIME_VERSION.match(version)
    ]
    return ".".join(str(part) for part in max(found)) if found else ""


def _status_to_beta(status: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(status))
    if "services" in out:
        out["components"] = out.pop("services")
    rolling = out.get("rollingUpdate")
    if isinstance(rolling, dict) and "updatedServices" in rolling:
        rolling["updatedComponents"] = rolling.pop("updatedServices")
    return out


# -- served -> internal -------------------------------------------------------------------------


def to_internal(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A DGD as read (either version) in the internal form; private annotations dropped."""
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("spec", "status")}
    meta = out.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), Mapping):
        meta["annotations"] = {
            k: v
            for k, v in meta["annotations"].items()
            if not str(k).startswith(PRIVATE_ANNOTATION_PREFIX)
        }
    beta = version_of(obj) == V1BETA1
    out["apiVersion"] = api_version(V1ALPHA1)
    if "spec" in obj:
        spec = obj["spec"] if isinstance(obj["spec"], Mapping) else {}
        out["spec"] = _spec_to_internal(spec) if beta else copy.deepcopy(dict(spec))
    if "status" in obj:
        status = obj["status"] if isinstance(obj["status"], Mapping) else {}
        out["status"] = _status_to_internal(status) if beta else copy.deepcopy(dict(status))
    return out


def _spec_to_internal(spec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "components":
            components = [c for c in value or [] if isinstance(c, Mapping) and c.get("name")]
            out["services"] = {str(c["name"]): _service(c) for c in components}
        elif key == "env":
            out["envs"] = copy.deepcopy(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _service(component: Mapping[str, Any]) -> dict[str, Any]:
    service: dict[str, Any] = {}
    kind = str(component.get("type", "") or "")
    if kind in _ROLES:
        service["componentType"] = "worker"
        service["subComponentType"] = kind
    elif kind:
        service["componentType"] = kind
    if "replicas" in component:
        service["replicas"] = component["replicas"]
    template = component.get("podTemplate") or {}
    pod_spec = copy.deepcopy(dict(template.get("spec") or {}))
    containers = [c for c in pod_spec.pop("containers", None) or [] if isinstance(c, Mapping)]
    main = next((c for c in containers if c.get("name") == MAIN), None)
    others = [c for c in containers if c is not main]
    extra: dict[str, Any] = {}
    if main is not None:
        container = {k: copy.deepcopy(v) for k, v in main.items() if k != "name"}
        resources = _gpu_resources(container)
        if resources:
            service["resources"] = resources
        extra["mainContainer"] = container
    if others:
        pod_spec["containers"] = others
    extra.update(pod_spec)
    if template.get("metadata"):
        service["extraPodMetadata"] = copy.deepcopy(template["metadata"])
    for key, value in component.items():
        if key in ("name", "type", "replicas", "podTemplate"):
            continue
        if key == "sharedMemorySize":
            service["sharedMemory"] = (
                {"disabled": True} if str(value) == "0" else {"size": copy.deepcopy(value)}
            )
        elif key == "scalingAdapter":
            service["scalingAdapter"] = {"enabled": True}
        else:
            service[key] = copy.deepcopy(value)
    service["extraPodSpec"] = extra
    return service


def _gpu_resources(container: dict[str, Any]) -> dict[str, Any]:
    """Move the container's nvidia.com/gpu requests and limits to the service's `gpu`."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return {}
    moved: dict[str, Any] = {}
    for part in ("requests", "limits"):
        values = resources.get(part)
        if isinstance(values, dict) and GPU_RESOURCE in values:
            moved[part] = {"gpu": str(values.pop(GPU_RESOURCE))}
            if not values:
                del resources[part]
    if not resources:
        del container["resources"]
    return moved


def _status_to_internal(status: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(status))
    if "components" in out:
        out["services"] = out.pop("components")
    rolling = out.get("rollingUpdate")
    if isinstance(rolling, dict) and "updatedComponents" in rolling:
        rolling["updatedServices"] = rolling.pop("updatedComponents")
    return out


# -- update rules -------------------------------------------------------------------------------


def recreate_reason(live: Mapping[str, Any], desired: Mapping[str, Any]) -> str:
    """Why v1beta1 forbids changing `live`'s spec into `desired`'s in place ("" if it allows
    it). Both specs in the internal form; the rules are the operator's validating webhook's."""
    old = live.get("services") if isinstance(live.get("services"), Mapping) else {}
    new = desired.get("services") if isinstance(desired.get("services"), Mapping) else {}
    assert isinstance(old, Mapping) and isinstance(new, Mapping)
    if set(old) != set(new):
        return (
            f"its components change ({', '.join(sorted(old)) or 'none'} ->"
            f" {', '.join(sorted(new)) or 'none'}), which v1beta1 forbids after creation"
        )
    if live.get("backendFramework") != desired.get("backendFramework"):
        return (
            f"its backendFramework changes ({live.get('backendFramework')} ->"
            f" {desired.get('backendFramework')}), which v1beta1 forbids after creation"
        )
    for name in sorted(new):
        before, after = _type(old[name]), _type(new[name])
        if before != after:
            return f"component {name} changes type ({before} -> {after}), which v1beta1 forbids"
        if bool(old[name].get("multinode")) != bool(new[name].get("multinode")):
            return f"component {name} switches between single-node and multinode"
    return ""


def _type(service: Mapping[str, Any]) -> str:
    kind = str(service.get("componentType", "") or "")
    sub = str(service.get("subComponentType", "") or "")
    return sub if kind == "worker" and sub in _ROLES else kind
