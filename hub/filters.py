"""What a list call may filter on: query values, built by the edges (hub/api) from a request,
narrowed by the service to a scoped token's projects, and turned into WHERE clauses by the
store (hub/store). Plain frozen values, so the edges need not import the store to ask it
something. An empty string matches every value of its field.

A label selector (`LabelSelector`, parsed by hub/service/selectors.py) selects by labels: a
workload's or project's or cluster's own, and for deployments, replicas, allocations and
discovered workloads their workload's (as a pod carries its template's labels). The store
turns it into WHERE clauses (hub/store/labels.py), so a page is cut after selecting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    # One of "=", "!=", "exists", "!exists".
    op: str
    value: str = ""

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.op == "=":
            return labels.get(self.key) == self.value
        if self.op == "!=":
            return labels.get(self.key) != self.value
        if self.op == "exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    """Every requirement must hold; no requirement: everything matches."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.holds(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


EVERYTHING = LabelSelector()


@dataclass(frozen=True)
class DeploymentFilter:
    workload_id: str = ""
    cluster_id: str = ""
    project: str = ""
    # Only these projects' (a scoped token's); None: every project.
    projects: frozenset[str] | None = None
    # Only those whose workload's labels match (none: every one).
    labels: LabelSelector = EVERYTHING


@dataclass(frozen=True)
class ReplicaFilter:
    deployment_id: str = ""
    cluster_id: str = ""
    replica_id: str = ""
    # Only replicas of these projects' deployments (a scoped token's); None: every one.
    projects: frozenset[str] | None = None
    # Only those whose workload's labels match (none: every one).
    labels: LabelSelector = EVERYTHING


@dataclass(frozen=True)
class AllocationFilter:
    replica_id: str = ""
    deployment_id: str = ""
    project: str = ""
    cluster_id: str = ""
    # Only allocations of these projects' replicas (a scoped token's; a pod of no deployment
    # belongs to none); None: every one.
    projects: frozenset[str] | None = None
    # Only those whose workload's labels match (none: every one).
    labels: LabelSelector = EVERYTHING


@dataclass(frozen=True)
class AuditFilter:
    actor: str = ""
    action: str = ""
    target: str = ""
    outcome: str = ""
    since: float | None = None
    until: float | None = None
