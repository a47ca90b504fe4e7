"""Who may act and what was done: API tokens (hub/access.py's roles) and audit records
(docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiToken:
    """A scoped API token (hub/access.py roles); the hub keeps its secret's hash only."""

    name: str
    role: str
    projects: tuple[str, ...]
    create_time: float
    created_by: str
    revoke_time: float | None = None


@dataclass(frozen=True)
class AuditRecord:
    """One audited event (docs/security.md): a mutating call or an agent's connection event."""

    time: float
    actor: str
    role: str
    edge: str
    action: str
    target: str
    outcome: str
    message: str = ""
    id: int = 0
