"""The hub's error tree, and the one table that maps it to gRPC codes and HTTP statuses.

    WingsmithError
    +-- InvalidArgument(field, problem)       INVALID_ARGUMENT     400
    +-- NotFound(kind, ref)                   NOT_FOUND            404
    +-- AlreadyExists(kind, ref)              ALREADY_EXISTS       409
    +-- FailedPrecondition(problem, details)  FAILED_PRECONDITION  409
    +-- Unauthenticated(problem)              UNAUTHENTICATED      401
    +-- PermissionDenied(problem)             PERMISSION_DENIED    403
    +-- ResourceExhausted(problem)            RESOURCE_EXHAUSTED   429
    +-- Conflict(problem)                     ABORTED              409
    +-- OutOfRange(problem)                   OUT_OF_RANGE         410
    +-- Unavailable(problem)                  UNAVAILABLE          503
    +-- StoreError(problem)                   UNAVAILABLE          503
        +-- StoreCannotWrite(problem)         UNAVAILABLE          503
        +-- StoreCorrupt(problem)             UNAVAILABLE          503
        +-- StoreBusy(problem)                UNAVAILABLE          503

Service code raises these; the gRPC and REST edges translate them with `grpc_code` and
`http_status` and nothing else. FAILED_PRECONDITION is 409 rather than Google's 400 because
our refusals (promotion on drift, deleting a project in use) are conflicts with stored state
that the caller resolves by changing that state, not by fixing the request.
Tests match these types, never message text.

Every message is `capped`: at most MAX_MESSAGE_CHARS characters, and text any transport can
carry (a lone surrogate from a caller's input is escaped), so an error never repeats a huge
or unprintable input back to its sender.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

MAX_MESSAGE_CHARS = 1024


def capped(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` cut to `limit` characters (saying how much was left out), lone surrogates
    escaped: safe to send as a gRPC status message or in a JSON body."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class WingsmithError(Exception):
    """Base of every error the hub reports to a caller."""

    grpc_code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    http_status: int = 500

    def __init__(self, message: str) -> None:
        message = capped(message)
        super().__init__(message)
        self.message = message


class InvalidArgument(WingsmithError):
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 400

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


class NotFound(WingsmithError):
    grpc_code = grpc.StatusCode.NOT_FOUND
    http_status = 404

    def __init__(self, kind: str, ref: str) -> None:
        super().__init__(f"{kind} {ref!r} not found")
        self.kind = kind
        self.ref = ref


class AlreadyExists(WingsmithError):
    grpc_code = grpc.StatusCode.ALREADY_EXISTS
    http_status = 409

    def __init__(self, kind: str, ref: str) -> None:
        super().__init__(f"{kind} {ref!r} already exists")
        self.kind = kind
        self.ref = ref


class FailedPrecondition(WingsmithError):
    grpc_code = grpc.StatusCode.FAILED_PRECONDITION
    http_status = 409

    def __init__(self, problem: str, details: Sequence[str] = ()) -> None:
        text = problem if not details else problem + ": " + "; ".join(details)
        super().__init__(text)
        self.problem = problem
        self.details = tuple(details)


class Unauthenticated(WingsmithError):
    grpc_code = grpc.StatusCode.UNAUTHENTICATED
    http_status = 401


class PermissionDenied(WingsmithError):
    grpc_code = grpc.StatusCode.PERMISSION_DENIED
    http_status = 403


class ResourceExhausted(WingsmithError):
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 429


class OutOfRange(WingsmithError):
    """A watch resuming from a revision the hub no longer keeps (or never handed out): 410
    Gone, as Kubernetes answers an expired resourceVersion."""

    grpc_code = grpc.StatusCode.OUT_OF_RANGE
    http_status = 410


class Unavailable(WingsmithError):
    """The hub is going away (a watch it ends on shutdown): try again, on another hub."""

    grpc_code = grpc.StatusCode.UNAVAILABLE
    http_status = 503


class Conflict(WingsmithError):
    """A concurrent writer changed what this request read; retrying may succeed."""

    grpc_code = grpc.StatusCode.ABORTED
    http_status = 409


class StoreError(WingsmithError):
    """The database could not be read or written (locked past the timeout, disk full)."""

    grpc_code = grpc.StatusCode.UNAVAILABLE
    http_status = 503


class StoreCannotWrite(StoreError):
    """The store cannot write (disk full, an I/O error, a read-only file): reads still work.
    A full disk clears by itself once there is space; a read-only or unwritable file and an
    I/O error need the operator (the message says what to do)."""


class StoreCorrupt(StoreError):
    """The database file is damaged or is not a database: restore it from a backup."""


class StoreBusy(StoreError):
    """A write waited for a lock and lost: PostgreSQL found a deadlock (40P01) or the wait
    timed out (55P03). Nothing was written: retry."""


# gRPC status code -> HTTP status, for errors that do not come from our tree (for example a
# grpc.aio abort raised by an interceptor). Same table as google.rpc.Code's HTTP mapping,
# except FAILED_PRECONDITION (see the module docstring).
HTTP_STATUS_BY_GRPC_CODE: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}


def grpc_code(error: BaseException) -> grpc.StatusCode:
    if isinstance(error, WingsmithError):
        return error.grpc_code
    return grpc.StatusCode.INTERNAL


def http_status(error: BaseException) -> int:
    if isinstance(error, WingsmithError):
        return error.http_status
    return 500
