"""The admin token: where it comes from, and checking it on every control call.

The token is WINGSMITH_ADMIN_TOKEN when set; otherwise one is generated on first start and
written beside the database (`<db>.admin-token`, mode 0600) and read from there on later
starts, so a restart keeps it. Both edges pass the request's metadata (gRPC metadata or HTTP
headers, names lower-cased); a missing or wrong "authorization: Bearer <token>" is
Unauthenticated (401 / UNAUTHENTICATED).
"""

from __future__ import annotations

import hmac
import os
import pathlib
import secrets
from collections.abc import Mapping

from hub import errors

ENV_ADMIN_TOKEN = "WINGSMITH_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 16


def check_token(token: str) -> None:
    """ValueError for a token too short to be a secret; the hub checks before it starts."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"the admin token must be at least {MIN_TOKEN_LENGTH} characters (got {len(token)});"
            " e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )


class AdminAuth:
    def __init__(self, token: str) -> None:
        check_token(token)
        self._token = token.encode()

    def check(self, metadata: Mapping[str, str]) -> None:
        header = metadata.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented:
            raise errors.Unauthenticated(
                "missing credentials: send 'authorization: Bearer <admin token>'"
            )
        # A header that was not UTF-8 reaches here with surrogates standing for its bytes: it
        # is a wrong token like any other, compared in constant time.
        if not hmac.compare_digest(presented.strip().encode("utf-8", "surrogatepass"), self._token):
            raise errors.Unauthenticated("wrong admin token")


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
