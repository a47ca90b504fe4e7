"""Scoped API tokens, the projects a call touches, and the audit log.

Tokens: created by an admin with a role (hub/access.py) and, for an operator, its projects;
the secret is returned once and only its SHA-256 is stored; revoking takes effect on the next
call (every call looks its token up: no cache to outlive a revocation).

Audit: the control edges record every mutating call, allowed or refused, with who, when, what
and the outcome (hub/api/control.py), and the stream records agents' connects, supersedes and
refusals (hub/sync/session.py); records older than the retention are pruned hourly.
Refusals are written within a budget (`RefusalBudget`: so many per caller, call and minute,
the rest as one summary record), so a flood of garbage cannot fill the store.

Dashboard sessions: held server-side by the hash of their nonce, so a logout or a token's
revocation ends them for every copy of the cookie (hub/ui/dashboard.py).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from hub import access, errors
from hub.filters import AuditFilter
from hub.model import ApiToken, AuditRecord
from hub.service import adoption, deployments, validate, workloads
from hub.service.context import ServiceContext, snapshot, transaction
from hub.store import audit, projects, sessions, tokens

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
        # Its dashboard sessions end with it, in the same transaction.
        sessions.delete_of_actor(tx.conn, f"token/{name}")
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


# -- dashboard sessions ------------------------------------------------------------------------


def session_id(nonce: str) -> str:
    """What the store keys a session by: the nonce's hash, never the nonce."""
    return hashlib.sha256(nonce.encode()).hexdigest()


def open_session(ctx: ServiceContext, *, nonce: str, actor: str, expire_time: float) -> None:
    """Record a dashboard session at login (and forget the expired ones)."""
    # Only the fleet lock: dashboard sessions and audit records decide no other write.
    with ctx.db.write(()) as conn:
        now = ctx.clock()
        sessions.delete_expired(conn, now=now)
        sessions.insert(
            conn, session_id=session_id(nonce), actor=actor, now=now, expire_time=expire_time
        )


def session_principal(ctx: ServiceContext, nonce: str) -> access.Principal | None:
    """The principal of a live session: None once it was ended (logout, the token revoked)
    or when the store never opened it."""
    with snapshot(ctx) as conn:
        actor = sessions.actor_of(conn, session_id(nonce), now=ctx.clock())
    if actor is None:
        return None
    return principal_for_actor(ctx, actor)


def end_session(ctx: ServiceContext, nonce: str) -> None:
    with ctx.db.write(()) as conn:
        sessions.delete(conn, session_id(nonce))


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
        with ctx.db.write(()) as conn:  # appends only: the fleet lock alone
            audit.append(conn, entry)
    except errors.StoreError as e:
        # The store cannot write (full disk, database down): the call it records failed the
        # same way or wrote before the fault; one warning line, as for every storage fault.
        log.warning("audit record lost (%s): %s", e.message, entry)
    except Exception:  # not a storage fault: a defect, logged with its traceback
        log.exception("audit record lost: %s", entry)


# -- refusals, bounded --------------------------------------------------------------------------

# Per (actor, edge, action, outcome): this many refusal records a minute are written one by
# one; beyond it they are counted, and the count is written as one summary record when the
# minute ends. Across all keys, at most REFUSALS_PER_MINUTE records a minute (summaries
# included, one per key and minute at most). Only authenticated callers reach here (a call
# without a valid credential names no one and is never audited), so keys are bounded by the
# tokens an admin created times the RPCs.
REFUSAL_WINDOW_S = 60.0
REFUSALS_PER_KEY = 10
REFUSALS_PER_MINUTE = 600

RefusalKey = tuple[str, str, str, str, str]  # actor, role, edge, action, outcome


@dataclass
class _Window:
    start: float
    written: int = 0
    unwritten: int = 0
    last: AuditRecord | None = field(default=None, repr=False)


class RefusalBudget:
    """Which refusal records are written one by one, and summaries of the rest. Thread-safe:
    the edges record from worker threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[RefusalKey, _Window] = {}
        self._minute = _Window(start=clock())
        self.unwritten_total = 0

    def admit(self, entry: AuditRecord) -> tuple[bool, list[AuditRecord]]:
        """(write `entry`?, summary records of windows that ended, to write first)."""
        now = self._clock()
        key = (entry.actor, entry.role, entry.edge, entry.action, entry.outcome)
        with self._lock:
            summaries = self._ended(now)
            if now - self._minute.start >= REFUSAL_WINDOW_S:
                self._minute = _Window(start=now)
            window = self._windows.setdefault(key, _Window(start=now))
            if window.written < REFUSALS_PER_KEY and self._minute.written < REFUSALS_PER_MINUTE:
                window.written += 1
                self._minute.written += 1
                return True, summaries
            window.unwritten += 1
            window.last = entry
            self.unwritten_total += 1
            return False, summaries

    def ended(self) -> list[AuditRecord]:
        """Summaries of the windows that ended by now (the hub calls this each minute)."""
        with self._lock:
            return self._ended(self._clock())

    def _ended(self, now: float) -> list[AuditRecord]:
        summaries: list[AuditRecord] = []
        for key, window in list(self._windows.items()):
            if now - window.start < REFUSAL_WINDOW_S:
                continue
            del self._windows[key]
            if window.unwritten and window.last is not None:
                summaries.append(_summary(window.last, window.unwritten, now - window.start))
        return summaries


def _summary(last: AuditRecord, count: int, span_s: float) -> AuditRecord:
    message = (
        f"{count} more refusals like this within {span_s:.0f} s, not recorded one by one"
        f' (docs/security.md "Refusals, bounded"); the last: {last.message}'
    )
    return replace(last, message=message[:MAX_AUDIT_MESSAGE])


def record_refusal(ctx: ServiceContext, budget: RefusalBudget, entry: AuditRecord) -> None:
    """Record a refused call within `budget`: written, or counted into a later summary."""
    admitted, summaries = budget.admit(entry)
    for summary in summaries:
        record(ctx, summary)
    if admitted:
        record(ctx, entry)


def flush_refusals(ctx: ServiceContext, budget: RefusalBudget) -> int:
    """Write the summaries of ended windows; how many."""
    summaries = budget.ended()
    for summary in summaries:
        record(ctx, summary)
    return len(summaries)


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
    with ctx.db.write(()) as conn:
        return audit.prune(conn, older_than=ctx.clock() - retention_s)
