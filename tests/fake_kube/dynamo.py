"""The Dynamo CRDs as the emulator serves them: versions, conversion, the operator's webhook.

Follows shared/reference/dynamo-dgd-v1beta1.md, written from Dynamo's sources, and nothing of
the agent's (a test of the agent's conversion must not pass because both sides share a bug):
- `DynamoCrd(served=...)`: the DGD versions served. The storage version is v1beta1 when it is
  served (Dynamo 1.5 on), else v1alpha1. An unserved version is absent from discovery and its
  paths answer 404, as the real API server does. When v1beta1 is served, v1alpha1 is
  deprecated: every request in it gets the CRD's deprecation Warning header.
- conversion (the operator's conversion webhook): v1alpha1 -> v1beta1 turns the `services` map
  into a `components` list sorted by name, `componentType`/`subComponentType` into `type`,
  `extraPodSpec.mainContainer` into the `main` container of `podTemplate`, `resources.*.gpu` into
  `nvidia.com/gpu`; service-level data v1beta1 has no field for goes to the private annotation
  `nvidia.com/dgd-spec`, which v1alpha1 reads restore and scrub. v1beta1 -> v1alpha1 is the
  reverse.
- validation (the operator's validating webhook, on v1beta1 objects): components added or
  removed, a component's type, single- vs multinode and backendFramework cannot change after
  creation; a component with a scaling adapter (before or after) cannot have its replicas
  changed by anyone but the operator (or Planner), which in the emulator means anyone writing
  through HTTP.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GROUP = "nvidia.com"
ALPHA, BETA = "v1alpha1", "v1beta1"
PRIVATE_SPEC = "nvidia.com/dgd-spec"
GPU = "nvidia.com/gpu"
DEPRECATION = (
    "nvidia.com/v1alpha1 DynamoGraphDeployment is deprecated; "
    "use nvidia.com/v1beta1 DynamoGraphDeployment"
)
WEBHOOK = "vdynamographdeployment.kb.io"
ADAPTER_KIND = "DynamoGraphDeploymentScalingAdapter"
# The operator's own field manager, for what its controllers write.
OPERATOR = "dynamo-operator"
_SWAPPED = ("componentName", "serviceName")
_ALPHA_ONLY = ("labels", "annotations", "dynamoNamespace", "autoscaling", "ingress")
_ROLES = ("prefill", "decode")


def version_of(obj: Mapping[str, Any]) -> str:
    group, _, version = str(obj.get("apiVersion", "")).partition("/")
    return version if group == GROUP else ""


class Denied(Exception):
    """The operator's validating webhook refused the write."""


# Dynamo's defaulting webhook, on create (shared/reference/dynamo-crds/README.md): the operator's
# version and the workload provider, which later updates may not remove or change. The README
# names no key for the provider; this one is the emulator's.
ORIGIN_VERSION = "nvidia.com/dynamo-operator-origin-version"
PROVIDER = "nvidia.com/dynamo-workload-provider"
DEFAULT_PROVIDER = "kubernetes"


def mutate(old: Mapping[str, Any] | None, new: dict[str, Any], *, operator_version: str) -> None:
    """The defaulting webhook: on create, the two annotations, and `replicas: 1` on every
    component (service) that has none. In place; `new` in either version."""
    if old is not None:
        return
    annotations = new.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[ORIGIN_VERSION] = operator_version
    annotations.setdefault(PROVIDER, DEFAULT_PROVIDER)
    spec = new.get("spec") or {}
    entries = spec.get("components") or list((spec.get("services") or {}).values())
    for entry in entries:
        if isinstance(entry, dict):
            entry.setdefault("replicas", 1)


def check_provider(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
    """The provider annotation, once set, cannot be removed or changed."""
    if old is None:
        return
    before = ((old.get("metadata") or {}).get("annotations") or {}).get(PROVIDER)
    after = ((new.get("metadata") or {}).get("annotations") or {}).get(PROVIDER)
    if before is not None and after != before:
        raise Denied(
            f"metadata.annotations[{PROVIDER}]: Invalid value: {after!r}: the workload provider"
            f" is immutable (was {before!r})"
        )


@dataclass(frozen=True)
class DynamoCrd:
    served: tuple[str, ...] = (ALPHA,)
    # The scaling adapter CRD (DGDSA) is served too, in the same versions; by default with
    # v1beta1 (the emulator's "Dynamo before 1.3" has the DGD CRD alone).
    adapters: bool = False
    # A real Dynamo release ("1.5", "1.3"; tests/fake_kube/crd_schema.py): its own CRD files
    # decide the versions served, the storage version, pruning, defaults and validation, and
    # the operator's webhooks run (mutating on create, validating). "": the hand-made CRD.
    release: str = ""
    # What the defaulting webhook stamps as the operator's version (ORIGIN_VERSION).
    operator_version: str = ""

    @property
    def storage(self) -> str:
        if self.release == "1.3":
            return ALPHA  # Dynamo 1.3: v1alpha1 stored, v1beta1 served beside it
        return BETA if BETA in self.served else ALPHA

    def deprecated(self, version: str) -> bool:
        return version == ALPHA and BETA in self.served

    def convert(self, obj: Mapping[str, Any], to: str) -> dict[str, Any]:
        """`obj` (in the version its apiVersion names) as `to` spells it."""
        source = str(obj.get("apiVersion", "")).rpartition("/")[2] or to
        out = copy.deepcopy(dict(obj))
        if source == to:
            return out
        out["apiVersion"] = f"{GROUP}/{to}"
        if obj.get("kind") == ADAPTER_KIND:
            ref = (out.get("spec") or {}).get("dgdRef")
            if isinstance(ref, dict):
                old, new = ("serviceName", "componentName") if to == BETA else _SWAPPED
                if old in ref:
                    ref[new] = ref.pop(old)
            return out
        if source == ALPHA and to == BETA:
            return _alpha_to_beta(out)
        return _beta_to_alpha(out)


# -- the operator's scaling adapter controller ---------------------------------------------------


def adapter_name(dgd_name: str, component: str) -> str:
    return f"{dgd_name}-{component.lower()}"


def wanted_adapters(dgd: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The DGDSAs the operator keeps for a v1beta1 DGD: one per component with
    `scalingAdapter`, starting at the component's replicas (1 if unset)."""
    meta = dgd.get("metadata") or {}
    out = {}
    for name, component in _components(dgd).items():
        if "scalingAdapter" not in component:
            continue
        adapter = adapter_name(meta["name"], name)
        out[adapter] = {
            "apiVersion": f"{GROUP}/{BETA}",
            "kind": ADAPTER_KIND,
            "metadata": {
                "name": adapter,
                "namespace": meta.get("namespace", ""),
                "labels": {
                    "nvidia.com/dynamo-graph-deployment-name": meta["name"],
                    "nvidia.com/dynamo-component": name,
                },
            },
            "spec": {
                "replicas": component.get("replicas", 1),
                "dgdRef": {"name": meta["name"], "componentName": name},
            },
            "status": {
                "replicas": component.get("replicas", 1),
                "selector": f"nvidia.com/dynamo-graph-deployment-name={meta['name']},"
                f"nvidia.com/dynamo-component={name}",
            },
        }
    return out


def scale_object(adapter: Mapping[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a DGDSA (its /scale subresource)."""
    meta = adapter.get("metadata") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "spec": {"replicas": (adapter.get("spec") or {}).get("replicas", 0)},
        "status": {
            "replicas": (adapter.get("status") or {}).get("replicas", 0),
            "selector": (adapter.get("status") or {}).get("selector", ""),
        },
    }


def _alpha_to_beta(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        services = spec.pop("services", None) or {}
        parked = {}
        components = []
        for name in sorted(services):
            service = services[name]
            kept = {k: service[k] for k in _ALPHA_ONLY if k in service}
            if kept:
                parked[name] = kept
            components.append(_component(name, service))
        if "services" in obj.get("spec", {}) or services or components:
            spec["components"] = components
        if "envs" in spec:
            spec["env"] = spec.pop("envs")
        pvcs = spec.pop("pvcs", None)
        if parked or pvcs:
            annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[PRIVATE_SPEC] = json.dumps(
                {"services": parked, **({"pvcs": pvcs} if pvcs else {})}, sort_keys=True
            )
    status = obj.get("status")
    if isinstance(status, dict):
        if "services" in status:
            status["components"] = status.pop("services")
        rolling = status.get("rollingUpdate")
        if isinstance(rolling, dict) and "updatedServices" in rolling:
            rolling["updatedComponents"] = rolling.pop("updatedServices")
    return obj


def _component(name: str, service: Mapping[str, Any]) -> dict[str, Any]:
    kind = service.get("componentType", "")
    sub = service.get("subComponentType", "")
    out: dict[str, Any] = {
        "name": name,
        "type": sub if kind == "worker" and sub in _ROLES else kind,
    }
    if "replicas" in service:
        out["replicas"] = service["replicas"]
    extra = copy.deepcopy(dict(service.get("extraPodSpec") or {}))
    main = {"name": "main", **(extra.pop("mainContainer", None) or {})}
    if service.get("envs"):
        own = {e.get("name") for e in main.get("env", [])}
        main["env"] = [e for e in service["envs"] if e.get("name") not in own] + main.get("env", [])
    if service.get("envFromSecret"):
        main.setdefault("envFrom", []).append({"secretRef": {"name": service["envFromSecret"]}})
    for part, values in (service.get("resources") or {}).items():
        key = values.get("gpuType") or GPU
        for field_name, value in values.items():
            if field_name == "gpu":
                main.setdefault("resources", {}).setdefault(part, {})[key] = value
            elif field_name in ("cpu", "memory"):
                main.setdefault("resources", {}).setdefault(part, {})[field_name] = value
    for probe in ("livenessProbe", "readinessProbe"):
        if probe in service:
            main[probe] = service[probe]
    containers = [main, *(c for c in extra.pop("containers", []) if c.get("name") != "main")]
    template: dict[str, Any] = {"spec": {**extra, "containers": containers}}
    if service.get("extraPodMetadata"):
        template["metadata"] = copy.deepcopy(service["extraPodMetadata"])
    out["podTemplate"] = template
    if "multinode" in service:
        out["multinode"] = service["multinode"]
    shared = service.get("sharedMemory") or {}
    if shared.get("disabled"):
        out["sharedMemorySize"] = "0"
    elif shared.get("size"):
        out["sharedMemorySize"] = shared["size"]
    if (service.get("scalingAdapter") or {}).get("enabled"):
        out["scalingAdapter"] = {}
    for key in ("runtimeVersionOverride", "modelRef", "experimental", "topologyConstraint"):
        if key in service:
            out[key] = service[key]
    return out


def _beta_to_alpha(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    parked = json.loads(annotations.pop(PRIVATE_SPEC, "{}") or "{}")
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    spec = obj.get("spec")
    if isinstance(spec, dict):
        components = spec.pop("components", None) or []
        spec["services"] = {
            c["name"]: {**_service(c), **parked.get("services", {}).get(c["name"], {})}
            for c in components
        }
        if "env" in spec:
            spec["envs"] = spec.pop("env")
        if parked.get("pvcs"):
            spec["pvcs"] = parked["pvcs"]
    status = obj.get("status")
    if isinstance(status, dict):
        if "components" in status:
            status["services"] = status.pop("components")
        rolling = status.get("rollingUpdate")
        if isinstance(rolling, dict) and "updatedComponents" in rolling:
            rolling["updatedServices"] = rolling.pop("updatedComponents")
    return obj


def _service(component: Mapping[str, Any]) -> dict[str, Any]:
    kind = component.get("type", "")
    out: dict[str, Any] = (
        {"componentType": "worker", "subComponentType": kind}
        if kind in _ROLES
        else {"componentType": kind}
    )
    if "replicas" in component:
        out["replicas"] = component["replicas"]
    template = copy.deepcopy(dict(component.get("podTemplate") or {}))
    spec = template.get("spec") or {}
    containers = spec.pop("containers", [])
    main = next((c for c in containers if c.get("name") == "main"), {})
    main = {k: v for k, v in main.items() if k != "name"}
    resources = main.get("resources") or {}
    for part in ("requests", "limits"):
        values = resources.get(part) or {}
        if GPU in values:
            out.setdefault("resources", {}).setdefault(part, {})["gpu"] = str(values.pop(GPU))
            if not values:
                resources.pop(part, None)
    if "resources" in main and not resources:
        del main["resources"]
    others = [c for c in containers if c.get("name") != "main"]
    out["extraPodSpec"] = {
        **spec,
        **({"containers": others} if others else {}),
        "mainContainer": main,
    }
    if template.get("metadata"):
        out["extraPodMetadata"] = template["metadata"]
    if "multinode" in component:
        out["multinode"] = component["multinode"]
    size = component.get("sharedMemorySize")
    if size is not None:
        out["sharedMemory"] = {"disabled": True} if str(size) == "0" else {"size": size}
    if "scalingAdapter" in component:
        out["scalingAdapter"] = {"enabled": True}
    for key in ("runtimeVersionOverride", "modelRef", "experimental", "topologyConstraint"):
        if key in component:
            out[key] = component[key]
    return out


# -- the validating webhook (on v1beta1 objects) ------------------------------------------------


def validate(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], *, runtime_versions: bool = True
) -> None:
    """Raises Denied, with the webhook's words, for a write the operator refuses.
    `runtime_versions`: the image-tag rule (Dynamo 1.4 on; 1.3 has no runtimeVersionOverride)."""
    components = _components(new)
    names = [c.get("name", "") for c in components.values()]
    if len({n.lower() for n in names}) != len(names):
        raise Denied("spec.components: Duplicate value: component names must be unique")
    for name, component in components.items():
        if not (component.get("podTemplate") or {}).get("spec", {}).get("containers"):
            raise Denied(f"spec.components[{name}].podTemplate: Required value")
        main = _main(component)
        if not main.get("image"):
            raise Denied(
                f"spec.components[{name}].podTemplate.spec.containers[main].image: Required value"
            )
        if (
            runtime_versions
            and not _semver_tag(main["image"])
            and not component.get("runtimeVersionOverride")
        ):
            raise Denied(
                f"spec.components[{name}].runtimeVersionOverride: Required value: image"
                f" {main['image']!r} has no semantic-version tag"
            )
    if old is None:
        return
    before = _components(old)
    if set(before) != set(components):
        raise Denied(
            "spec.components: Forbidden: component topology is immutable and cannot be"
            " modified after creation"
        )
    if (old.get("spec") or {}).get("backendFramework") != (new.get("spec") or {}).get(
        "backendFramework"
    ):
        raise Denied("spec.backendFramework: Invalid value: field is immutable")
    for name, component in components.items():
        was = before[name]
        if was.get("type") != component.get("type"):
            raise Denied(f"spec.components[{name}].type: Invalid value: type is immutable")
        if bool(was.get("multinode")) != bool(component.get("multinode")):
            raise Denied(
                f"spec.components[{name}]: Forbidden: cannot switch between single-node and"
                " multinode"
            )
        adapter = "scalingAdapter" in was or "scalingAdapter" in component
        if adapter and was.get("replicas", 1) != component.get("replicas", 1):
            raise Denied(
                f"spec.components[{name}].replicas: Forbidden: cannot be modified directly"
                " when scaling adapter is enabled; scale or update the related"
                " DynamoGraphDeploymentScalingAdapter instead"
            )


def _components(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    listed = (obj.get("spec") or {}).get("components") or []
    return {str(c.get("name", "")): c for c in listed if isinstance(c, Mapping)}


def _main(component: Mapping[str, Any]) -> Mapping[str, Any]:
    containers: Sequence[Mapping[str, Any]] = (component.get("podTemplate") or {}).get(
        "spec", {}
    ).get("containers") or []
    return next((c for c in containers if c.get("name") == "main"), {})


def _semver_tag(image: str) -> bool:
    return bool(parse_image_version(image))


def parse_image_version(image: str) -> tuple[int, int, int] | None:
    """Dynamo's runtimeversion.ParseImageVersion: the tag (after the last ":" of the last path
    segment, before any "@digest") as a strict Semantic Versioning 2.0.0 version, an optional
    leading v/V allowed; None when it is not one. Written as a parser, not the agent's regex."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    tag = last.rsplit(":", 1)[1]
    if tag[:1] in ("v", "V"):
        tag = tag[1:]
    core, plus, build = tag.partition("+")
    if plus and not _identifiers(build, numeric_rule=False):
        return None
    core, dash, pre = core.partition("-")
    if dash and not _identifiers(pre, numeric_rule=True):
        return None
    numbers = core.split(".")
    if len(numbers) != 3 or not all(_numeric(n) for n in numbers):
        return None
    major, minor, patch = (int(n) for n in numbers)
    return major, minor, patch


def _numeric(text: str) -> bool:
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


def _identifiers(text: str, *, numeric_rule: bool) -> bool:
    allowed = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
    for part in text.split("."):
        if not part or not set(part) <= allowed:
            return False
        if numeric_rule and part.isdigit() and not _numeric(part):
            return False
    return True


# What NVIDIA's GPU Operator serves in nvidia.com/v1alpha1: a group version shared with Dynamo.
GPU_OPERATOR_RESOURCES = [
    {
        "name": "clusterpolicies",
        "singularName": "clusterpolicy",
        "namespaced": False,
        "kind": "ClusterPolicy",
        "verbs": ["delete", "get", "list", "patch", "create", "update", "watch"],
    },
    {
        "name": "nvidiadrivers",
        "singularName": "nvidiadriver",
        "namespaced": False,
        "kind": "NVIDIADriver",
        "shortNames": ["nvd"],
        "verbs": ["delete", "get", "list", "patch", "create", "update", "watch"],
    },
]


def resource_list(version: str, *, adapters: bool) -> dict[str, Any]:
    """The discovery document of one served version (GET /apis/nvidia.com/<version>)."""
    resources = [
        {
            "name": "dynamographdeployments",
            "singularName": "dynamographdeployment",
            "namespaced": True,
            "kind": "DynamoGraphDeployment",
            "shortNames": ["dgd"],
            "verbs": ["delete", "get", "list", "patch", "create", "update", "watch"],
        },
        {
            "name": "dynamographdeployments/status",
            "singularName": "",
            "namespaced": True,
            "kind": "DynamoGraphDeployment",
            "verbs": ["get", "patch", "update"],
        },
        {
            "name": "dynamographdeploymentscalingadapters",
            "singularName": "dynamographdeploymentscalingadapter",
            "namespaced": True,
            "kind": ADAPTER_KIND,
            "shortNames": ["dgdsa"],
            "verbs": ["delete", "get", "list", "patch", "create", "update", "watch"],
        },
        {
            "name": "dynamographdeploymentscalingadapters/scale",
            "singularName": "",
            "namespaced": True,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        },
    ]
    if not adapters:
        resources = [r for r in resources if r["kind"] != ADAPTER_KIND and r["kind"] != "Scale"]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": resources,
    }
