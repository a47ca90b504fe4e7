"""Credentials on control calls: the admin token and scoped API tokens.

The admin token is WINGSMITH_ADMIN_TOKEN when set; otherwise one is generated on first start
and written beside the database (`<db>.admin-token`, mode 0600) and read from there on later
starts, so a restart keeps it. Scoped tokens (viewer, operator of projects, admin) are created
through the API and stored hashed (hub/service/access.py). Both edges pass the request's
metadata (gRPC metadata or HTTP headers, names lower-cased); a missing, unknown or revoked
"authorization: Bearer <token>" is Unauthenticated (401 / UNAUTHENTICATED); what a known
token may do is decided afterwards (hub/access.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import os
import pathlib
import secrets
from collections.abc import Mapping

from hub import access, errors
from hub.service import access as access_service
from hub.service.context import ServiceContext

ENV_ADMIN_TOKEN = "WINGSMITH_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 16

# The principal this request's check before the body proved, with the header it proved it
# for. A request's dispatch runs in a worker thread with a copy of the request task's context,
# so `check_for_dispatch` of the same header takes it instead of hashing the token and
# reading the store a second time. `check` itself never reads it.
_PROVEN: contextvars.ContextVar[tuple[str, access.Principal] | None] = contextvars.ContextVar(
    "wingsmith_proven_principal", default=None
)


def check_token(token: str) -> None:
    """ValueError for a token too short to be a secret; the hub checks before it starts."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"the admin token must be at least {MIN_TOKEN_LENGTH} characters (got {len(token)});"
            " e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )


class Authenticator:
    """Metadata -> the Principal it proves, or Unauthenticated."""

    def __init__(self, admin_token: str, ctx: ServiceContext | None = None) -> None:
        check_token(admin_token)
        self._token = admin_token.encode()
        self._ctx = ctx  # None: only the admin token is accepted (no store to look up)

    def check(self, metadata: Mapping[str, str]) -> access.Principal:
        header = metadata.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        presented = presented.strip()
        if scheme.lower() != "bearer" or not presented:
            raise errors.Unauthenticated(
                "missing credentials: send 'authorization: Bearer <token>'"
            )
        # A header that was not UTF-8 reaches here with surrogates standing for its bytes: it
        # is a wrong token like any other, compared in constant time.
        raw = presented.encode("utf-8", "surrogatepass")
        if hmac.compare_digest(raw, self._token):
            return access.ADMIN
        if self._ctx is not None and presented.isprintable() and presented.isascii():
            principal = access_service.principal_for_secret(self._ctx, presented)
            if principal is not None:
                return principal
        raise errors.Unauthenticated("unknown or revoked token")

    def is_admin(self, metadata: Mapping[str, str]) -> bool:
        """The admin token presented: decided without the store (no lookup, no thread)."""
        scheme, _, presented = metadata.get("authorization", "").partition(" ")
        raw = presented.strip().encode("utf-8", "surrogatepass")
        return scheme.lower() == "bearer" and hmac.compare_digest(raw, self._token)

    async def check_before_body(self, metadata: Mapping[str, str]) -> None:
        """The edges' check before they read a request's body (hub/api/grpc_edge.py, rest.py):
        a caller without a valid token cannot make the hub buffer and parse one. A scoped
        token is looked up in a worker thread, never on the event loop the streams share."""
        # Nothing proven until this request's check passes: a task that served an earlier
        # request (a kept-alive connection) must not lend that request's proof to this one.
        _PROVEN.set(None)
        if self.is_admin(metadata):
            principal = access.ADMIN
        else:
            principal = await asyncio.to_thread(self.check, metadata)
        _PROVEN.set((metadata.get("authorization", ""), principal))

    def check_for_dispatch(self, metadata: Mapping[str, str]) -> access.Principal:
        """`check`, unless this request's check before the body already proved the same
        header (then its principal, without a second hash and store read)."""
        proven = _PROVEN.get()
        header = metadata.get("authorization", "")
        if proven is not None and hmac.compare_digest(
            proven[0].encode("utf-8", "surrogatepass"), header.encode("utf-8", "surrogatepass")
        ):
            return proven[1]
        return self.check(metadata)


def token_path(db_path: str) -> pathlib.Path:
    return pathlib.Path(f"{db_path}.admin-token")


def load_or_create_token(db_path: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """(token, where it came from)."""
    from_env = environ.get(ENV_ADMIN_TOKEN, "").strip()
    if from_env:
        return from_env, f"${ENV_ADMIN_TOKEN}"
    path = token_path(db_path)
    if path.exists():
        return path.read_text().strip(), str(path)
    token = "wsk_" + secrets.token_urlsafe(32)
    # Create with 0600 from the start: never a moment where others could read it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token, str(path)
