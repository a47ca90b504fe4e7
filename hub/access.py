"""Who may do what: roles, principals and the one decision `authorize`. Pure.

Three roles (docs/security.md):
- viewer: reads everything, changes nothing;
- operator of named projects: reads everything, and changes workloads of those projects, their
  deployments (scale, enable, authority) and discovered entries bound to them, and promotes
  discovered workloads into them. Quotas, projects, clusters, tokens and the audit log stay
  the admin's: an operator who could raise its own quota would make quota meaningless;
- admin: everything (the bootstrap admin token is one).

Reads are not scoped by project: capacity, pending reasons and placement are fleet-wide facts
an operator needs to understand its own workloads; the threat this guards against is one team
changing another's workloads or quotas. (Per-project read isolation would be a later change.)

The edges classify every RPC (hub/api/permissions.py: a `Rule`); the service resolves which
projects a call touches (hub/service/access.py); this module only decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hub import errors

ROLE_VIEWER = "viewer"
ROLE_OPERATOR = "operator"
ROLE_ADMIN = "admin"
ROLES = (ROLE_VIEWER, ROLE_OPERATOR, ROLE_ADMIN)

# What a call needs.
NEEDS_READ = "read"  # any authenticated principal
NEEDS_PROJECT = "project"  # admin, or an operator of every project the call touches
NEEDS_ADMIN = "admin"  # admin only
NEEDS = (NEEDS_READ, NEEDS_PROJECT, NEEDS_ADMIN)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `actor` is how the audit log names it."""

    actor: str
    role: str
    projects: frozenset[str] = frozenset()

    def describe(self) -> str:
        if self.role == ROLE_OPERATOR:
            return f"{self.actor} (operator of {', '.join(sorted(self.projects))})"
        return f"{self.actor} ({self.role})"


ADMIN = Principal(actor="admin", role=ROLE_ADMIN)


def authorize(
    principal: Principal, *, action: str, needs: str, projects: Iterable[str] | None = None
) -> None:
    """Allow, or raise PermissionDenied naming what the principal lacks.

    `projects`: for NEEDS_PROJECT, the projects the call touches; None when the call touches
    no project an operator could hold (a discovered entry bound to no workload yet), which
    only an admin may then do.
    """
    if needs not in NEEDS:
        raise ValueError(f"unknown requirement {needs!r}")
    if principal.role == ROLE_ADMIN or needs == NEEDS_READ:
        return
    if needs == NEEDS_ADMIN or principal.role != ROLE_OPERATOR:
        wanted = "the admin role" if needs == NEEDS_ADMIN else "an operator or admin role"
        raise errors.PermissionDenied(
            f"{action} needs {wanted}; {principal.describe()} may not call it"
        )
    if projects is None:
        raise errors.PermissionDenied(
            f"{action} on a resource bound to no project needs the admin role;"
            f" {principal.describe()} may not call it"
        )
    outside = sorted(set(projects) - principal.projects)
    if outside:
        raise errors.PermissionDenied(
            f"{action} touches project {', '.join(outside)};"
            f" {principal.describe()} may change only its own projects"
        )
