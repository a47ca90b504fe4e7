"""What a caller may read, as the handlers (hub/api/handlers.py) check it: a list filter's
parent must exist, and a project-scoped token neither reads nor learns of other projects'
resources (hub/access.py holds the roles; this is how a read applies them).
"""

from __future__ import annotations

from hub import access, errors
from hub.service import clusters, inventory, projects
from hub.service.context import ServiceContext


def require(
    ctx: ServiceContext, *, project: str = "", cluster_id: str = "", replica: str = ""
) -> None:
    """A list filter naming a parent that does not exist is NOT_FOUND, not an empty page:
    the same for every filter (an unknown workload_id, deployment_id or replica_id already
    is), so a typo never reads as "nothing there" (docs/rest.md)."""
    if project:
        projects.get(ctx, project)
    if cluster_id:
        clusters.require(ctx, cluster_id)
    if replica:
        inventory.get_replica(ctx, replica)  # a gone replica's id, too


def reads(principal: access.Principal, kind: str, ref: str, project: str) -> None:
    """Another project's resource is NOT_FOUND to a scoped token, exactly as one that does
    not exist: it learns nothing of other teams' workloads, not even their names."""
    if not principal.reads(project):
        raise errors.NotFound(kind, ref)


def reads_filter(principal: access.Principal, action: str, project: str) -> None:
    """A list filtered by a project the caller may not read is refused, naming why."""
    if project and not principal.reads(project):
        raise errors.PermissionDenied(
            f"{action} of project {project}: {principal.describe()} reads only its own"
            " projects' workloads, deployments, replicas and allocations"
        )
