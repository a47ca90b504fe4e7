"""The status a simulated DGD reports, shaped like Dynamo's (shared/reference/dynamo-dgd.md). Pure.

agent/cluster/simulated/dynamo.py counts each service's pods into `ServiceCounts` and calls
`graph_status`; the result is what `list_dgds()` shows as `Dgd.status`.

state, in order of precedence:
- initializing: a pod failed and its service has not recovered yet (reason PodFailed): like
                Dynamo, a crashed pod is replaced, not a failed graph; "failed" is
                reserved for graphs Dynamo cannot reconcile, which the simulation never has
- pending:      a pod waits for devices that retiring its own old pods cannot give
                (reason InsufficientDevices; the message carries the scheduler's words)
- initializing: pods are starting or a rollout is under way (reason
                some_resources_are_not_ready, or updating during a rollout)
- successful:   every service has `replicas` ready pods of its current template
                (reason all_resources_are_ready); only then is the Ready condition True.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REASON_READY = "all_resources_are_ready"
REASON_NOT_READY = "some_resources_are_not_ready"
REASON_UPDATING = "updating"
REASON_INSUFFICIENT = "InsufficientDevices"
REASON_FAILED = "PodFailed"


@dataclass(frozen=True)
class ServiceCounts:
    name: str
    component_name: str
    is_worker: bool
    desired: int
    # Live pods of both generations.
    replicas: int
    ready: int
    # Live pods of the current template.
    updated: int
    updated_scheduled: int
    updated_ready: int
    unschedulable: int
    unschedulable_reason: str = ""
    has_old: bool = False
    # Waiting pods that retiring this service's old pods could not place.
    blocked: bool = False
    failure: str = ""

    @property
    def complete(self) -> bool:
        return not self.has_old and self.updated == self.desired == self.updated_ready


def graph_status(
    *,
    generation: int,
    services: Sequence[ServiceCounts],
    rollout_started: bool,
    previous: Mapping[str, Any],
    now_unix: float,
) -> dict[str, Any]:
    state, reason, message = _state(services)
    status: dict[str, Any] = {
        "state": state,
        "conditions": [_ready_condition(state, reason, message, generation, previous, now_unix)],
        "services": {s.name: _service_status(s) for s in services},
        "observedGeneration": generation,
    }
    if rollout_started:
        status["rollingUpdate"] = _rolling_update([s for s in services if s.is_worker])
    return status


def _state(services: Sequence[ServiceCounts]) -> tuple[str, str, str]:
    for s in services:
        if s.failure:
            return "initializing", REASON_FAILED, f"{s.name}: {s.failure}"
    for s in services:
        if s.unschedulable and (s.blocked or not s.has_old):
            return (
                "pending",
                REASON_INSUFFICIENT,
                f"{s.name}: {s.unschedulable} pod(s) {s.unschedulable_reason}",
            )
    unfinished = [s for s in services if not s.complete]
    if unfinished:
        reason = REASON_UPDATING if any(s.has_old for s in services) else REASON_NOT_READY
        detail = ", ".join(f"{s.name} {s.updated_ready}/{s.desired} ready" for s in unfinished)
        return "initializing", reason, detail
    return "successful", REASON_READY, "all resources are ready"


def _ready_condition(
    state: str,
    reason: str,
    message: str,
    generation: int,
    previous: Mapping[str, Any],
    now_unix: float,
) -> dict[str, Any]:
    value = "True" if state == "successful" else "False"
    since = _rfc3339(now_unix)
    for old in previous.get("conditions", []):
        # As metav1.Condition: the transition time moves only when the status flips.
        if old.get("type") == "Ready" and old.get("status") == value:
            since = old.get("lastTransitionTime", since)
    return {
        "type": "Ready",
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def _service_status(s: ServiceCounts) -> dict[str, Any]:
    return {
        "componentKind": "Deployment",
        "componentNames": [s.component_name],
        "replicas": s.replicas,
        "updatedReplicas": s.updated,
        "readyReplicas": s.ready,
        # No minReadySeconds in the simulation: a ready pod is available.
        "availableReplicas": s.ready,
    }


def _rolling_update(workers: Sequence[ServiceCounts]) -> dict[str, Any]:
    if all(s.complete for s in workers):
        phase = "Completed"
    elif not any(s.updated_scheduled for s in workers):
        phase = "Pending"
    else:
        phase = "InProgress"
    return {"phase": phase, "updatedServices": [s.name for s in workers if s.complete]}


def _rfc3339(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))
