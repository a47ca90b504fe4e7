"""Errors of the PodResources client (agent/kubelet/client.py), one tree:

    KubeletError                  anything the kubelet port raises
    ├── KubeletUnavailable        no socket, not a socket, or nobody answers on it
    ├── KubeletRateLimited        RESOURCE_EXHAUSTED after every bounded retry
    ├── KubeletTimeout            no answer within the call's deadline
    └── KubeletCallFailed         any other gRPC status (UNIMPLEMENTED on an old kubelet, UNKNOWN
                                  from Get, ...)

The client wraps every grpc.RpcError into one of these with `raise ... from e`, so callers
(agent/observe.py) see neither grpc nor its status codes. Each error carries its facts as
fields; tests match types and fields, not message text. Nothing here imports grpc.
"""

from __future__ import annotations


class KubeletError(Exception):
    """Base of every error the kubelet client raises."""


class KubeletUnavailable(KubeletError):
    def __init__(self, socket_path: str, reason: str) -> None:
        self.socket_path = socket_path
        self.reason = reason
        super().__init__(f"kubelet pod-resources socket {socket_path}: {reason}")


class KubeletRateLimited(KubeletError):
    def __init__(self, method: str, attempts: int) -> None:
        self.method = method
        self.attempts = attempts
        super().__init__(
            f"kubelet {method}: RESOURCE_EXHAUSTED after {attempts} attempts "
            "(another client on the node may be using the kubelet's 100 QPS budget)"
        )


class KubeletTimeout(KubeletError):
    def __init__(self, method: str, timeout_s: float) -> None:
        self.method = method
        self.timeout_s = timeout_s
        super().__init__(f"kubelet {method}: no answer within {timeout_s:g}s")


class KubeletCallFailed(KubeletError):
    def __init__(self, method: str, code: str, details: str) -> None:
        self.method = method
        # The gRPC status code's name ("UNIMPLEMENTED"), kept as text so grpc stays out of here.
        self.code = code
        self.details = details
        super().__init__(f"kubelet {method}: {code}: {details}")
