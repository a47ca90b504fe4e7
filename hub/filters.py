"""What a list call may filter on: query values, built by the edges (hub/api) from a request,
narrowed by the service to a scoped token's projects, and turned into WHERE clauses by the
store (hub/store). Plain frozen values, so the edges need not import the store to ask it
something. An empty string matches every value of its field.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeploymentFilter:
    workload_id: str = ""
    cluster_id: str = ""
    project: str = ""
    # Only these projects' (a scoped token's); None: every project.
    projects: frozenset[str] | None = None


@dataclass(frozen=True)
class ReplicaFilter:
    deployment_id: str = ""
    cluster_id: str = ""
    replica_id: str = ""
    # Only replicas of these projects' deployments (a scoped token's); None: every one.
    projects: frozenset[str] | None = None


@dataclass(frozen=True)
class AllocationFilter:
    replica_id: str = ""
    deployment_id: str = ""
    project: str = ""
    cluster_id: str = ""
    # Only allocations of these projects' replicas (a scoped token's; a pod of no deployment
    # belongs to none); None: every one.
    projects: frozenset[str] | None = None


@dataclass(frozen=True)
class AuditFilter:
    actor: str = ""
    action: str = ""
    target: str = ""
    outcome: str = ""
    since: float | None = None
    until: float | None = None
