"""errors.wrap: which client failures are worth retrying, and what they say."""

from __future__ import annotations

import json

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from agent.cluster.kube import errors
from agent.cluster.kube.errors import ApplyConflict
from agent.cluster.port import ClusterError


def api_error(code: int, message: str = "boom", **status: object) -> ApiException:
    body = json.dumps({"kind": "Status", "code": code, "message": message, **status})
    return ApiException(status=code, reason="Reason", body=body)


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (429, True),
        (408, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (410, False),
    ],
)
def test_server_side_trouble_is_retryable_and_rejections_are_not(
    code: int, retryable: bool
) -> None:
    error = errors.wrap(api_error(code, "the server's words"), operation="apply x/y")
    assert type(error) is ClusterError
    assert error.retryable is retryable
    assert str(error) == f"apply x/y: HTTP {code}: the server's words"


def test_a_body_that_is_not_a_status_falls_back_to_the_reason() -> None:
    error = errors.wrap(
        ApiException(status=502, reason="Bad Gateway", body="<html>"), operation="list pods"
    )
    assert str(error) == "list pods: HTTP 502: Bad Gateway"


def test_an_apply_conflict_names_managers_and_fields() -> None:
    error = errors.wrap(
        api_error(
            409,
            'Apply failed with 2 conflicts: conflicts with "helm" using nvidia.com/v1alpha1',
            details={
                "causes": [
                    {
                        "reason": "FieldManagerConflict",
                        "message": 'conflict with "helm" using nvidia.com/v1alpha1',
                        "field": ".spec.services.Frontend.replicas",
                    },
                    {
                        "reason": "FieldManagerConflict",
                        "message": 'conflict with "kubectl-edit"',
                        "field": ".spec.envs",
                    },
                ]
            },
        ),
        operation="apply default/llama",
    )
    assert isinstance(error, ApplyConflict)
    assert error.managers == ("helm", "kubectl-edit")
    assert error.fields == (".spec.services.Frontend.replicas", ".spec.envs")
    assert error.retryable is False


def test_a_conflict_message_without_causes_still_names_the_manager() -> None:
    error = errors.wrap(
        api_error(409, 'Apply failed with 1 conflict: conflict with "argocd": .spec.x'),
        operation="apply",
    )
    assert isinstance(error, ApplyConflict) and error.managers == ("argocd",)


def test_an_optimistic_concurrency_conflict_is_retryable() -> None:
    error = errors.wrap(
        api_error(409, "the object has been modified; please apply your changes"),
        operation="update",
    )
    assert type(error) is ClusterError and error.retryable is True


@pytest.mark.parametrize(
    "cause",
    [
        urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),
        urllib3.exceptions.ProtocolError("Connection aborted"),
        urllib3.exceptions.MaxRetryError(None, "/", ConnectionRefusedError()),
        ConnectionResetError(),
    ],
)
def test_network_failures_are_retryable(cause: BaseException) -> None:
    assert errors.wrap(cause, operation="watch pods").retryable is True


def test_arguments_the_client_rejects_are_not_retryable() -> None:
    assert errors.wrap(ValueError("bad name"), operation="apply").retryable is False
