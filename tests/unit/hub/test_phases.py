"""Derived phases (hub/phases.py)."""

from __future__ import annotations

import dataclasses

import pytest

from hub.phases import PhaseInputs, deployment_phase, workload_phase

BASE = PhaseInputs(
    enabled=True,
    desired_replicas=2,
    admitted_replicas=2,
    generation=1,
    status_phase=None,
    rejected_generation=0,
    pods=0,
    allocated_devices=0,
    ready_replicas=0,
)


@pytest.mark.parametrize(
    ("case", "changes", "phase"),
    [
        ("nothing granted", {"admitted_replicas": 0}, "pending"),
        ("disabled", {"enabled": False}, "pending"),
        ("granted, nothing created", {}, "admitted"),
        ("zero desired is admitted", {"desired_replicas": 0, "admitted_replicas": 0}, "admitted"),
        ("pods created", {"pods": 1}, "placed"),
        ("devices assigned", {"allocated_devices": 4}, "placed"),
        ("one ready", {"pods": 2, "ready_replicas": 1}, "running"),
        (
            "cluster says failed",
            {"status_phase": "failed", "pods": 2, "ready_replicas": 2},
            "failed",
        ),
        ("current generation rejected", {"rejected_generation": 1}, "failed"),
        (
            "older generation rejected",
            {"generation": 2, "rejected_generation": 1, "pods": 1},
            "placed",
        ),
        (
            "pending outranks a failed status",
            {"admitted_replicas": 0, "status_phase": "failed"},
            "pending",
        ),
    ],
)
def test_deployment_phase(case: str, changes: dict[str, object], phase: str) -> None:
    assert deployment_phase(dataclasses.replace(BASE, **changes)) == phase, case  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        ([], "pending"),
        (["running", "running"], "running"),
        (["running", "pending"], "pending"),
        (["running", "placed", "admitted"], "admitted"),
        (["running", "failed", "pending"], "failed"),
    ],
)
def test_workload_phase(phases: list[str], expected: str) -> None:
    assert workload_phase(phases) == expected
