"""Errors of the Kubernetes adapter: what the client raises, wrapped as the port's ClusterError.

    ClusterError (agent/cluster/port.py)      retryable says whether a later try may help
    ├── ReadOnlyViolation (port)             a mutating call in read-only mode
    ├── ApplyConflict                        server-side apply refused: fields another manager
    │                                        owns; `managers` and `fields` name them
    └── KubeConfigError                      no usable in-cluster config nor kubeconfig

`wrap()` is the one place that turns an ApiException or a urllib3/socket error into a
ClusterError; callers do `raise errors.wrap(e, operation=...) from e`. Retryable: 5xx,
429, 408, timeouts and connection failures. Not retryable: other 4xx (validation, RBAC, not
found), reported with the server's own message. Called within agent/cluster/kube/ only; must
not import anything of the agent above agent/cluster.
"""

from __future__ import annotations

import json
import re
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from agent.cluster.port import ClusterError

# What a client call may raise that is the cluster's doing (or the network's), not a bug of
# ours: pydantic's ValidationError (bad arguments the client rejects) is a ValueError.
CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    ApiException,
    urllib3.exceptions.HTTPError,
    OSError,
    ValueError,
)

_RETRYABLE_4XX = frozenset({408, 425, 429})
_MANAGER = re.compile(r'conflicts? with "([^"]+)"')


class ApplyConflict(ClusterError):
    """Server-side apply would take fields that other field managers own (HTTP 409).

    Never retried with force: the agent must not clobber what others (kubectl, Helm, another
    controller) set; an operator resolves it (drop the field there, or promote the workload).
    """

    def __init__(self, message: str, *, managers: tuple[str, ...], fields: tuple[str, ...]):
        super().__init__(message, retryable=False)
        self.managers = managers
        self.fields = fields


class KubeConfigError(ClusterError):
    """Neither the in-cluster service account nor a kubeconfig gave a usable configuration."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def wrap(error: BaseException, *, operation: str) -> ClusterError:
    """The ClusterError for `error` raised by a client call doing `operation`."""
    if isinstance(error, ClusterError):
        return error
    if isinstance(error, ApiException):
        return _from_api(error, operation=operation)
    if isinstance(error, ValueError) and not isinstance(error, urllib3.exceptions.HTTPError):
        return ClusterError(f"{operation}: invalid request: {error}", retryable=False)
    # urllib3 errors (timeouts, refused or reset connections, broken chunked streams) and
    # socket errors: the network's or the server's state, which a later try may find better.
    return ClusterError(f"{operation}: {type(error).__name__}: {error}", retryable=True)


def status_of(error: ApiException) -> dict[str, Any]:
    """The metav1.Status the server sent with the error ({} if the body is not one)."""
    body = error.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body:
        return {}
    try:
        status = json.loads(body)
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


def _from_api(error: ApiException, *, operation: str) -> ClusterError:
    code = int(error.status or 0)
    status = status_of(error)
    message = str(status.get("message") or error.reason or "no message")
    if code == 409 and _is_apply_conflict(status):
        managers, fields = _conflicts(status)
        return ApplyConflict(
            f"{operation}: conflict with field manager(s) {', '.join(managers) or '?'}: {message}",
            managers=managers,
            fields=fields,
        )
    retryable = code == 0 or code >= 500 or code in _RETRYABLE_4XX or code == 409
    return ClusterError(f"{operation}: HTTP {code}: {message}", retryable=retryable)


def _is_apply_conflict(status: dict[str, Any]) -> bool:
    causes = (status.get("details") or {}).get("causes") or []
    if any(c.get("reason") == "FieldManagerConflict" for c in causes if isinstance(c, dict)):
        return True
    return str(status.get("message", "")).startswith("Apply failed")


def _conflicts(status: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(managers, fields) named by the causes, else by the message."""
    managers: list[str] = []
    fields: list[str] = []
    causes = (status.get("details") or {}).get("causes") or []
    for cause in causes:
        if not isinstance(cause, dict):
            continue
        managers.extend(_MANAGER.findall(str(cause.get("message", ""))))
        if cause.get("field"):
            fields.append(str(cause["field"]))
    if not managers:
        managers.extend(_MANAGER.findall(str(status.get("message", ""))))
    return tuple(dict.fromkeys(managers)), tuple(dict.fromkeys(fields))
