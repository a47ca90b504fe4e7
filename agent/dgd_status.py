"""What a deployment's DGD and its worker pods say, read for the hub: the status (the DGD's
state, not trusting "successful" until it is true; ready and live replicas; who sets the
replica count) and the DGD itself as the object the agent applied. Pure; the observer
(agent/observe.py) calls it for every deployment it reports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent import discover
from agent.cluster import dgd_versions, port
from agent.cluster.shape import is_worker, main_worker, role_of
from agent.manifests import ANNOTATION_GENERATION
from agent.model import DeploymentSpec
from agent.reconcile import adapter_of, scaled_by_adapter

# Dynamo's own Ready reason while a graph updates; ours too, when "successful" is premature.
REASON_UPDATING = "updating"

# The largest applied-object body the agent sends (the hub refuses more): a DGD is a few KiB.
MAX_APPLIED_BYTES = 256 * 1024
DGD_API_VERSION = f"{port.DGD_GROUP}/{port.DGD_VERSION}"


@dataclass(frozen=True)
class StatusObservation:
    phase: str
    reason: str
    message: str
    ready_replicas: int
    desired_replicas: int
    applied_generation: int
    # "" | "adapter" | "autoscaler:<field manager>" (sync.proto DeploymentStatusReport).
    replicas_owner: str = ""


@dataclass(frozen=True)
class AppliedObject:
    """The deployment's DGD as the cluster holds it: what the agent applied."""

    api_version: str
    kind: str
    namespace: str
    name: str
    digest: str
    # Canonical JSON; "" when it exceeds MAX_APPLIED_BYTES (truncated).
    body: str
    truncated: bool = False


def applied_object(dgd: port.Dgd, *, version: str = port.DGD_VERSION) -> AppliedObject:
    """The DGD as an object someone could apply again: no status, no server-set metadata; in
    the version the cluster is written in (`version`: v1beta1 or v1alpha1, the internal form's
    version for anything else)."""
    metadata: dict[str, Any] = {"name": dgd.name, "namespace": dgd.namespace}
    if dgd.labels:
        metadata["labels"] = dict(dgd.labels)
    if dgd.annotations:
        metadata["annotations"] = dict(dgd.annotations)
    obj: dict[str, Any] = {
        "apiVersion": DGD_API_VERSION,
        "kind": port.DGD_KIND,
        "metadata": metadata,
        "spec": dgd.spec,
    }
    if version == dgd_versions.V1BETA1:
        obj = dgd_versions.to_served(obj, version)
    api_version = str(obj["apiVersion"])
    body = json.dumps(
        obj,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    encoded = body.encode()
    truncated = len(encoded) > MAX_APPLIED_BYTES
    return AppliedObject(
        api_version=api_version,
        kind=port.DGD_KIND,
        namespace=dgd.namespace,
        name=dgd.name,
        digest="sha256:" + hashlib.sha256(encoded).hexdigest(),
        body="" if truncated else body,
        truncated=truncated,
    )


def ready_replicas(spec: DeploymentSpec, workers: Sequence[port.Pod]) -> int:
    """Ready replicas: aggregated, one per ready worker; disaggregated, the number of complete
    prefill + decode sets among the ready workers."""
    ready = [p for p in workers if p.ready]
    if spec.serving.mode != "disaggregated":
        return len(ready)
    prefill = sum(1 for p in ready if discover.pod_report(p).role == "prefill")
    decode = sum(1 for p in ready if discover.pod_report(p).role == "decode")
    return min(prefill // spec.serving.prefill_workers, decode // spec.serving.decode_workers)


def live_replicas(spec: DeploymentSpec, dgd: port.Dgd) -> int:
    """The replicas the DGD itself asks for: what the cluster is trying to achieve."""
    services: Mapping[str, Any] = dgd.spec.get("services", {})
    main = main_worker(services)
    if main is None:
        return 0
    pods = int(services[main].get("replicas", 0) or 0)
    return pods // max(1, spec.workers_of(role_of(main, services[main])))


def replicas_owner(dgd: port.Dgd, adapters: Sequence[port.ScalingAdapter]) -> str:
    """Who sets the DGD's worker replicas: "autoscaler:<manager>" when an autoscaler drives
    a worker's scaling adapter, "adapter" when the agent sets them through adapters, else ""."""
    services: Mapping[str, Any] = dgd.spec.get("services", {})
    owner = ""
    for name in sorted(services):
        if not is_worker(services[name]) or not scaled_by_adapter(services[name]):
            continue
        adapter = adapter_of(dgd, name, adapters)
        if adapter is not None and adapter.autoscaler:
            return f"autoscaler:{adapter.autoscaler}"
        owner = "adapter"
    return owner


def rollout_state(dgd: port.Dgd) -> tuple[str, str, str]:
    """(state, reason, message) of a DGD, not trusting "successful" until it is true.

    Dynamo reported `successful` mid-rollout before it gated readiness on observed
    generations (issue #3567, fixed by PR #9499), and older operators still do. So a DGD
    counts as successful only when its status says so *and* the operator has observed its
    latest spec (`status.observedGeneration` >= `metadata.generation`, where reported), no
    managed rolling update is Pending or InProgress (`status.rollingUpdate.phase`), and every
    component has all its replicas updated and available (`status.services`, v1beta1's
    `components`). Otherwise it is `initializing` with reason `updating` and what is missing.
    """
    status: Mapping[str, Any] = dgd.status or {}
    ready_condition: Mapping[str, Any] = next(
        (
            c
            for c in status.get("conditions", ()) or ()
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        {},
    )
    state = str(status.get("state", ""))
    reason = str(ready_condition.get("reason", ""))
    message = str(ready_condition.get("message", ""))
    if state != "successful":
        return state, reason, message
    missing = _not_yet(dgd, status)
    if missing:
        return "initializing", REASON_UPDATING, "; ".join(missing)
    return state, reason, message


def _not_yet(dgd: port.Dgd, status: Mapping[str, Any]) -> list[str]:
    missing = []
    observed = status.get("observedGeneration")
    if isinstance(observed, int) and observed < dgd.generation:
        missing.append(f"the operator has observed generation {observed} of {dgd.generation}")
    rolling = status.get("rollingUpdate")
    if isinstance(rolling, Mapping) and rolling.get("phase") in ("Pending", "InProgress"):
        updated = rolling.get("updatedServices") or []
        missing.append(
            f"rolling update {rolling['phase']}"
            + (f" (updated: {', '.join(map(str, updated))})" if updated else "")
        )
    components = status.get("services")
    if isinstance(components, Mapping):
        for name, component in sorted(components.items()):
            if not isinstance(component, Mapping):
                continue
            replicas = component.get("replicas")
            if not isinstance(replicas, int):
                continue
            for field, word in (("updatedReplicas", "updated"), ("availableReplicas", "available")):
                value = component.get(field)
                if isinstance(value, int) and value < replicas:
                    missing.append(f"{name}: {value}/{replicas} {word}")
    return missing


def status(spec: DeploymentSpec, dgd: port.Dgd, workers: Sequence[port.Pod]) -> StatusObservation:
    generation = str(dgd.annotations.get(ANNOTATION_GENERATION, "0"))
    state, reason, message = rollout_state(dgd)
    if dgd.foreign_managers and not spec.adopted:
        # Someone changed our DGD where server-side apply merges without a conflict (an env
        # var added with kubectl edit): kept, never reverted, but said (docs/kubernetes.md).
        drift = (
            f"drift: spec fields of this DGD are also set by {', '.join(dgd.foreign_managers)}"
            " (kept as they are; remove them there, or adopt the change into the workload)"
        )
        message = f"{message}; {drift}" if message else drift
    return StatusObservation(
        phase=state,
        reason=reason,
        message=message[:2048],
        ready_replicas=ready_replicas(spec, workers),
        desired_replicas=live_replicas(spec, dgd),
        applied_generation=int(generation) if generation.isdigit() else 0,
    )
