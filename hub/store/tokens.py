"""Scoped API tokens (table api_tokens). Only the SHA-256 of a secret is stored: secrets are
32 random bytes, so a fast hash suffices and its unique index finds the token at once.

A `fleet_viewer` is stored as a `viewer` naming no project: the table's CHECK on the role
(migration 0011) predates the role, and a viewer of no project was, and is, exactly the token
that reads the whole fleet; a viewer of projects reads only theirs (hub/access.py).
"""

from __future__ import annotations

from hub import errors
from hub.model import ApiToken
from hub.store import codec
from hub.store.port import IntegrityError, Row, Transaction

# hub/access.py's role words (the store sits below it).
_VIEWER = "viewer"
_FLEET_VIEWER = "fleet_viewer"


def insert(conn: Transaction, token: ApiToken, *, secret_hash: str) -> None:
    try:
        conn.execute(
            "INSERT INTO api_tokens (name, role, projects, secret_hash, create_time, created_by)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                token.name,
                _VIEWER if token.role == _FLEET_VIEWER else token.role,
                codec.dumps(list(token.projects)),
                secret_hash,
                token.create_time,
                token.created_by,
            ),
        )
    except IntegrityError as e:
        raise errors.AlreadyExists("token", token.name) from e


def get(conn: Transaction, name: str) -> ApiToken | None:
    row = conn.execute("SELECT * FROM api_tokens WHERE name = ?", (name,)).fetchone()
    return _token(row) if row else None


def find_active(conn: Transaction, secret_hash: str) -> ApiToken | None:
    """The unrevoked token whose secret hashes to `secret_hash`."""
    row = conn.execute(
        "SELECT * FROM api_tokens WHERE secret_hash = ? AND revoke_time IS NULL", (secret_hash,)
    ).fetchone()
    return _token(row) if row else None


def list_page(
    conn: Transaction, *, after: str, limit: int, include_revoked: bool
) -> list[ApiToken]:
    revoked = "" if include_revoked else " AND revoke_time IS NULL"
    rows = conn.execute(
        f"SELECT * FROM api_tokens WHERE name > ?{revoked} ORDER BY name LIMIT ?", (after, limit)
    ).fetchall()
    return [_token(row) for row in rows]


def revoke(conn: Transaction, name: str, *, now: float) -> None:
    conn.execute(
        "UPDATE api_tokens SET revoke_time = ? WHERE name = ? AND revoke_time IS NULL",
        (now, name),
    )


def _token(row: Row) -> ApiToken:
    projects = tuple(codec.loads(row["projects"]))
    role = row["role"]
    return ApiToken(
        name=row["name"],
        role=_FLEET_VIEWER if role == _VIEWER and not projects else role,
        projects=projects,
        create_time=row["create_time"],
        created_by=row["created_by"],
        revoke_time=row["revoke_time"],
    )
