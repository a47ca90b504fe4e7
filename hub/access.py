"""Who may do what: roles, principals and the one decision `authorize`. Pure.

Four roles (docs/security.md "Roles and scoped tokens"):
- viewer of named projects: reads those projects' workloads, deployments, replicas and
  allocations (and the fleet's facts: clusters, projects, inventory); changes nothing;
- operator of named projects: reads as a viewer of them, and changes workloads of those
  projects, their deployments (scale, enable, authority) and discovered entries bound to them,
  and promotes discovered workloads into them. Quotas, projects, clusters, tokens and the
  audit log stay the admin's: an operator who could raise its own quota would make quota
  meaningless;
- fleet_viewer: reads the whole fleet, every project's workloads included; changes nothing;
- admin: everything (the bootstrap admin token is one).

Project-scoped tokens read only their own projects' workloads, deployments, replicas and
allocations: one team's model names, configs and pods are not another team's to read.
Capacity, clusters and projects stay fleet facts every caller reads: an operator needs them to
understand why its own workloads wait. A viewer token stored before viewers named projects
(none named) is a fleet_viewer: it reads the whole fleet, as it did (hub/store/tokens.py).

The edges classify every RPC (hub/api/permissions.py: a `Rule`); the service resolves which
projects a call touches (hub/service/access.py); this module only decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hub import errors

ROLE_VIEWER = "viewer"
ROLE_OPERATOR = "operator"
ROLE_FLEET_VIEWER = "fleet_viewer"
ROLE_ADMIN = "admin"
ROLES = (ROLE_VIEWER, ROLE_OPERATOR, ROLE_FLEET_VIEWER, ROLE_ADMIN)
# Roles whose tokens name the projects they hold (and read).
PROJECT_ROLES = (ROLE_VIEWER, ROLE_OPERATOR)

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
        if self.role in PROJECT_ROLES and self.projects:
            return f"{self.actor} ({self.role} of {', '.join(sorted(self.projects))})"
        return f"{self.actor} ({self.role})"

    @property
    def readable(self) -> frozenset[str] | None:
        """The projects whose workloads (deployments, replicas, allocations) it reads; None:
        every project (admin, fleet_viewer)."""
        return self.projects if self.role in PROJECT_ROLES else None

    def reads(self, project: str) -> bool:
        readable = self.readable
        return readable is None or project in readable


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
