"""Scoped API tokens, the projects a call touches, and the audit log.

Tokens: created by an admin with a role (hub/access.py) and, for an operator, its projects;
the secret is returned once and only its SHA-256 is stored; revoking takes effect on the next
call (every call looks its token up: no cache to outlive a revocation).

Audit: the control edges record every mutating call, allowed or refused, with who, when, what
and the outcome (hub/api/control.py), and the stream records agents' connects, supersedes and
refusals (hub/sync/session.py); records older than the retention are pruned hourly.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hub import access, errors
from hub.filters import AuditFilter
from hub.model import ApiToken, AuditRecord
from hub.service import adoption, deployments, validate, workloads
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import audit, projects, tokens

log = logging.getLogger(__name__)

SECRET_PREFIX = "wst_"
MAX_TOKEN_PROJECTS = 64
# Long enough for any hub error message; records are kept, not echoed back to callers.
MAX_AUDIT_MESSAGE = 1024


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# -- tokens ------------------------------------------------------------------------------------


def create_token(
    ctx: ServiceContext, *, name: str, role: str, project_names: Sequence[str], created_by: str
) -> tuple[ApiToken, str]:
    """(the token, its secret). The secret is never stored or shown again."""
    validate.dns_label(name, "token.name")
    if role not in access.ROLES:
        raise errors.InvalidArgument("token.role", f"expected one of {', '.join(access.ROLES)}")
    names = sorted(set(project_names))
    if role == access.ROLE_OPERATOR and not names:
        raise errors.InvalidArgument(
            "token.projects", "an operator token needs at least one project it may change"
        )
    if role == access.ROLE_VIEWER and not names:
        raise errors.InvalidArgument(
            "token.projects",
            "a viewer token names the projects whose workloads it reads; for the whole fleet"
            f" create a {access.ROLE_FLEET_VIEWER} token",
        )
    if role not in access.PROJECT_ROLES and names:
        raise errors.InvalidArgument(
            "token.projects",
            f"only viewer and operator tokens name projects; a {role} token takes none",
        )
    if len(names) > MAX_TOKEN_PROJECTS:
        raise errors.InvalidArgument("token.projects", f"at most {MAX_TOKEN_PROJECTS} projects")
    for project in names:
        validate.dns_label(project, "token.projects")
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    with transaction(ctx) as tx:
        for project in names:
            if projects.get(tx.conn, project) is None:
                raise errors.NotFound("project", project)
        token = ApiToken(
            name=name,
            role=role,
            projects=tuple(names),
            create_time=tx.now,
            created_by=created_by,
        )
        tokens.insert(tx.conn, token, secret_hash=hash_secret(secret))
    return token, secret


def list_tokens(
    ctx: ServiceContext, *, page_size: int, page_token: str, include_revoked: bool
) -> tuple[list[ApiToken], str]:
    limit, after = validate.page(page_size, page_token)
    with snapshot(ctx) as conn:
        found = tokens.list_page(conn, after=after, limit=limit, include_revoked=include_revoked)
    return found, validate.next_token([t.name for t in found], limit)


def revoke_token(ctx: ServiceContext, name: str) -> ApiToken:
    """Revoke at once; revoking a revoked token again changes nothing."""
    with transaction(ctx) as tx:
        if tokens.get(tx.conn, name) is None:
            raise errors.NotFound("token", name)
        tokens.revoke(tx.conn, name, now=tx.now)
        revoked = tokens.get(tx.conn, name)
        assert revoked is not None
        return revoked


def principal_for_secret(ctx: ServiceContext, secret: str) -> access.Principal | None:
    """The principal of an unrevoked scoped token, or None."""
    if not secret.startswith(SECRET_PREFIX):
        return None
    with snapshot(ctx) as conn:
        token = tokens.find_active(conn, hash_secret(secret))
    if token is None:
        return None
    return access.Principal(
        actor=f"token/{token.name}", role=token.role, projects=frozenset(token.projects)
    )


def principal_for_actor(ctx: ServiceContext, actor: str) -> access.Principal | None:
    """The principal an audit actor name stands for now ("admin", "token/<name>"), or None
    when that token was revoked or never existed (a dashboard session of it ends)."""
    if actor == access.ADMIN.actor:
        return access.ADMIN
    kind, _, name = actor.partition("/")
    if kind != "token" or not name:
        return None
    with snapshot(ctx) as conn:
        token = tokens.get(conn, name)
    if token is None or token.revoke_time is not None:
        return None
    return access.Principal(actor=actor, role=token.role, projects=frozenset(token.projects))


# -- which projects a call touches -------------------------------------------------------------


Via = Literal["project", "workload", "deployment", "discovered"]


@dataclass(frozen=True)
class ProjectRef:
    """How to find the project(s) of a call: named directly, or through a resource."""

    via: Via
    ref: str


def projects_of(ctx: ServiceContext, ref: ProjectRef) -> frozenset[str] | None:
    """The projects `ref` belongs to; None for a discovered entry bound to no workload.
    A resource that does not exist is NotFound, as the call itself would answer."""
    if ref.via == "project":
        return frozenset({ref.ref})
    if ref.via == "workload":
        return frozenset({workloads.spec(ctx, ref.ref).project})
    if ref.via == "deployment":
        return frozenset({deployments.get(ctx, ref.ref).deployment.project})
    found = adoption.get(ctx, ref.ref)
    if not found.workload_id:
        return None
    return frozenset({workloads.spec(ctx, found.workload_id).project})


# -- audit -------------------------------------------------------------------------------------


def record(ctx: ServiceContext, entry: AuditRecord) -> None:
    """Append one audit record. A store failure is logged, not raised: the audited call has
    already happened (or been refused) and its caller must learn its real outcome."""
    if len(entry.message) > MAX_AUDIT_MESSAGE:
        entry = AuditRecord(**{**entry.__dict__, "message": entry.message[:MAX_AUDIT_MESSAGE]})
    try:
        with ctx.db.write() as conn:
            audit.append(conn, entry)
    except errors.StoreError as e:
        # The store cannot write (full disk, database down): the call it records failed the
        # same way or wrote before the fault; one warning line, as for every storage fault.
        log.warning("audit record lost (%s): %s", e.message, entry)
    except Exception:  # not a storage fault: a defect, logged with its traceback
        log.exception("audit record lost: %s", entry)


def list_audit(
    ctx: ServiceContext, *, where: AuditFilter, page_size: int, page_token: str
) -> tuple[list[AuditRecord], str]:
    limit, after = validate.page(page_size, page_token)
    before_id: int | None = None
    if after:
        if not after.isdigit():
            raise errors.InvalidArgument(
                "page_token", "invalid: pass back the next_page_token of a previous response"
            )
        before_id = int(after)
    if where.since is not None and where.until is not None and where.since >= where.until:
        raise errors.InvalidArgument("since", "must be before until")
    with snapshot(ctx) as conn:
        found = audit.list_page(conn, where=where, before_id=before_id, limit=limit)
    return found, validate.next_token([str(r.id) for r in found], limit)


def prune_audit(ctx: ServiceContext, *, retention_s: float) -> int:
    """Delete audit records older than the retention; the number deleted."""
    with ctx.db.write() as conn:
        return audit.prune(conn, older_than=ctx.clock() - retention_s)
