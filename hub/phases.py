"""Admission phases, derived from what the plane decided and what the cluster reported. Pure.

The store keeps the decision (admitted replicas, reason) and the cluster's reports (status,
replicas, allocations); the phase is computed from them whenever it is read, so it can never
disagree with either (docs/phases.md):

- pending:  admission has granted nothing yet (or the deployment is disabled);
- admitted: granted, and the cluster has created no pod and assigned no device for it yet;
- placed:   the cluster created pods or assigned devices;
- running:  at least one replica is ready (and not stale);
- failed:   the cluster reports the deployment failed, or the agent rejected the current
            generation.

Zero replicas is nothing to wait for, however it came about: a deployment with zero desired
replicas is admitted, and so is a workload of zero replicas (created so, it has no deployment;
scaled down to zero, it keeps its deployments, each admitted).
A workload is running if all its deployments are, failed if any failed, otherwise the least
advanced phase; a workload that asks for replicas and has no deployment yet is pending.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hub.model import (
    PHASE_ADMITTED,
    PHASE_FAILED,
    PHASE_ORDER,
    PHASE_PENDING,
    PHASE_PLACED,
    PHASE_RUNNING,
)

FAILED_STATUS_PHASES = frozenset({"failed"})


@dataclass(frozen=True)
class PhaseInputs:
    enabled: bool
    desired_replicas: int
    admitted_replicas: int
    generation: int
    status_phase: str | None
    rejected_generation: int
    pods: int
    allocated_devices: int
    ready_replicas: int


def deployment_phase(inputs: PhaseInputs) -> str:
    if not inputs.enabled:
        return PHASE_PENDING
    if inputs.admitted_replicas == 0 and inputs.desired_replicas > 0:
        return PHASE_PENDING
    if inputs.rejected_generation and inputs.rejected_generation >= inputs.generation:
        return PHASE_FAILED
    if inputs.status_phase in FAILED_STATUS_PHASES:
        return PHASE_FAILED
    if inputs.ready_replicas > 0:
        return PHASE_RUNNING
    if inputs.pods > 0 or inputs.allocated_devices > 0:
        return PHASE_PLACED
    return PHASE_ADMITTED


def workload_phase(deployment_phases: Iterable[str], *, replicas: int = 1) -> str:
    phases = list(deployment_phases)
    if not phases:
        return PHASE_ADMITTED if replicas == 0 else PHASE_PENDING
    if PHASE_FAILED in phases:
        return PHASE_FAILED
    return min(phases, key=PHASE_ORDER.index)
