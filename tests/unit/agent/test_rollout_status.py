"""A DGD's state as the agent reports it: Dynamo's "successful" is believed only when the
operator observed the latest spec, no rolling update is under way and every component is
updated and available (agent/observe.py rollout_state). Statuses in both versions' shapes."""

from __future__ import annotations

from typing import Any

import pytest

from agent.cluster import dgd_versions, port
from agent.cluster.kube import mapping
from agent.dgd_status import REASON_UPDATING, rollout_state

READY = {
    "type": "Ready",
    "status": "True",
    "reason": "all_resources_are_ready",
    "message": "all resources are ready",
}


def component(replicas: int = 2, updated: int = 2, available: int = 2) -> dict[str, Any]:
    return {
        "componentKind": "Deployment",
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": available,
        "availableReplicas": available,
    }


def beta_dgd(status: dict[str, Any], *, generation: int = 3) -> port.Dgd:
    """A v1beta1 DGD as the API server sends it, read through the adapter's mapping."""
    obj = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "chat", "namespace": "serving", "generation": generation},
        "spec": {"components": []},
        "status": status,
    }
    return mapping.dgd(obj)


def test_a_converged_dgd_is_successful() -> None:
    dgd = beta_dgd(
        {
            "state": "successful",
            "observedGeneration": 3,
            "conditions": [READY],
            "components": {"VllmDecodeWorker": component()},
            "rollingUpdate": {"phase": "Completed", "updatedComponents": ["VllmDecodeWorker"]},
        }
    )
    assert rollout_state(dgd) == (
        "successful",
        "all_resources_are_ready",
        "all resources are ready",
    )


@pytest.mark.parametrize(
    ("status", "missing"),
    [
        # An operator that has not seen the new spec yet still says "successful" (#3567).
        ({"observedGeneration": 2}, "the operator has observed generation 2 of 3"),
        (
            {"observedGeneration": 3, "rollingUpdate": {"phase": "InProgress"}},
            "rolling update InProgress",
        ),
        (
            {
                "observedGeneration": 3,
                "rollingUpdate": {"phase": "Pending", "updatedComponents": ["Frontend"]},
            },
            "rolling update Pending (updated: Frontend)",
        ),
        (
            {"observedGeneration": 3, "components": {"VllmDecodeWorker": component(updated=1)}},
            "VllmDecodeWorker: 1/2 updated",
        ),
        (
            {"observedGeneration": 3, "components": {"VllmDecodeWorker": component(available=0)}},
            "VllmDecodeWorker: 0/2 available",
        ),
    ],
)
def test_a_premature_successful_is_reported_as_updating_with_what_is_missing(
    status: dict[str, Any], missing: str
) -> None:
    dgd = beta_dgd({"state": "successful", "conditions": [READY], **status})
    state, reason, message = rollout_state(dgd)
    assert (state, reason) == ("initializing", REASON_UPDATING)
    assert missing in message


def test_a_status_in_the_v1alpha1_shape_is_read_the_same_way() -> None:
    status = {
        "state": "successful",
        "observedGeneration": 3,
        "conditions": [READY],
        "services": {"VllmDecodeWorker": component(updated=1)},
        "rollingUpdate": {"phase": "InProgress", "updatedServices": []},
    }
    obj = dgd_versions.to_internal(
        {"apiVersion": "nvidia.com/v1alpha1", "metadata": {"generation": 3}, "status": status}
    )
    dgd = port.Dgd("serving", "chat", {}, {}, obj["status"], generation=3)
    state, _, message = rollout_state(dgd)
    assert state == "initializing"
    assert "rolling update InProgress" in message and "1/2 updated" in message


def test_states_other_than_successful_pass_through() -> None:
    dgd = beta_dgd(
        {
            "state": "pending",
            "conditions": [{"type": "Ready", "reason": "insufficient_capacity", "message": "m"}],
        }
    )
    assert rollout_state(dgd) == ("pending", "insufficient_capacity", "m")
