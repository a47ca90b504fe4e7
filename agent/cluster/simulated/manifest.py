"""What the simulated Dynamo operator reads from a DGD manifest: validation and pod templates.

Called by `SimulatedCluster.apply_dgd`/`seed` and by the seed-file loader
(agent/cluster/simulated/seed.py). Pure: it turns a manifest dict into a frozen `Graph`, or
raises `InvalidManifest` naming the field. It checks only what the simulator needs to act
(apiVersion, kind, metadata.name/namespace, spec.services and the fields pods are made from);
Dynamo's own admission webhook checks far more, and we do not pretend to.

Generations follow Dynamo's managed rolling update: a service's template digest covers
everything in the service except `replicas` (plus the graph-wide envs, labels and backend);
all worker services share one *worker hash* over their digests, so changing any worker rolls
every worker (the new generation gets its own Dynamo namespace, where prefill and decode pair
up). A frontend (or planner) is its own generation and is replaced on its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agent.cluster.port import (
    DGD_GROUP,
    DGD_KIND,
    DGD_VERSION,
    DYNAMO_COMPONENT,
    DYNAMO_COMPONENT_TYPE,
    DYNAMO_GRAPH,
    DYNAMO_NAMESPACE,
    DYNAMO_SELECTOR,
    DYNAMO_SUB_COMPONENT_TYPE,
    DYNAMO_WORKER_HASH,
)
from agent.cluster.simulated import node_selection
from agent.cluster.simulated.node_selection import ANYWHERE, NodeSelection

API_VERSION = f"{DGD_GROUP}/{DGD_VERSION}"
MAX_SERVICES = 25
WORKER_TYPES = frozenset({"worker", "prefill", "decode"})


class InvalidManifest(ValueError):
    """A DGD manifest the simulated operator cannot act on; `field` is the offending path."""

    def __init__(self, field: str, problem: str, *, graph: str = "") -> None:
        where = f"DGD {graph}: " if graph else ""
        super().__init__(f"{where}{field} {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class Template:
    """How one service's pods look; `key` is the generation they belong to."""

    service: str
    key: str
    replicas: int
    gpu_request: int
    image: str
    argv: tuple[str, ...]
    labels: Mapping[str, str]
    is_worker: bool
    # extraPodSpec's nodeSelector and required node affinity.
    selection: NodeSelection = ANYWHERE

    @property
    def selector(self) -> str:
        return self.labels[DYNAMO_SELECTOR]


@dataclass(frozen=True)
class Graph:
    """A validated DGD: what was applied, plus the templates the operator derives from it."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    # Plain dicts and lists, a private copy of the manifest's spec.
    spec: Mapping[str, Any]
    templates: tuple[Template, ...]
    worker_hash: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_manifest(manifest: object) -> Graph:
    """Validate a DGD manifest and derive its pod templates."""
    if not isinstance(manifest, Mapping):
        raise InvalidManifest("manifest", f"must be a mapping, got {type(manifest).__name__}")
    if manifest.get("apiVersion") != API_VERSION:
        got = manifest.get("apiVersion")
        raise InvalidManifest("apiVersion", f"must be {API_VERSION}, got {got!r}")
    if manifest.get("kind") != DGD_KIND:
        raise InvalidManifest("kind", f"must be {DGD_KIND}, got {manifest.get('kind')!r}")
    metadata = _mapping(manifest.get("metadata"), "metadata")
    name = _name(metadata.get("name"), "metadata.name")
    namespace = _name(metadata.get("namespace"), "metadata.namespace")
    try:
        return _graph(manifest, metadata, namespace=namespace, name=name)
    except InvalidManifest as e:
        raise InvalidManifest(e.field, e.problem, graph=f"{namespace}/{name}") from None


def _graph(
    manifest: Mapping[str, Any], metadata: Mapping[str, Any], *, namespace: str, name: str
) -> Graph:
    labels = _labels(metadata.get("labels"), "metadata.labels")
    annotations = _labels(metadata.get("annotations"), "metadata.annotations")
    spec = _plain(_mapping(manifest.get("spec"), "spec"))
    services = _mapping(spec.get("services"), "spec.services")
    if len(services) > MAX_SERVICES:
        raise InvalidManifest("spec.services", f"has {len(services)} services; at most 25")
    shared = {
        "envs": spec.get("envs"),
        "labels": _labels(spec.get("labels"), "spec.labels"),
        "backendFramework": spec.get("backendFramework"),
    }
    digests = {svc: _digest(_service(services, svc), shared) for svc in services}
    parsed = {
        svc: _ServiceFields.read(_service(services, svc), f"spec.services.{svc}")
        for svc in services
    }
    workers = sorted(svc for svc, fields in parsed.items() if fields.is_worker)
    worker_hash = _hash([[svc, digests[svc]] for svc in workers])[:8]
    templates = tuple(
        _template(
            parsed[svc],
            service=svc,
            key=worker_hash if parsed[svc].is_worker else digests[svc][:8],
            graph=(namespace, name),
            shared_labels=shared["labels"],
        )
        for svc in services
    )
    return Graph(
        namespace=namespace,
        name=name,
        labels=MappingProxyType(labels),
        annotations=MappingProxyType(annotations),
        spec=spec,
        templates=templates,
        worker_hash=worker_hash,
    )


@dataclass(frozen=True)
class _ServiceFields:
    component_type: str
    sub_component_type: str
    replicas: int
    gpu_request: int
    image: str
    argv: tuple[str, ...]
    labels: dict[str, str]
    dynamo_namespace: str
    selection: NodeSelection

    @property
    def is_worker(self) -> bool:
        if self.component_type:
            return self.component_type in WORKER_TYPES or bool(self.sub_component_type)
        return bool(self.sub_component_type) or self.gpu_request > 0

    @classmethod
    def read(cls, service: Mapping[str, Any], where: str) -> _ServiceFields:
        container = _main_container(service, where)
        container_at = f"{where}.extraPodSpec.mainContainer"
        extra_meta = _mapping(service.get("extraPodMetadata", {}), f"{where}.extraPodMetadata")
        labels = _labels(service.get("labels"), f"{where}.labels")
        labels.update(_labels(extra_meta.get("labels"), f"{where}.extraPodMetadata.labels"))
        return cls(
            component_type=_optional_str(service.get("componentType"), f"{where}.componentType"),
            sub_component_type=_optional_str(
                service.get("subComponentType"), f"{where}.subComponentType"
            ),
            replicas=_count(service.get("replicas", 1), f"{where}.replicas"),
            gpu_request=_gpu_request(service, where),
            image=_optional_str(container.get("image"), f"{container_at}.image"),
            argv=_argv(container, container_at),
            labels=labels,
            dynamo_namespace=_optional_str(
                service.get("dynamoNamespace"), f"{where}.dynamoNamespace"
            ),
            selection=_selection(service, where),
        )


def _template(
    fields: _ServiceFields,
    *,
    service: str,
    key: str,
    graph: tuple[str, str],
    shared_labels: Mapping[str, str],
) -> Template:
    namespace, name = graph
    dynamo_namespace = fields.dynamo_namespace or f"{namespace}-{name}"
    labels = {**shared_labels, **fields.labels}
    # Dynamo's own labels win over the user's, as the operator sets them last.
    labels[DYNAMO_GRAPH] = name
    labels[DYNAMO_COMPONENT] = service
    labels[DYNAMO_SELECTOR] = f"{name}-{service.lower()}"
    labels[DYNAMO_NAMESPACE] = dynamo_namespace
    if fields.component_type:
        labels[DYNAMO_COMPONENT_TYPE] = fields.component_type
    if fields.sub_component_type:
        labels[DYNAMO_SUB_COMPONENT_TYPE] = fields.sub_component_type
    if fields.is_worker:
        labels[DYNAMO_WORKER_HASH] = key
        labels[DYNAMO_NAMESPACE] = f"{dynamo_namespace}-{key}"
    return Template(
        service=service,
        key=key,
        replicas=fields.replicas,
        gpu_request=fields.gpu_request,
        image=fields.image,
        argv=fields.argv,
        labels=MappingProxyType(labels),
        is_worker=fields.is_worker,
        selection=fields.selection,
    )


def _service(services: Mapping[str, Any], svc: object) -> Mapping[str, Any]:
    if not isinstance(svc, str) or not svc:
        raise InvalidManifest("spec.services", f"has a service named {svc!r}; names are strings")
    return _mapping(services[svc], f"spec.services.{svc}")


def _digest(service: Mapping[str, Any], shared: Mapping[str, Any]) -> str:
    template = {k: v for k, v in service.items() if k != "replicas"}
    return _hash({"service": template, **shared})


def _hash(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _main_container(service: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    pod_spec = _mapping(service.get("extraPodSpec", {}), f"{where}.extraPodSpec")
    return _mapping(pod_spec.get("mainContainer", {}), f"{where}.extraPodSpec.mainContainer")


def _selection(service: Mapping[str, Any], where: str) -> NodeSelection:
    pod_spec = _mapping(service.get("extraPodSpec", {}), f"{where}.extraPodSpec")
    try:
        return node_selection.parse(pod_spec, f"{where}.extraPodSpec")
    except node_selection.InvalidSelection as e:
        raise InvalidManifest(e.field, e.problem) from None


def _argv(container: Mapping[str, Any], where: str) -> tuple[str, ...]:
    argv: list[str] = []
    for part in ("command", "args"):
        value = container.get(part, [])
        if not isinstance(value, list):
            raise InvalidManifest(f"{where}.{part}", f"must be a list, got {type(value).__name__}")
        argv.extend(str(item) for item in value)
    return tuple(argv)


def _gpu_request(service: Mapping[str, Any], where: str) -> int:
    resources = _mapping(service.get("resources", {}), f"{where}.resources")
    for part in ("limits", "requests"):
        block = _mapping(resources.get(part, {}), f"{where}.resources.{part}")
        if block.get("gpu") is not None:
            return _count(block["gpu"], f"{where}.resources.{part}.gpu")
    return 0


def _count(value: object, field: str) -> int:
    """A non-negative whole number, as an int or a decimal string ("4")."""
    if isinstance(value, bool):
        raise InvalidManifest(field, f"must be a non-negative whole number, got {value!r}")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise InvalidManifest(field, f"must be a non-negative whole number, got {value!r}")


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        got = "nothing" if value is None else type(value).__name__
        raise InvalidManifest(field, f"must be a mapping, got {got}")
    return value


def _name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidManifest(field, f"must be a non-empty string, got {value!r}")
    return value


def _optional_str(value: object, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidManifest(field, f"must be a string, got {type(value).__name__}")
    return value


def _labels(value: object, field: str) -> dict[str, str]:
    if value is None:
        return {}
    labels = _mapping(value, field)
    for key, item in labels.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidManifest(f"{field}.{key}", f"must map strings to strings, got {item!r}")
    return dict(labels)


def _plain(value: Any) -> Any:
    """A private deep copy in plain dicts and lists, so later edits by the caller do not leak."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
