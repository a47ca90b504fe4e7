"""What each control RPC needs (hub/access.py) and what its audit record names.

Every ControlService method has one `Rule` here; `rule_for` refuses to guess for a method that
has none (it needs the admin role), and tests/unit/hub/test_permissions.py fails until a new
RPC is classified, so adding an RPC is a conscious access decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from hub import access
from hub.service.access import ProjectRef, Via


@dataclass(frozen=True)
class Rule:
    needs: str
    # The audit target's kind ("workload"), and how to read the resource's ref from a request.
    kind: str
    ref: Callable[[Any], str] = lambda request: ""
    # For NEEDS_PROJECT: how to find the project(s) the call touches.
    project: Callable[[Any], ProjectRef] | None = None
    # Changes something: every call is audited, allowed or refused.
    mutating: bool = True

    def target(self, request: Message) -> str:
        ref = self.ref(request)
        return f"{self.kind}/{ref}" if ref else self.kind


def _read(kind: str) -> Rule:
    return Rule(access.NEEDS_READ, kind, mutating=False)


def _admin(kind: str, ref: Callable[[Any], str]) -> Rule:
    return Rule(access.NEEDS_ADMIN, kind, ref)


def _by(via: Via, field: str, kind: str) -> Rule:
    def ref(request: Any) -> str:
        return str(getattr(request, field))

    return Rule(access.NEEDS_PROJECT, kind, ref, lambda r: ProjectRef(via, ref(r)))


RULES: dict[str, Rule] = {
    # Projects and quotas: the admin's (an operator raising its own quota defeats quota).
    "CreateProject": _admin("project", lambda r: r.project.name),
    "GetProject": _read("project"),
    "ListProjects": _read("project"),
    "UpdateProject": _admin("project", lambda r: r.name or r.project.name),
    "DeleteProject": _admin("project", lambda r: r.name),
    # Clusters: the admin's.
    "CreateCluster": _admin("cluster", lambda r: r.cluster.cluster_id),
    "GetCluster": _read("cluster"),
    "ListClusters": _read("cluster"),
    "UpdateCluster": _admin("cluster", lambda r: r.cluster_id or r.cluster.cluster_id),
    "DeleteCluster": _admin("cluster", lambda r: r.cluster_id),
    "RotateClusterToken": _admin("cluster", lambda r: r.cluster_id),
    # Maintenance moves what may run where, across projects: the admin's.
    "CordonCluster": _admin("cluster", lambda r: r.cluster_id),
    "UncordonCluster": _admin("cluster", lambda r: r.cluster_id),
    "DrainCluster": _admin("cluster", lambda r: r.cluster_id),
    # Workloads: their project's operators.
    "CreateWorkload": Rule(
        access.NEEDS_PROJECT,
        "workload",
        lambda r: f"{r.workload.project}/{r.workload.name}",
        lambda r: ProjectRef("project", r.workload.project),
    ),
    "GetWorkload": _read("workload"),
    "ListWorkloads": _read("workload"),
    "UpdateWorkload": _by("workload", "ref", "workload"),
    "DeleteWorkload": _by("workload", "ref", "workload"),
    "ResumeWorkloadRollout": _by("workload", "ref", "workload"),
    "PauseWorkloadRollout": _by("workload", "ref", "workload"),
    "AbortWorkloadRollout": _by("workload", "ref", "workload"),
    "ListDeployments": _read("deployment"),
    "GetDeployment": _read("deployment"),
    "UpdateDeployment": _by("deployment", "ref", "deployment"),
    "SetDeploymentAuthority": _by("deployment", "ref", "deployment"),
    "ReviewDeployment": _read("deployment"),
    "GetAppliedObject": _read("deployment"),
    # Discovered: decisions on entries bound to an operator's workload; promoting into one of
    # its projects. An unbound entry's track/ignore is the admin's (it belongs to no project).
    "ListDiscovered": _read("discovered"),
    "GetDiscovered": _read("discovered"),
    "TrackDiscovered": _by("discovered", "ref", "discovered"),
    "IgnoreDiscovered": _by("discovered", "ref", "discovered"),
    "PromoteDiscovered": Rule(
        access.NEEDS_PROJECT,
        "discovered",
        lambda r: r.ref,
        lambda r: ProjectRef("project", r.project),
    ),
    "ListReplicas": _read("replica"),
    "GetReplica": _read("replica"),
    "ListAllocations": _read("allocation"),
    # Tokens and the audit log: the admin's, reads included (they say who may do what).
    "CreateApiToken": _admin("token", lambda r: r.token.name),
    "ListApiTokens": Rule(access.NEEDS_ADMIN, "token", mutating=False),
    "RevokeApiToken": _admin("token", lambda r: r.name),
    "ListAuditRecords": Rule(access.NEEDS_ADMIN, "audit", mutating=False),
    # Watch: a read, as the List calls it streams (each event filtered as they filter).
    "Watch": _read("watch"),
}

# Unclassified: the admin's, and audited as a change (fail closed).
_UNCLASSIFIED = Rule(access.NEEDS_ADMIN, "")


def rule_for(method_name: str) -> Rule:
    return RULES.get(method_name, _UNCLASSIFIED)
