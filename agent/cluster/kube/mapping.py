"""Kubernetes objects (JSON dicts as the API server sends them) -> the port's values, and a
DGD manifest -> the body the adapter applies (`apply_body`). Pure.

Called by the watch caches (agent/cluster/kube/watch.py) for every listed or watched object;
the results are what `KubernetesCluster.list_*` return. Works on raw dicts, not the client's
models: lists and watch streams are read with `_preload_content=False`, which skips the
client's model deserialization (slow, and lossy for custom resources). Every field is read
defensively: one odd object must not break a watch. Must not import the kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agent.cluster import dgd_versions
from agent.cluster.port import (
    DGD_KIND,
    GPU_RESOURCE,
    MANAGED_BY,
    ClusterError,
    Dgd,
    Node,
    Pod,
    ScalingAdapter,
)

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

MAIN_CONTAINER = "main"


def key(obj: Mapping[str, Any]) -> Key:
    meta = _map(obj.get("metadata"))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def dgd(obj: Mapping[str, Any]) -> Dgd:
    """In the internal form (v1alpha1's shape) whichever version the object was read in."""
    obj = dgd_versions.to_internal(obj)
    meta = _map(obj.get("metadata"))
    namespace, name = key(obj)
    return Dgd(
        namespace=namespace,
        name=name,
        labels=_strings(meta.get("labels")),
        spec=dict(_map(obj.get("spec"))),
        status=dict(_map(obj.get("status"))),
        generation=_int(meta.get("generation"), default=1),
        annotations=_strings(meta.get("annotations")),
        resource_version=str(meta.get("resourceVersion") or ""),
        foreign_managers=foreign_managers(meta.get("managedFields")),
    )


def foreign_managers(entries: Any) -> tuple[str, ...]:
    """The managers, other than this agent, owning a spec field other than a `replicas` (the
    operator's and autoscalers' field), outside subresources (status, scale)."""
    found = set()
    for entry in _list(entries):
        if not isinstance(entry, Mapping) or entry.get("subresource"):
            continue
        manager = str(entry.get("manager") or "")
        if manager == MANAGED_BY:
            continue
        spec = _map(_map(entry.get("fieldsV1")).get("f:spec"))
        if _owns_beyond_replicas(spec):
            found.add(manager)
    return tuple(sorted(found))


def _owns_beyond_replicas(tree: Mapping[str, Any]) -> bool:
    """Whether a FieldsV1 tree has a leaf other than `f:replicas` (and element markers)."""
    for key, child in tree.items():
        if isinstance(child, Mapping) and child:
            if _owns_beyond_replicas(child):
                return True
        elif key not in ("f:replicas", "."):
            return True
    return False


def scaling_adapter(obj: Mapping[str, Any], *, own_manager: str) -> ScalingAdapter:
    """A DGDSA (either version). Its autoscaler is the manager that owns spec.replicas
    through the /scale subresource (managedFields), unless that is `own_manager` (us)."""
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    ref = _map(spec.get("dgdRef"))
    namespace, name = key(obj)
    autoscaler = ""
    for entry in _list(meta.get("managedFields")):
        if not isinstance(entry, Mapping) or entry.get("subresource") != "scale":
            continue
        fields = _map(_map(_map(entry.get("fieldsV1")).get("f:spec")))
        manager = str(entry.get("manager") or "")
        if "f:replicas" in fields and manager != own_manager:
            autoscaler = manager
    return ScalingAdapter(
        namespace=namespace,
        name=name,
        dgd_name=str(ref.get("name") or ""),
        component=str(ref.get("componentName") or ref.get("serviceName") or ""),
        replicas=_int(spec.get("replicas"), default=1),
        autoscaler=autoscaler,
    )


def pod(obj: Mapping[str, Any]) -> Pod:
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    namespace, name = key(obj)
    main = main_container(_list(spec.get("containers")))
    ready = _condition(status, "Ready").get("status") == "True"
    return Pod(
        name=name,
        namespace=namespace,
        labels=_strings(meta.get("labels")),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        ready=ready,
        gpu_request=gpu_request(main),
        image=str(main.get("image") or ""),
        argv=tuple(str(a) for a in (*_list(main.get("command")), *_list(main.get("args")))),
        reason="" if ready else pod_reason(status, main_name=str(main.get("name") or "")),
        created_unix=_unix(meta.get("creationTimestamp")),
    )


def node(obj: Mapping[str, Any]) -> Node:
    meta = _map(obj.get("metadata"))
    allocatable = _map(_map(obj.get("status")).get("allocatable"))
    return Node(
        name=str(meta.get("name") or ""),
        labels=_strings(meta.get("labels")),
        allocatable_gpus=quantity(allocatable.get(GPU_RESOURCE)),
    )


def main_container(containers: Sequence[Any]) -> Mapping[str, Any]:
    """The container Dynamo runs the engine in: the one named `main`, else the first."""
    maps = [c for c in containers if isinstance(c, Mapping)]
    return next((c for c in maps if c.get("name") == MAIN_CONTAINER), maps[0] if maps else {})


def gpu_request(container: Mapping[str, Any]) -> int:
    # Extended resources need limits == requests when both are set; limits alone imply
    # requests, so read limits first.
    resources = _map(container.get("resources"))
    for part in ("limits", "requests"):
        value = _map(resources.get(part)).get(GPU_RESOURCE)
        if value is not None:
            return quantity(value)
    return 0


def pod_reason(status: Mapping[str, Any], *, main_name: str) -> str:
    """Why a pod is not ready, most specific first: the pod's own reason (Evicted), the main
    container's waiting/terminated state (CrashLoopBackOff, OOMKilled), the scheduler's verdict
    ("Unschedulable: 0/3 nodes ..."), then the Ready condition's reason (ContainersNotReady)."""
    if status.get("reason"):
        return _reason_text(status)
    container = _container_state(status, main_name=main_name)
    if container:
        return container
    scheduled = _condition(status, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("reason"):
        return _reason_text(scheduled)
    return str(_condition(status, "Ready").get("reason") or "")


def quantity(value: Any) -> int:
    """An integer resource quantity ("8", 8); 0 for anything else (GPUs are never fractional)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def _container_state(status: Mapping[str, Any], *, main_name: str) -> str:
    statuses = [s for s in _list(status.get("containerStatuses")) if isinstance(s, Mapping)]
    main = next((s for s in statuses if s.get("name") == main_name), None)
    for entry in [main] if main is not None else statuses:
        state = _map(entry.get("state"))
        for phase in ("waiting", "terminated"):
            detail = _map(state.get(phase))
            if detail.get("reason"):
                return _reason_text(detail)
    return ""


def _reason_text(source: Mapping[str, Any]) -> str:
    reason, message = str(source.get("reason") or ""), str(source.get("message") or "")
    return f"{reason}: {message}" if message else reason


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in _list(status.get("conditions")):
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return {}


def _unix(timestamp: Any) -> float:
    if not isinstance(timestamp, str) or not timestamp:
        return 0.0
    try:
        # Python 3.11 parses RFC 3339 with a trailing Z.
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return 0.0


def _int(value: Any, *, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value).items()}


def apply_body(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as plain JSON values, checked to be a DGD with a namespace and a name."""
    body = _plain(manifest)
    if not isinstance(body, dict):
        raise ClusterError("a DGD manifest must be a mapping", retryable=False)
    internal = dgd_versions.api_version(dgd_versions.V1ALPHA1)
    body.setdefault("apiVersion", internal)
    body.setdefault("kind", DGD_KIND)
    if (body["apiVersion"], body["kind"]) != (internal, DGD_KIND):
        raise ClusterError(
            f"not a {DGD_KIND} in the agent's internal form ({internal}):"
            f" {body['apiVersion']} {body['kind']}",
            retryable=False,
        )
    meta = body.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
        raise ClusterError(
            "a DGD manifest needs metadata.name and metadata.namespace", retryable=False
        )
    # The server's fields: a copied resourceVersion would turn the apply into a precondition
    # that fails once anything changed, and managedFields are not ours to send.
    for server_field in ("resourceVersion", "managedFields", "uid", "creationTimestamp"):
        meta.pop(server_field, None)
    body.pop("status", None)
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
